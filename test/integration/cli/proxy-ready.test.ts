/**
 * `poise proxy --band ... --metrics`: /healthz answers 200 only once every
 * listener accepts — --listen and each --band listener, in every worker
 * thread — and a membership is in force. The band listeners' listen is held
 * back 1.5 s by a preload (test/helpers/slow-listen.cjs, in every thread of
 * the child), so there is a known window in which --listen accepts and the
 * bands do not; /healthz is polled through it, and at the first 200 every
 * port must take a connection.
 */
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { until } from '../../helpers/until.js';
import { refused, startProxy } from '../../helpers/proxy-process.js';
import { freePort } from '../../helpers/ports.js';

const SLOW_LISTEN = fileURLToPath(new URL('../../helpers/slow-listen.cjs', import.meta.url));
const HOLD_MS = 1500;

async function healthz(port: number): Promise<[number, string]> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`);
    return [r.status, await r.text()];
  } catch {
    return [0, ''];
  }
}

describe('poise proxy /healthz with --band listeners', () => {
  // --workers 2: every listener runs worker threads (two each with reusePort, Node >= 22.12; one each on Node 20,
  // where the held-back listen runs in the band listener's own worker thread all the same).
  it.each([0, 2])('--workers %i: the first 200 comes only once --listen and every band port accept', async (workers) => {
    const backend = net.createServer((s) => s.on('error', () => {}).pipe(s));
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    const [main, batch, bulk, metrics] = [await freePort(), await freePort(), await freePort(), await freePort()];
    const p = startProxy(
      [
        '--listen',
        `127.0.0.1:${main}`,
        '--backend',
        `a=127.0.0.1:${(backend.address() as net.AddressInfo).port}`,
        '--workers',
        String(workers),
        '--band',
        'web=10',
        '--band',
        `batch=1:127.0.0.1:${batch}`,
        '--band',
        `bulk=0:127.0.0.1:${bulk}`,
        '--admission-ceiling-min',
        '0',
        '--metrics',
        `127.0.0.1:${metrics}`,
      ],
      {
        NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} --require ${SLOW_LISTEN}`.trim(),
        POISE_TEST_SLOW_LISTEN: `${batch},${bulk}:${HOLD_MS}`,
      },
    );
    try {
      await p.until((rs) => rs.some((r) => r['msg'] === 'metrics listening'), 'metrics listening');
      const reasons = new Set<string>();
      let first: [number, string] = [0, ''];
      await until(
        async () => {
          first = await healthz(metrics);
          if (first[0] === 503) reasons.add(first[1]);
          return first[0] === 200;
          // Two worker threads' start under a loaded CI run took over 15 s once (Node 26): the deadline is a safety net.
        },
        'the first /healthz 200',
        60_000,
      );
      // At that moment every port takes a connection.
      const accepting = await Promise.all([main, batch, bulk].map(async (port) => [port, !(await refused(port))]));
      expect(accepting).toEqual([
        [main, true],
        [batch, true],
        [bulk, true],
      ]);
      expect(first).toEqual([200, 'ok\n']);
      // The polls went through the window in which --listen accepted and the band listeners did not.
      expect([...reasons]).toContain(`not ready: --band batch listener 127.0.0.1:${batch} is not up\n`);
      // The child's log reaches us through a pipe, on its own schedule: wait for the line, then count it.
      await p.until((rs) => rs.some((r) => r['msg'] === 'proxy ready'), 'the proxy ready line');
      expect(p.find('proxy ready')).toHaveLength(1);
      expect(await p.stop()).toBe(0);
    } finally {
      p.kill();
      await new Promise((r) => backend.close(r));
    }
  });
});
