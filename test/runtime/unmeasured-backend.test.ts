/**
 * An unmeasured backend stays tryable (issue 39, the cold start): the first
 * request-latency sample replaces a slot's prior, so a backend that has
 * answered once reads its real latency (a millisecond) while one that has
 * not yet still reads the 50 ms prior — and `p2c:latency` would send it
 * nothing until that prior decays below the other's cost, seconds later
 * (test/integration/db-roles-pg 'reads to the replicas' sent 400 reads all
 * to one replica). The law: an idle backend with no sample is the cheapest
 * candidate (it is probed), and one with its first request still in flight
 * costs the prior per request (probed one request at a time, not flooded).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { EwmaSeries } from '../../src/load/ewma-region.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import type { Router } from '../../src/runtime/router.js';
import { manualClock } from '../helpers/runtime.js';

function setup(ids: readonly string[], seed: number, latencyRatio?: number) {
  const clock = manualClock(1000);
  const balancer = new Balancer({ capacity: 16, clock: clock.now });
  onTestFinished(() => balancer.close());
  balancer.update(ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })));
  const router: Router = balancer.router({ policy: 'p2c:latency', seed, ...(latencyRatio ? { latencyRatio } : {}) });
  onTestFinished(() => router.close());
  return { clock, balancer, router };
}

describe('an unmeasured backend is tried once another has answered (p2c:latency)', () => {
  it('two replicas, one read at a time: the second read goes to the one not yet measured (20 seeds, with and without the tail rule)', () => {
    for (const ratio of [undefined, Number.POSITIVE_INFINITY]) {
      for (let seed = 1; seed <= 20; seed++) {
        const { clock, router } = setup(['a', 'b'], seed, ratio);
        const first = router.acquire();
        clock.advance(1);
        first.release('success', { latencyMs: 1 });
        const second = router.acquire();
        expect(second.id, `seed ${seed}, ratio ${ratio}`).not.toBe(first.id);
        second.release('success', { latencyMs: 1 });
      }
    }
  });

  it("400 reads one at a time, each answering in 1 ms on the clock's same millisecond or the next: both replicas get a fair share", () => {
    for (let seed = 1; seed <= 10; seed++) {
      const { clock, router } = setup(['a', 'b'], seed);
      const n = new Map<string, number>([
        ['a', 0],
        ['b', 0],
      ]);
      for (let k = 0; k < 400; k++) {
        const l = router.acquire();
        n.set(l.id, n.get(l.id)! + 1);
        l.release('success', { latencyMs: 1 });
        if (k % 2 === 0) clock.advance(1);
      }
      // Equal latencies: the cost ties and the coin shares them (binomial, σ = 10 at 400: 120 is 8 σ away).
      expect(n.get('a')!, `seed ${seed}`).toBeGreaterThan(120);
      expect(n.get('b')!, `seed ${seed}`).toBeGreaterThan(120);
    }
  });

  it('a backend joining a warm pool is probed at once, one request in flight until its first answer (32 in flight)', () => {
    for (let seed = 1; seed <= 10; seed++) {
      const { clock, balancer, router } = setup(['a', 'b', 'c'], seed);
      // Warm: 2,000 requests of 2 ms on the three, 8 kept in flight.
      const open: Lease[] = [];
      for (let k = 0; k < 2000; k++) {
        open.push(router.acquire());
        if (open.length === 8) open.shift()!.release('success', { latencyMs: 2 });
        clock.advance(k % 4 === 0 ? 1 : 0);
      }
      for (const l of open.splice(0)) l.release('success', { latencyMs: 2 });
      balancer.update(['a', 'b', 'c', 'new'].map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })));
      // 32 picks with nothing answering: the new backend holds exactly one of them (probed, not flooded).
      const held: Lease[] = [];
      for (let k = 0; k < 32; k++) held.push(router.acquire());
      const onNew = held.filter((l) => l.id === 'new');
      expect(onNew.length, `seed ${seed}`).toBe(1);
      // It answers in 2 ms like the others: from then on it is one of them (a fair share of the next 400).
      clock.advance(2);
      onNew[0]!.release('success', { latencyMs: 2 });
      for (const l of held) if (l.id !== 'new') l.release('success', { latencyMs: 2 });
      let toNew = 0;
      for (let k = 0; k < 400; k++) {
        const l = router.acquire();
        if (l.id === 'new') toNew++;
        l.release('success', { latencyMs: 2 });
        if (k % 4 === 0) clock.advance(1);
      }
      expect(toNew, `seed ${seed}`).toBeGreaterThan(60);
    }
  });

  it('a first outcome that is a failure reads twice the prior however long after the join: the prior does not decay while nothing is known', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const { clock, balancer, router } = setup(['a', 'b'], seed);
      // 10 s with no traffic: a prior decayed like an estimate would be 50 ms · e^(−10), 2 µs.
      clock.advance(10_000);
      const first = router.acquire();
      clock.advance(1);
      first.release('failure');
      const slot = balancer.slotEntries().find((e) => e.id === first.id)!.slot;
      // The failure's penalty (feedback.ts, FAILURE_PENALTY_FACTOR 2) on the prior: 100 ms, a slow backend, not a fast one.
      expect(balancer.ownerTable.estimateUs(slot, EwmaSeries.Latency, clock.now()), `seed ${seed}`).toBe(100_000);
      expect(balancer.ownerTable.ewma.meanRecordedUs(slot), `seed ${seed}`).toBe(100_000);
      // The other is probed, answers in 1 ms, and from then on the failed one is the slow one: the tail rule keeps it out.
      let toFailed = 0;
      for (let k = 0; k < 100; k++) {
        const l = router.acquire();
        if (l.id === first.id) toFailed++;
        l.release('success', { latencyMs: 1 });
        if (k % 4 === 0) clock.advance(1);
      }
      expect(toFailed, `seed ${seed}`).toBe(0);
    }
  });
});
