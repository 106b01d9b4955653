/**
 * `poise proxy --band`: admission where connections enter, in a child
 * process — flag validation (exit 2), a band listener of its own, and
 * every worker thread of --listen and of the band listener gating. The
 * in-process laws: test/proxy/admission.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { parseMetricsText } from '../../../src/metrics/text-format.js';
import { CLI } from '../../helpers/cli.js';
import { fileEchoServer } from '../../helpers/echo-server.js';
import { destroyed, helloClient } from '../../helpers/loopback.js';
import { freePort } from '../../helpers/ports.js';
import { startProxy } from '../../helpers/proxy-process.js';
import { until } from '../../helpers/until.js';

/** The backend: answers `echo:` and what it read; `backend.sockets` are the connections it holds now. */
const backend = fileEchoServer('echo');

describe('poise proxy --band', () => {
  function usage(args: string[]): { status: number | null; stderr: string } {
    const r = spawnSync(process.execPath, [CLI, 'proxy', '--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', ...args], {
      encoding: 'utf8',
    });
    return { status: r.status, stderr: r.stderr };
  }

  it('names every bad admission flag at once (exit 2)', () => {
    const r = usage([
      '--band',
      'web=10',
      '--band',
      'web=3',
      '--band',
      'x=1:nowhere',
      '--band-cidr',
      '10.0.0.0/40=web',
      '--admission-ceiling-max',
      '2',
      '--admission-timeout',
      '0',
    ]);
    expect(r.status).toBe(2);
    for (const f of [
      '--band #2',
      '--band #3',
      '--band-cidr #1',
      '--admission-ceiling-max',
      '--admission-timeout',
      '--admission-ceiling-min: required',
    ])
      expect(r.stderr).toContain(f);
    // A band is NAME=RANK (larger = more important): the messages say rank, never priority (the failover tier).
    const ranks = usage(['--band', 'web=10', '--band', 'api=10', '--band', 'batch=low', '--admission-ceiling-min', '0.5']);
    expect(ranks.status).toBe(2);
    expect(ranks.stderr).toContain('--band #2: rank 10 given to two bands');
    expect(ranks.stderr).toContain('--band #3: must be NAME=RANK or NAME=RANK:HOST:PORT');
    expect(ranks.stderr).not.toMatch(/priority/i);
    const help = spawnSync(process.execPath, [CLI, 'proxy', '--help'], { encoding: 'utf8' });
    expect(help.stdout).toContain('--band NAME=RANK[:HOST:PORT]');
    const lone = usage(['--admission-ceiling-min', '0.5']);
    expect(lone.status).toBe(2);
    expect(lone.stderr).toContain('--admission-ceiling-min: needs --band');
  });

  it('a band listener of its own: the second batch client waits for admission while a --listen client passes', async () => {
    const [main, low, metrics] = [await freePort(), await freePort(), await freePort()];
    const p = startProxy([
      '--listen',
      `127.0.0.1:${main}`,
      '--backend',
      `a=127.0.0.1:${backend.port}`,
      '--policy',
      'p2c:connections',
      '--band',
      'web=10',
      '--band',
      `batch=1:127.0.0.1:${low}`,
      '--admission-ceiling-min',
      '0',
      '--admission-capacity',
      '2',
      '--log-level',
      'info',
      '--metrics',
      `127.0.0.1:${metrics}`,
    ]);
    try {
      await p.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
      expect(p.find('admission bands ready')[0]).toMatchObject({ capacity: 2 });
      const before = backend.sockets.size;
      const first = helloClient(low);
      await first.echoed; // idle pool: even a ceiling of 0 flows
      const second = helloClient(low);
      const queued = async (): Promise<number | undefined> => {
        const f = parseMetricsText(await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text());
        return f.get('poise_admission_queue_length')?.samples.find((x) => x.labels['band'] === '1')?.value;
      };
      await until(async () => (await queued()) === 1, 'the second batch client queued', 15_000, 50);
      expect(backend.sockets.size).toBe(before + 1); // held: 1 / 2 > 0
      const w = helloClient(main);
      await w.echoed; // web: 1 < 2
      await destroyed(w.socket);
      await destroyed(first.socket); // 0: the batch waiter goes
      await second.echoed;
      await destroyed(second.socket);
      expect(await p.stop()).toBe(0);
    } finally {
      p.kill();
    }
  });

  it('with --workers 2: every worker thread of --listen and of the band listener gates; /metrics sums admitted per band over them', async () => {
    const [main, low, metrics] = [await freePort(), await freePort(), await freePort()];
    const p = startProxy([
      '--listen',
      `127.0.0.1:${main}`,
      '--backend',
      `a=127.0.0.1:${backend.port}`,
      '--workers',
      '2',
      '--band',
      'web=10',
      '--band',
      `batch=1:127.0.0.1:${low}`,
      '--admission-ceiling-min',
      '0.5',
      '--admission-capacity',
      '1000',
      '--metrics',
      `127.0.0.1:${metrics}`,
    ]);
    try {
      await p.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
      expect(p.find('admission bands ready')[0]).toMatchObject({ capacity: 1000 });
      expect(p.find('--workers is not used')).toHaveLength(0);
      // 30 clients on each listener, each echoed (admitted), then closed.
      for (const port of [main, low]) {
        const cs = Array.from({ length: 30 }, () => helloClient(port));
        await Promise.all(cs.map((c) => c.echoed));
        for (const c of cs) await destroyed(c.socket);
      }
      const text = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text();
      const f = parseMetricsText(text);
      const admitted = (band: string) => f.get('poise_admission_admitted_total')?.samples.find((x) => x.labels['band'] === band)?.value;
      expect(admitted('10')).toBe(30);
      expect(admitted('1')).toBe(30);
      // The proxy counters: --listen's two workers in rows 0 and 1, the band listener's in rows 2 and 3.
      const rows = f.get('poise_proxy_accepted_total')!.samples;
      const row = (w: string) => rows.find((x) => x.labels['worker'] === w)?.value ?? 0;
      expect(row('0') + row('1')).toBe(30);
      expect(row('2') + row('3')).toBe(30);
      expect(await p.stop()).toBe(0);
    } finally {
      p.kill();
    }
  });
});
