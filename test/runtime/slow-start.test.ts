/**
 * Slow start: the ramp formula (Envoy's), a backend joining a warm pool
 * ramps its share of picks by that formula on an injected clock, the ramp
 * start lives in the table (a router made later ramps from the join), P2C
 * scales the ramping candidate's load, nobody ramps when every backend is
 * new, and an ejection's end starts a ramp.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { rampFactor } from '../../src/load/slow-start.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import type { Router } from '../../src/runtime/router.js';
import { manualClock } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';

const WINDOW = 20_000;
const WARM = ['a', 'b', 'c'];

function pool(policy: 'weighted' | 'smooth-weighted' | 'p2c', ejection?: object) {
  const clock = manualClock(1000);
  const balancer = new Balancer({ capacity: 8, clock: clock.now, slowStart: { windowMs: WINDOW, aggression: 1, minWeightPercent: 10 } });
  onTestFinished(() => balancer.close());
  const warm = WARM.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` }));
  balancer.update(warm);
  const router = balancer.router({ policy, seed: 42, ...(ejection === undefined ? {} : { ejection }) });
  const join = () => balancer.update([...warm, { id: 'd', address: '127.0.0.1:7003' }]);
  return { clock, balancer, router, join };
}

/** The share of `id` in `n` picks (each lease released at once). */
function share(router: Router, id: string, n: number): number {
  let hits = 0;
  for (let i = 0; i < n; i++) {
    const lease = router.acquire();
    if (lease.id === id) hits++;
    lease.release('success');
  }
  return hits / n;
}

describe('slow start', () => {
  it('the factor is max(min, (elapsed / window) ^ (1 / aggression)), and 1 from the window on', () => {
    const linear = { windowMs: 1000, aggressionMilli: 1000, minMilli: 100 };
    expect([0, 50, 100, 500, 999, 1000, 5000].map((t) => rampFactor(t, linear))).toEqual([0.1, 0.1, 0.1, 0.5, 0.999, 1, 1]);
    const fast = { windowMs: 1000, aggressionMilli: 2000, minMilli: 0 };
    expect(rampFactor(250, fast)).toBe(0.5);
    expect(rampFactor(0, fast)).toBe(0);
  });

  it('a backend joining a warm pool takes weight × factor of the picks over the window (weighted, 20,000 picks per instant)', () => {
    const { clock, router, join } = pool('weighted');
    join();
    // d's share is f / (3 + f) (the three warm weights at 1). A binomial share of
    // 20,000 picks has sd ≤ 0.0035; the band is ±0.015 (over 4 sd), and 0.015 is
    // less than half the distance between successive instants' expected shares.
    let at = 0;
    for (const t of [0, 5000, 10_000, 15_000, 20_000, 30_000]) {
      clock.advance(t - at);
      at = t;
      const f = Math.max(0.1, Math.min(1, t / WINDOW));
      const got = share(router, 'd', 20_000);
      expect(Math.abs(got - f / (3 + f)), `at ${t} ms: share ${got}, factor ${f}`).toBeLessThan(0.015);
    }
  });

  it('the ramp start lives in the table: a router made later ramps from the join, not from its own start', () => {
    const { clock, balancer, join } = pool('weighted');
    join();
    clock.advance(15_000);
    const later = balancer.router({ policy: 'weighted', seed: 7 });
    expect(Math.abs(share(later, 'd', 20_000) - 0.75 / 3.75)).toBeLessThan(0.015);
  });

  it('smooth weighted round robin follows the ramp exactly: at half the window, d gets 1 pick in 7', () => {
    const { clock, router, join } = pool('smooth-weighted');
    join();
    clock.advance(WINDOW / 2);
    // Weights 1000, 1000, 1000, 500: every 3,500 units, d is chosen 500 / 3,500 of the time.
    const picks = Array.from({ length: 700 }, () => {
      const lease = router.acquire();
      lease.release('success');
      return lease.id;
    });
    expect(picks.filter((id) => id === 'd').length).toBe(100);
  });

  it('p2c draws a ramping candidate by its ramped weight: at the 10 % floor, at equal loads, 0.1 / 3.1 of the picks', () => {
    const { clock, router, join } = pool('p2c');
    join();
    const held: Lease[] = [];
    for (const id of [...WARM, 'd']) {
      // One lease on each backend (exclude every other one): equal loads.
      held.push(router.acquire({ exclude: [...WARM, 'd'].filter((x) => x !== id) }));
    }
    expect(held.map((l) => l.id).sort()).toEqual(['a', 'b', 'c', 'd']);
    // The pair is drawn by weight (d at a tenth of the others'), so at equal
    // loads d takes its weight share, 0.1 / 3.1 ≈ 0.032; the ramp is in the
    // weight only, not also in the load (it would count twice). 20,000 picks:
    // σ ≈ 0.00125, the band is ±5σ.
    expect(Math.abs(share(router, 'd', 20_000) - 0.1 / 3.1)).toBeLessThan(0.0063);
    clock.advance(WINDOW);
    // Ramped: equal weights and loads again, d gets its quarter (σ ≈ 0.003, ±6σ).
    expect(Math.abs(share(router, 'd', 20_000) - 0.25)).toBeLessThan(0.02);
    for (const l of held) l.release('success');
  });

  it('when every backend is new nobody is ramped: four joining together share equally from the first pick', () => {
    const clock = manualClock(1000);
    const balancer = new Balancer({ capacity: 8, clock: clock.now, slowStart: { windowMs: WINDOW } });
    onTestFinished(() => balancer.close());
    balancer.update(['a', 'b', 'c', 'd'].map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })));
    const router = balancer.router({ policy: 'weighted', seed: 3 });
    for (const id of ['a', 'b', 'c', 'd']) expect(Math.abs(share(router, id, 20_000) - 0.25)).toBeLessThan(0.015);
  });

  it('an ejection’s end starts a ramp: 5 s after it, the backend is at a quarter of its weight', () => {
    const { clock, router } = pool('weighted', { consecutiveFailures: 1, baseMs: 1000, maxMs: 1000 });
    // Fail one lease on c: ejected for at most 1 s (one unit of backoff).
    for (;;) {
      const lease = router.acquire();
      if (lease.id === 'c') {
        lease.release('failure');
        break;
      }
      lease.release('success');
    }
    clock.advance(6000);
    // c's ramp started when its ejection ended (between 0 and 1 s after the failure): 5 to 6 s ago.
    const got = share(router, 'c', 20_000);
    const lo = 0.25 / 2.25;
    const hi = 0.3 / 2.3;
    expect(got).toBeGreaterThan(lo - 0.015);
    expect(got).toBeLessThan(hi + 0.015);
  });

  it('refuses bad options naming the field', () => {
    expect(thrown(() => new Balancer({ slowStart: { windowMs: 0 } })).message).toBe(
      'options.slowStart.windowMs: must be an integer in [1, 3600000], got 0',
    );
    expect(thrown(() => new Balancer({ slowStart: { windowMs: 10, aggression: 0 } })).message).toBe(
      'options.slowStart.aggression: must be a number in [0.001, 1000], got 0',
    );
    expect(thrown(() => new Balancer({ slowStart: { windowMs: 10, minWeight: 5 } as never })).message).toBe(
      'options.slowStart.minWeight: unknown option (accepted: windowMs, aggression, minWeightPercent)',
    );
  });
});
