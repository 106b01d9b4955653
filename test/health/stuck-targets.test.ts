// One stuck target never delays another's verdict (issue 35): every
// owner-side poller is run beside a dripping target (it accepts and sends a
// byte every 150 ms, never finishing) and a silent one (it accepts and never
// answers), and a healthy target's verdict or weight must still change on
// time. The pollers run on a ManualTimers (their rounds and their deadlines),
// so "on time" is a point of the test's own clock; the real sockets are
// waited on by events (the verdict or the weight changing), never by time.
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { OrcaWeights, resolveOrca } from '../../src/health/orca.js';
import type { HealthTarget } from '../../src/health/targets.js';
import { ReportFlag } from '../../src/load/backend-load.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { listenLoopback } from '../helpers/loopback.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { until } from '../helpers/until.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const silentLog = createLogger({ level: 'silent' });

/** A target that accepts and sends `prefix`, then `filler`, one byte every 150 ms (real time), never finishing. */
function dripping(prefix: string, filler = 'x'): Promise<number> {
  return listenLoopback(cleanups, (s) => {
    let k = 0;
    const tick = setInterval(() => {
      s.write(k < prefix.length ? prefix[k]! : filler);
      k++;
    }, 150);
    s.once('close', () => clearInterval(tick));
  });
}

/** A target that accepts and never answers. */
function silent(): Promise<number> {
  return listenLoopback(cleanups, () => {});
}

/** HealthTargets of every live backend of `b`, as the Balancer hands them to its pollers. */
function targetsOf(b: Balancer): HealthTarget[] {
  return b
    .slotEntries()
    .filter((e) => !e.removed)
    .map((e) => {
      const [host, port] = e.spec.address.split(':');
      return {
        slot: e.slot,
        generation: b.ownerTable.tag(e.slot) >>> 3,
        id: e.id,
        address: e.spec.address,
        host: host!,
        port: Number(port),
        priority: 0,
        role: 'none' as const,
      };
    });
}

describe('ORCA load endpoints beside a dripping and a silent one', () => {
  it('the healthy weights apply as they answer, the stuck polls end at their deadline, and a report expires at its round', async () => {
    let aUtilization = 0.5;
    let aAnswers = true;
    const reportServer = (report: () => string | undefined): Promise<number> => {
      const server = createHttpServer((_req, res) => {
        const r = report();
        // Gone quiet: the request is held, unanswered.
        if (r === undefined) return;
        res.setHeader('endpoint-load-metrics', r);
        res.end();
      });
      return new Promise((resolve) => {
        server.listen(0, '127.0.0.1', () => {
          cleanups.push(
            () => new Promise<void>((r) => server.close(() => r())),
            () => server.closeAllConnections(),
          );
          resolve((server.address() as AddressInfo).port);
        });
      });
    };
    const ports = {
      a: await reportServer(() => (aAnswers ? `TEXT cpu_utilization=${aUtilization}, rps_fractional=100` : undefined)),
      b: await reportServer(() => 'TEXT cpu_utilization=0.25, rps_fractional=100'),
      drip: await dripping('HTTP/1.1 200 OK\r\nx-drip: ', 'a'),
      silent: await silent(),
    };
    const timers = new ManualTimers(1000);
    const b = new Balancer({ capacity: 8, clock: () => timers.now(), logger: silentLog });
    cleanups.push(() => b.close());
    b.update(Object.entries(ports).map(([id, port]) => ({ id, address: `127.0.0.1:${port}` })));
    const o = resolveOrca({ intervalMs: 1000, timeoutMs: 500, blackoutMs: 0, expiryMs: 3000 }, 'health.orca');
    const orca = new OrcaWeights(b.ownerTable, o, silentLog, () => timers.now(), timers);
    cleanups.push(() => orca.close());
    orca.sync(targetsOf(b));
    const slot = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
    const multiplier = (id: string): number => b.ownerTable.reported.multiplier(slot(id));
    const near = (x: number, y: number): boolean => Math.abs(x - y) < 1e-5;

    orca.start();
    // Round 1 (t = 1000): a (weight 200) and b (400) answer; drip and silent get the mean (300).
    await timers.advance(0);
    await until(() => near(multiplier('a'), 2 / 3) && near(multiplier('b'), 4 / 3), 'the weights of a and b, applied while two polls hang');
    expect(orca.counts).toEqual({ reports: 2, refused: 0 });
    expect(near(multiplier('drip'), 1) && near(multiplier('silent'), 1)).toBe(true);
    // Their deadline (500 ms from the start of the poll: connect, headers and body) ends both stuck polls.
    await timers.advance(500);
    await until(() => orca.counts.refused === 2, 'the dripping and the silent poll cut off at their deadline');

    // Round 2 (t = 2000): a reports 800; it follows at once, whatever the stuck two do.
    aUtilization = 0.125;
    await timers.advance(500);
    await until(() => near(multiplier('a'), 4 / 3), "a's new weight");
    expect(near(multiplier('b'), 2 / 3)).toBe(true);
    await until(() => orca.counts.reports === 4, 'b answered round 2');

    // a goes quiet: its report of t = 2000 stays in force while younger than 3000 ms, and expires at round 5 (t = 5000).
    aAnswers = false;
    for (const [round, inForce] of [
      [3, true],
      [4, true],
      [5, false],
      [6, false],
    ] as const) {
      const reports = orca.counts.reports;
      await timers.advance(1000);
      expect(timers.now()).toBe(round * 1000);
      // The expiry is applied when the round starts, before any poll of it has answered.
      expect(near(multiplier('a'), inForce ? 4 / 3 : 1), `a's weight at round ${round}`).toBe(true);
      await until(() => orca.counts.reports === reports + 1, `b answered round ${round}`);
      // a now gets the mean of those in force: b's alone, so everyone is even.
      expect(near(multiplier('a'), inForce ? 4 / 3 : 1), `a's weight after b's answer of round ${round}`).toBe(true);
    }
    expect((b.ownerTable.reported.flags(slot('drip')) & ReportFlag.Weight) !== 0).toBe(true);
    // Every stuck poll ended at its deadline, one per target and round (drip and silent in rounds 1 to 5, a in 3 to 5;
    // round 6's are still running): a hung backend is never polled twice at once.
    await until(() => orca.counts.refused === 13, 'every stuck poll of rounds 1 to 5 refused');
  });
});
