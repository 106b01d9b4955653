// A reported weight of 0 is HAProxy's weight 0 (issue 35): an agent's `0%`
// or an ORCA weight that rounds to 0 takes the backend out of every new
// pick while another backend is eligible, for every policy; panic may still
// use it (unlike drain); a lease already held ends normally. Real TCP agents
// and load endpoints on loopback; the picks are seeded.
import { createServer as createHttpServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { ReportFlag } from '../../src/load/backend-load.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { POLICY_NAMES } from '../../src/runtime/policies.js';
import type { Router } from '../../src/runtime/router.js';
import { listenLoopback } from '../helpers/loopback.js';
import { manualClock, pickShares } from '../helpers/runtime.js';
import { until } from '../helpers/until.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const silentLog = createLogger({ level: 'silent' });
const fast = { intervalMs: 20, jitterPercent: 0 };

/** How many of `n` seeded acquires (keyed `k<i>`, for the keyed policies) went to `id`; each lease is released at once. */
function picksOf(router: Router, id: string, n: number): number {
  let hits = 0;
  for (let i = 0; i < n; i++) {
    const lease = router.acquire({ key: `k${i}` });
    if (lease.id === id) hits++;
    lease.release('success');
  }
  return hits;
}

describe('a reported weight of 0', () => {
  it("an agent's 0%: no pick of it under any policy while others are eligible, every pick in panic, a lease held ends normally", async () => {
    const replies = new Map([
      ['a', 'up 100%'],
      ['b', 'up 100%'],
      ['c', 'up 100%'],
    ]);
    const ports = new Map<string, number>();
    for (const id of replies.keys()) ports.set(id, await listenLoopback(cleanups, (s) => s.end(`${replies.get(id)}\n`)));
    const b = new Balancer({
      capacity: 8,
      logger: silentLog,
      // The picks below hold the event loop for a while: a check must not fail by a deadline passed meanwhile (b and c down would be a panic).
      health: { check: { kind: 'tcp', ...fast, timeoutMs: 30_000, rise: 1, fall: 1000 }, agent: { ...fast, timeoutMs: 30_000 } },
    });
    cleanups.push(() => b.close());
    b.update([...ports].map(([id, port]) => ({ id, address: `127.0.0.1:${port}` })));
    const slot = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
    const t = b.ownerTable;
    await until(() => (t.reported.flags(slot('c')) & ReportFlag.Weight) !== 0, 'the agents answered');
    await until(() => b.healthStats().backends.every((x) => x.check === 'up'), 'every tcp check passed');
    const routers = POLICY_NAMES.map((policy, k) => b.router({ policy, seed: 100 + k }));
    for (const r of routers) cleanups.push(() => r.close());
    // Before: a takes its share under every policy (5,000 picks; a third is ~1,667).
    for (const [k, r] of routers.entries()) expect(picksOf(r, 'a', 5000), POLICY_NAMES[k]).toBeGreaterThan(0);
    const held = routers[0]!.acquire({ exclude: ['b', 'c'] });
    expect(held.id).toBe('a');

    replies.set('a', 'up 0%');
    await until(() => t.reported.agentMultiplier(slot('a')) === 0, "a's 0%");
    // HAProxy's weight 0: not one of 5,000 picks per policy (today's 1 of 1,000 would give it about 2.5 each).
    for (const [k, r] of routers.entries()) expect(picksOf(r, 'a', 5000), POLICY_NAMES[k]).toBe(0);
    // The lease it held runs to its end and is counted back.
    const inFlight = (): number => t.connections(slot('a')) + t.requests(slot('a'));
    expect(inFlight()).toBe(1);
    held.release('success');
    expect(inFlight()).toBe(0);
    expect(t.stats(slot('a')).failures).toBe(0);

    // b and c drain: a is the only backend panic may use (drain takes none, even failing open), so it takes every pick.
    replies.set('b', 'drain');
    replies.set('c', 'drain');
    await until(() => [slot('b'), slot('c')].every((s) => (t.reported.flags(s) & ReportFlag.Drain) !== 0), 'b and c drained');
    for (const [k, r] of routers.entries()) expect(picksOf(r, 'a', 2000), POLICY_NAMES[k]).toBe(2000);

    // Back to 100 % and b, c ready: a is eligible again (a third of 20,000 weighted picks, sd 0.0033; band ±0.015).
    replies.set('a', 'up 100%');
    replies.set('b', 'ready');
    replies.set('c', 'ready');
    await until(
      () => t.reported.agentMultiplier(slot('a')) === 1 && (t.reported.flags(slot('b')) & ReportFlag.Drain) === 0,
      'a at 100 %, b ready',
    );
    await until(() => (t.reported.flags(slot('c')) & ReportFlag.Drain) === 0, 'c ready');
    const weighted = routers[POLICY_NAMES.indexOf('weighted')]!;
    expect(Math.abs(pickShares(weighted, 20_000).get('a')! - 1 / 3)).toBeLessThan(0.015);
  });

  it('an ORCA weight that rounds to 0: no pick of it while others are eligible', async () => {
    const reports = new Map([
      // A58 weight 0.01 against two of 10^9 (the smallest qps and utilization a slot records are 0.01 and 1e-6):
      // a's multiplier, its weight over the mean, rounds to 0 parts per million.
      ['a', 'TEXT cpu_utilization=1, rps_fractional=0.01'],
      ['b', 'TEXT cpu_utilization=0.000001, rps_fractional=1000'],
      ['c', 'TEXT cpu_utilization=0.000001, rps_fractional=1000'],
    ]);
    const ports = new Map<string, number>();
    for (const [id, report] of reports) {
      const server = createHttpServer((_req, res) => {
        res.setHeader('endpoint-load-metrics', report);
        res.end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
      ports.set(id, (server.address() as { port: number }).port);
    }
    const clock = manualClock(1000);
    const b = new Balancer({ capacity: 8, clock: clock.now, logger: silentLog, health: { orca: { blackoutMs: 0 } } });
    cleanups.push(() => b.close());
    b.update([...ports].map(([id, port]) => ({ id, address: `127.0.0.1:${port}` })));
    await b.pollLoadReports();
    const slot = b.slotEntries().find((e) => e.id === 'a')!.slot;
    expect(b.ownerTable.reported.orcaWeight(slot) !== undefined).toBe(true);
    expect(b.ownerTable.reported.orcaMultiplier(slot)).toBe(0);
    for (const policy of ['weighted', 'p2c', 'round-robin', 'maglev'] as const) {
      const r = b.router({ policy, seed: 3 });
      cleanups.push(() => r.close());
      expect(picksOf(r, 'a', 5000), policy).toBe(0);
    }
  });
});
