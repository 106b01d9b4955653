/**
 * `poise proxy --metrics HOST:PORT` as a child process: /healthz is 503
 * while it waits for a first membership (a --file not written yet), 200 once
 * the file is applied and the listener is up; /metrics then counts what the
 * clients did through it and what the backend holds.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseMetricsText } from '../../../src/metrics/text-format.js';
import { runCli } from '../../helpers/cli.js';
import { until } from '../../helpers/until.js';
import { startProxy } from '../../helpers/proxy-process.js';
import { freePort } from '../../helpers/ports.js';

async function get(port: number, p: string): Promise<[number, string]> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}${p}`);
    return [r.status, await r.text()];
  } catch {
    return [0, ''];
  }
}

/** Process and Node.js metrics docs/monitoring.md names. */
const PROCESS_METRICS = [
  'process_cpu_user_seconds_total',
  'process_cpu_system_seconds_total',
  'process_resident_memory_bytes',
  'process_open_fds',
  'process_start_time_seconds',
  'nodejs_eventloop_lag_seconds',
  'nodejs_heap_size_used_bytes',
  'nodejs_gc_duration_seconds',
  'nodejs_active_handles',
  'nodejs_version_info',
];

describe('poise proxy --metrics', () => {
  it('/healthz 503 until the membership file arrives, then 200; /metrics counts the clients and the backend connections (source file)', async () => {
    let open = 0;
    const backend = net.createServer((s) => {
      open++;
      s.on('data', (d) => s.write(d));
      s.on('error', () => {});
      s.on('close', () => open--);
    });
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-metrics-'));
    const file = path.join(dir, 'members.json');
    const [listen, metrics] = [await freePort(), await freePort()];
    const proxy = startProxy([
      '--listen',
      `127.0.0.1:${listen}`,
      '--file',
      file,
      '--metrics',
      `127.0.0.1:${metrics}`,
      '--wait-log-interval',
      '100',
    ]);
    const clients: net.Socket[] = [];
    try {
      await proxy.until((rs) => rs.some((r) => r['msg'] === 'metrics listening'), 'metrics listening');
      expect(await get(metrics, '/healthz')).toEqual([503, 'not ready: no membership in force\n']);
      writeFileSync(
        file,
        JSON.stringify({
          cluster: 'web',
          backends: [{ id: 'web-1', address: `127.0.0.1:${(backend.address() as net.AddressInfo).port}` }],
        }),
      );
      // The proxy applies the file and starts its threads: 60 s, as every wait on a proxy process (a loaded CI took over 15).
      await until(async () => (await get(metrics, '/healthz'))[0] === 200, '/healthz 200', 60_000);
      expect(await get(metrics, '/healthz')).toEqual([200, 'ok\n']);
      for (let i = 0; i < 3; i++) {
        const c = net.connect(listen, '127.0.0.1');
        clients.push(c);
        c.on('error', () => {});
        const echoed = new Promise((r) => c.once('data', r));
        c.write('ping\n');
        await echoed;
      }
      const [status, text] = await get(metrics, '/metrics');
      expect(status).toBe(200);
      const f = parseMetricsText(text);
      const val = (name: string, labels: Record<string, string> = {}) =>
        f.get(name)?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
      expect(val('poise_backend_connections', { backend: 'web-1' })).toBe(open);
      expect(open).toBe(3);
      // Summed over the accepting threads (one per core with reusePort on Node >= 22.12, else one).
      const sum = (name: string) => (f.get(name)?.samples ?? []).reduce((a, x) => a + x.value, 0);
      expect(sum('poise_proxy_accepted_total')).toBe(3);
      expect(sum('poise_proxy_active_connections')).toBe(3);
      expect(f.get('poise_proxy_accepted_total')?.samples.some((x) => x.labels['worker'] === '0')).toBe(true);
      expect(val('poise_proxy_bytes_total', { direction: 'in' })).toBe(15);
      expect(val('poise_membership_info', { source: 'file' })).toBe(1);
      expect(val('poise_membership_source_up', { source: 'file' })).toBe(1);
      expect(val('poise_backend_state', { backend: 'web-1', state: 'ready' })).toBe(1);
      // The cluster label is the document's "cluster" (no --cluster given), on every sample that has one.
      const clusters = new Set(
        [...f.values()].flatMap((fam) => fam.samples.map((x) => x.labels['cluster']).filter((c) => c !== undefined)),
      );
      expect([...clusters]).toEqual(['web']);
      // prom-client's process and Node.js metrics, under their standard names (the list docs/monitoring.md gives).
      for (const name of PROCESS_METRICS) expect(f.has(name), name).toBe(true);
      expect(val('process_resident_memory_bytes')).toBeGreaterThan(0);
    } finally {
      for (const c of clients) c.destroy();
      const code = await proxy.stop();
      // On failure, the end of stderr says why: the last log lines, or a stack or `poise: ...` line that is not JSON.
      expect(code, proxy.stderrTail()).toBe(0);
      proxy.kill();
      await new Promise((r) => backend.close(r));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a bad --metrics address is a usage error naming the flag (exit 2)', async () => {
    const r = await runCli(['proxy', '--listen', '127.0.0.1:1', '--backend', 'a=127.0.0.1:2', '--metrics', 'nope']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--metrics: must be HOST:PORT with a port in [1, 65535], got "nope"');
  });

  it('--no-process-metrics leaves out every process_ and nodejs_ family; --backend HOST:PORT without ID= is named by its address; the cluster is "default"', async () => {
    const backend = net.createServer((s) => s.on('error', () => {}));
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    const address = `127.0.0.1:${(backend.address() as net.AddressInfo).port}`;
    const [listen, metrics] = [await freePort(), await freePort()];
    const proxy = startProxy([
      '--listen',
      `127.0.0.1:${listen}`,
      '--backend',
      address,
      '--metrics',
      `127.0.0.1:${metrics}`,
      '--no-process-metrics',
    ]);
    try {
      await proxy.until((rs) => rs.some((r) => r['msg'] === 'proxy ready'), 'proxy ready');
      const [status, text] = await get(metrics, '/metrics');
      expect(status).toBe(200);
      const f = parseMetricsText(text);
      expect([...f.keys()].filter((n) => !n.startsWith('poise_'))).toEqual([]);
      const states = f.get('poise_backend_state')!.samples.filter((x) => x.labels['state'] === 'ready');
      expect(states.map((x) => [x.labels['backend'], x.labels['cluster'], x.value])).toEqual([[address, 'default', 1]]);
    } finally {
      const code = await proxy.stop();
      // On failure, the end of stderr says why: the last log lines, or a stack or `poise: ...` line that is not JSON.
      expect(code, proxy.stderrTail()).toBe(0);
      proxy.kill();
      await new Promise((r) => backend.close(r));
    }
  });

  it('--no-process-metrics without --metrics is a usage error (exit 2)', async () => {
    const r = await runCli(['proxy', '--listen', '127.0.0.1:1', '--backend', 'a=127.0.0.1:2', '--no-process-metrics']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--no-process-metrics: needs --metrics');
  });
});
