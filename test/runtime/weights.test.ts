/**
 * Weights and priorities through a Router, for every policy name (issue 28).
 *
 * Loads are equal: every lease is released at once, and the manual clock
 * does not move, so PeakEWMA estimates stay at their initial 50 ms and
 * every backend's load is the same. Bands are ±5σ of a binomial count.
 */
import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { KEYED_POLICY_NAMES, POLICY_NAMES } from '../../src/runtime/policies.js';
import { createLogger } from '../../src/log.js';
import { binomialSigma } from '../helpers/policy.js';
import { manualClock } from '../helpers/runtime.js';

const logger = createLogger({ level: 'silent' });

/** Picks by backend id over `n` acquires, each released at once. */
function shares(b: Balancer, policy: (typeof POLICY_NAMES)[number], n: number, seed = 28): Map<string, number> {
  const r = b.router({ policy, seed });
  const counts = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const l = r.acquire(KEYED_POLICY_NAMES.includes(policy) ? { key: `user-${i}` } : undefined);
    counts.set(l.id, (counts.get(l.id) ?? 0) + 1);
    l.release('success', { latencyMs: 50 });
  }
  r.close();
  return counts;
}

describe('README: api-1 (weight 2), api-2 and a priority-1 standby', () => {
  it('the default p2c:latency sends ≈ 2,000 / 1,000 / 0 of 3,000 (api-1 within 5σ = ±129 of 2,000; the standby none)', () => {
    const clock = manualClock(0);
    const b = new Balancer({ logger, clock: clock.now });
    b.update([
      { id: 'api-1', address: '127.0.0.1:7001', weight: 2 },
      { id: 'api-2', address: '127.0.0.1:7002' },
      { id: 'standby', address: '127.0.0.1:7003', priority: 1 },
    ]);
    const counts = shares(b, 'p2c:latency', 3000);
    expect(counts.get('standby') ?? 0).toBe(0);
    expect(Math.abs(counts.get('api-1')! - 2000)).toBeLessThanOrEqual(5 * binomialSigma(3000, 2 / 3));
    expect(counts.get('api-1')! + counts.get('api-2')!).toBe(3000);
    b.close();
  });
});

describe('every policy name honours weights and priorities', () => {
  // Weights 1 : 2 : 3 at priority 0 and a weight-10 standby at priority 1. N = 12,000: σ ≤ 54.8, band ≤ ±274
  // (2.3 share points); the unweighted answer (4,000 each) misses the weight-1 backend by 2,000.
  const N = 12_000;
  for (const policy of POLICY_NAMES) {
    it(`${policy}: 1 : 2 : 3 within 5σ (the rotations exactly), 0 picks on the standby`, () => {
      const clock = manualClock(0);
      const b = new Balancer({ logger, clock: clock.now });
      b.update([
        { id: 'w1', address: '127.0.0.1:7001', weight: 1 },
        { id: 'w2', address: '127.0.0.1:7002', weight: 2 },
        { id: 'w3', address: '127.0.0.1:7003', weight: 3 },
        { id: 'standby', address: '127.0.0.1:7004', weight: 10, priority: 1 },
      ]);
      const counts = shares(b, policy, N);
      expect(counts.get('standby') ?? 0).toBe(0);
      [1, 2, 3].forEach((w) => {
        const got = counts.get(`w${w}`) ?? 0;
        const p = w / 6;
        // Maglev's table quantises a share by at most one slot per member (3 / 65,537); the ring gives w·80 points,
        // ×3 to pass Envoy's 1,024 minimum, and a member's share varies by ≈ 1/√(its points) with the arcs.
        const extra = policy.startsWith('ring-hash') ? (N * p) / Math.sqrt(240 * w) : policy.startsWith('maglev') ? (N * 3) / 65_537 : 0;
        const band = 5 * Math.sqrt(binomialSigma(N, p) ** 2 + extra ** 2);
        expect(Math.abs(got - N * p), `${policy} w${w}: ${got}`).toBeLessThanOrEqual(band);
      });
      b.close();
    });
  }

  it('a priority-1 backend takes traffic only when priority 0 cannot cover it: two of three P0 down → P1 takes 53 %', () => {
    // P0: 1 of 3 ready, raw 1/3, effective 46.7 % → P1 gets 53.3 %. N = 6,000: σ ≈ 38.6, band ±193.
    const clock = manualClock(0);
    const b = new Balancer({ logger, clock: clock.now });
    b.update([
      { id: 'a', address: '127.0.0.1:7001' },
      { id: 'b', address: '127.0.0.1:7002', status: 'unavailable' },
      { id: 'c', address: '127.0.0.1:7003', status: 'unavailable' },
      { id: 'standby', address: '127.0.0.1:7004', priority: 1 },
    ]);
    const N = 6000;
    const p = 1 - 466_666 / 1_000_000;
    for (const policy of ['p2c', 'round-robin', 'least-loaded'] as const) {
      const counts = shares(b, policy, N);
      expect((counts.get('b') ?? 0) + (counts.get('c') ?? 0)).toBe(0);
      expect(Math.abs((counts.get('standby') ?? 0) - N * p), policy).toBeLessThanOrEqual(5 * binomialSigma(N, p));
    }
    b.close();
  });
});
