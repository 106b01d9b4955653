import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Backend, Localized, Prioritized, type LocalityCandidate, type Status } from '../../../src/core/candidate.js';
import { LocalityWeightedRandom } from '../../../src/policy/priority/policy.js';
import { thrown } from '../../helpers/thrown.js';

/** `total` endpoints of one (priority, locality), the first `healthy` ready. */
function zone(priority: number, locality: string, localityWeight: number, total: number, healthy: number, weight = 1): Localized[] {
  return Array.from(
    { length: total },
    (_, i) =>
      new Localized(
        new Prioritized(new Backend(`${priority}-${locality}-${i}`, { weight, status: i < healthy ? 'ready' : 'unavailable' }), priority),
        locality,
        localityWeight,
      ),
  );
}

describe('LocalityWeightedRandom: health-adjusted locality weights', () => {
  it('X (weight 1, 50 % available) and Y (weight 2, full) split about 26 % / 74 %', () => {
    // X: 0.5 × 1.4 = 70 % → effective 1 × 0.7; Y: 2 × 1.0 → X = 0.7 / 2.7 = 25.93 %.
    const c = [...zone(0, 'X', 1, 2, 1), ...zone(0, 'Y', 2, 4, 4)];
    const policy = new LocalityWeightedRandom({ seed: 21 });
    const plan = policy.plan(c);
    expect(plan.priorities[0]!.localities).toEqual([
      { locality: 'X', shareMillionths: 259_259 },
      { locality: 'Y', shareMillionths: 740_741 },
    ]);
    const n = 40_000;
    let x = 0;
    for (let i = 0; i < n; i++) {
      const index = policy.pick(c);
      expect(c[index]!.isEligible()).toBe(true);
      if (index < 2) x++;
    }
    // Binomial(40000, 0.259259): σ = √(n p (1−p)) ≈ 87.7; band ±5σ = ±438 (±1.1 points).
    // Ignoring health (1/3 = 13,333) or ignoring locality weight (X = 0.7/1.7 = 16,470) is > 30σ out.
    expect(Math.abs(x - 0.259259 * n)).toBeLessThan(5 * 87.7);
  });

  it('a locality keeps its full share down to 5/7 available', () => {
    const plan = new LocalityWeightedRandom({ seed: 1 }).plan([...zone(0, 'a', 1, 7, 5), ...zone(0, 'b', 1, 7, 7)]);
    expect(plan.priorities[0]!.localities!.map((l) => l.shareMillionths)).toEqual([500_000, 500_000]);
  });

  it('endpoint weight divides traffic only inside the chosen locality', () => {
    // Locality weights 1 : 1; inside a, endpoint weights 3 : 1; b has a single weight-100 endpoint.
    const c = [
      new Localized(new Prioritized(new Backend('a-big', { weight: 3 }), 0), 'a'),
      new Localized(new Prioritized(new Backend('a-small', { weight: 1 }), 0), 'a'),
      new Localized(new Prioritized(new Backend('b-huge', { weight: 100 }), 0), 'b'),
    ];
    const policy = new LocalityWeightedRandom({ seed: 8 });
    const n = 40_000;
    const counts = [0, 0, 0];
    for (let i = 0; i < n; i++) counts[policy.pick(c)]!++;
    // Expected 0.375 / 0.125 / 0.5; σ = 96.8, 66.1, 100; band ±5σ. Pooling endpoint weights across
    // localities would give b 96 % — hundreds of σ away.
    expect(Math.abs(counts[0]! - 0.375 * n)).toBeLessThan(5 * 96.8);
    expect(Math.abs(counts[1]! - 0.125 * n)).toBeLessThan(5 * 66.1);
    expect(Math.abs(counts[2]! - 0.5 * n)).toBeLessThan(5 * 100);
  });

  it('a large weight in a failover priority never steals from a fully provisioned primary', () => {
    const c = [...zone(0, 'primary', 1, 3, 3), ...zone(1, 'backup', 1_000_000, 50, 50, 1000)];
    const policy = new LocalityWeightedRandom({ seed: 2 });
    expect(policy.plan(c).priorities.map((p) => p.shareMillionths)).toEqual([1_000_000, 0]);
    for (let i = 0; i < 2000; i++) expect(policy.decide(c)).toMatchObject({ priority: 0, mode: 'healthy' });
  });

  it('a nonempty locality never quantises to zero', () => {
    // "tiny": 1 eligible of weight 1 among 2^32−1 member weight → availability rounds to 0, kept at 1;
    // its effective weight 1 against 2 × (2^32−1) × 1e6 still gets one millionth.
    const c: LocalityCandidate[] = [
      new Localized(new Prioritized(new Backend('t-up', { weight: 1 }), 0), 'tiny'),
      new Localized(
        new Prioritized(new Backend('t-down', { weight: 2 ** 32 - 1, status: 'unavailable' }), 0).withPanicEligibility(false),
        'tiny',
      ),
      ...zone(0, 'big', 2 ** 32 - 1, 2, 2),
    ];
    const loc = new LocalityWeightedRandom({ seed: 1, panicThresholdPercent: 0 }).plan(c).priorities[0]!.localities!;
    expect(loc).toEqual([
      { locality: 'big', shareMillionths: 999_999 },
      { locality: 'tiny', shareMillionths: 1 },
    ]);
  });

  it('contradictory locality weights in one (priority, locality) throw InconsistentTopology, whatever the order', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(), { minLength: 5, maxLength: 5 }), (keys) => {
        const base = [...zone(0, 'a', 2, 2, 2), ...zone(0, 'b', 1, 2, 2), new Localized(new Prioritized(new Backend('odd'), 0), 'a', 3)];
        const shuffled = base
          .map((c, i) => [keys[i]!, c] as const)
          .sort((x, y) => x[0] - y[0])
          .map((x) => x[1]);
        const policy = new LocalityWeightedRandom({ seed: 1 });
        expect(() => policy.pick(shuffled)).toThrow('locality "a" at priority 0 has contradictory locality weights 2 and 3');
        expect(thrown(() => policy.plan(shuffled)).code).toBe('InconsistentTopology');
      }),
      { numRuns: 50 },
    );
    // The same locality name at another priority may carry another weight.
    expect(() => new LocalityWeightedRandom({ seed: 1 }).pick([...zone(0, 'a', 2, 1, 1), ...zone(1, 'a', 5, 1, 1)])).not.toThrow();
  });

  it('checked sums: locality effective weights past 2^53 throw WeightOverflow', () => {
    const c = [...zone(0, 'a', 2 ** 32 - 1, 1, 1), ...zone(0, 'b', 2 ** 32 - 1, 1, 1), ...zone(0, 'c', 2 ** 32 - 1, 1, 1)];
    expect(thrown(() => new LocalityWeightedRandom({ seed: 1 }).pick(c)).code).toBe('WeightOverflow');
  });

  it('in use-all panic, panic-eligible endpoints form the selectable capacity of each locality', () => {
    // Single priority at 1/4 → global shortage and panic. a: 1 up, 1 down; b: 0 up, 2 down (one opted out).
    const c: LocalityCandidate[] = [
      ...zone(0, 'a', 1, 2, 1),
      new Localized(new Prioritized(new Backend('b0', { status: 'unavailable' }), 0), 'b'),
      new Localized(new Prioritized(new Backend('b1', { status: 'unavailable' }), 0).withPanicEligibility(false), 'b'),
    ];
    const policy = new LocalityWeightedRandom({ seed: 4 });
    const plan = policy.plan(c);
    expect(plan.priorities[0]!.panic).toBe(true);
    // a: 2/2 panic-selectable → 100 %; b: 1/2 → 70 % → 1/1.7 and 0.7/1.7.
    expect(plan.priorities[0]!.localities).toEqual([
      { locality: 'a', shareMillionths: 588_236 },
      { locality: 'b', shareMillionths: 411_764 },
    ]);
    const seen = new Set<number>();
    for (let i = 0; i < 1000; i++) {
      const d = policy.decide(c);
      expect(d.mode).toBe('panic');
      seen.add(d.index);
    }
    expect([...seen].sort()).toEqual([0, 1, 2]);
  });

  it('draining endpoints are not configured capacity', () => {
    const c = [
      ...zone(0, 'a', 1, 2, 2),
      new Localized(new Prioritized(new Backend('gone-1', { status: 'draining' }), 0), 'a'),
      new Localized(new Prioritized(new Backend('gone-2', { status: 'draining' }), 0), 'a'),
      ...zone(0, 'b', 1, 2, 2),
    ];
    expect(new LocalityWeightedRandom({ seed: 1 }).plan(c).priorities[0]!.localities!.map((l) => l.shareMillionths)).toEqual([
      500_000, 500_000,
    ]);
  });

  it('locality shares of every selectable priority sum to exactly 1,000,000 (property)', () => {
    const endpoint = fc.record({
      priority: fc.integer({ min: 0, max: 2 }),
      locality: fc.constantFrom('a', 'b', 'c', 'd'),
      weight: fc.integer({ min: 1, max: 1000 }),
      status: fc.constantFrom<Status>('ready', 'ready', 'unavailable', 'draining'),
      panicEligible: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(endpoint, { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 50 }), (es, lwBase) => {
        const c = es.map(
          (e, i) =>
            new Localized(
              new Prioritized(new Backend(`e${i}`, { weight: e.weight, status: e.status }), e.priority, e.panicEligible),
              e.locality,
              lwBase + e.priority * 7 + e.locality.charCodeAt(0),
            ),
        );
        const plan = new LocalityWeightedRandom({ seed: 1 }).plan(c);
        for (const p of plan.priorities) {
          const sum = p.localities!.reduce((s, l) => s + l.shareMillionths, 0);
          if (sum !== 0) expect(sum).toBe(1_000_000);
          if (p.shareMillionths > 0) expect(sum).toBe(1_000_000);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('replays exactly for the same seed, candidate order and metadata', () => {
    const c = [...zone(0, 'x', 1, 3, 2), ...zone(0, 'y', 3, 2, 2), ...zone(1, 'z', 1, 2, 2)];
    const run = (seed: number): number[] => {
      const p = new LocalityWeightedRandom({ seed });
      return Array.from({ length: 32 }, () => p.pick(c));
    };
    expect(run(5)).toEqual(run(5));
    expect(run(6)).not.toEqual(run(5));
  });
});

describe('LocalityWeightedRandom: grouping past the counting-sort key limit', () => {
  it('orders 100 priorities × 1 and 1 priority × 70 localities exactly like a few keys', () => {
    const many = Array.from({ length: 100 }, (_, i) => zone(99 - i, `z${i % 3}`, 1, 1, 1)[0]!);
    const policy = new LocalityWeightedRandom({ seed: 1 });
    const plan = policy.plan(many);
    expect(plan.priorities.map((p) => p.priority)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    for (let i = 0; i < 20; i++) expect(policy.decide(many)).toEqual({ index: 99, priority: 0, mode: 'healthy' });
    const names = Array.from({ length: 70 }, (_, i) => `loc-${String((i * 37) % 70).padStart(2, '0')}`);
    const wide = names.flatMap((name, i) => zone(0, name, 1 + (i % 3), 2, 1 + (i % 2)));
    const loc = policy.plan(wide).priorities[0]!.localities!;
    expect(loc.map((l) => l.locality)).toEqual([...names].sort());
    expect(loc.reduce((s, l) => s + l.shareMillionths, 0)).toBe(1_000_000);
  });
});
