import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { MAX_WEIGHT } from '../../src/core/weight.js';
import { WeightedRandom } from '../../src/policy/weighted-random.js';
import { agreements, backends, binomialSigma, histogram } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

interface AliasInternals {
  prob: Float64Array;
  alias: Int32Array;
  total: number;
}

describe('WeightedRandom', () => {
  it('draws in proportion to weight: weights 1, 2, 3, 4 within 5σ over 100,000 picks', () => {
    // pᵢ = wᵢ/10, N = 100,000; σᵢ = √(N·pᵢ·(1−pᵢ)) = 94.9, 126.5, 144.9, 154.9.
    // Band ±5σ (≤ 0.78% of N): a sampler off by 1% of N on any member fails.
    const N = 100_000;
    const weights = [1, 2, 3, 4];
    const wr = new WeightedRandom({ seed: 12 });
    const slice = backends(4, { weights });
    const counts = histogram(4, N, () => wr.pick(slice));
    weights.forEach((w, i) => {
      const sigma = binomialSigma(N, w / 10);
      expect(Math.abs(counts[i]! - (N * w) / 10)).toBeLessThanOrEqual(5 * sigma);
    });
  });

  it('the alias table is exact in integers: column mass of member i is wᵢ·n of n·Σw', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: MAX_WEIGHT }), { minLength: 1, maxLength: 40 }), (weights) => {
        const wr = new WeightedRandom({ seed: 1 });
        wr.prepare(backends(weights.length, { weights }));
        const { prob, alias, total } = (wr as unknown as { table: AliasInternals }).table;
        const n = weights.length;
        const mass = new Array<bigint>(n).fill(0n);
        for (let c = 0; c < n; c++) {
          mass[c]! += BigInt(prob[c]!);
          mass[alias[c]!]! += BigInt(total - prob[c]!);
        }
        expect(total).toBe(weights.reduce((a, b) => a + b, 0));
        weights.forEach((w, i) => {
          expect(mass[i]).toBe(BigInt(w) * BigInt(n));
        });
      }),
      { numRuns: 200 },
    );
  });

  it('never returns an ineligible member; proportions hold among the eligible', () => {
    // Eligible weights 1 and 3 (members 0 and 2): p = 1/4, 3/4; N = 40,000: σ ≈ 86.6; band ±5σ.
    const N = 40_000;
    const slice = backends(4, { weights: [1, 50, 3, 7], status: (i) => (i % 2 === 0 ? 'ready' : 'unavailable') });
    const wr = new WeightedRandom({ seed: 13 });
    const counts = histogram(4, N, () => wr.pick(slice));
    expect(counts[1]! + counts[3]!).toBe(0);
    expect(Math.abs(counts[0]! - N / 4)).toBeLessThanOrEqual(5 * binomialSigma(N, 1 / 4));
  });

  it('prepares on a new array or length, never inside an ordinary pick', () => {
    const wr = new WeightedRandom({ seed: 1 });
    const spy = vi.spyOn(wr, 'prepare');
    const slice = backends(5, { weights: [5, 4, 3, 2, 1] });
    for (let i = 0; i < 1000; i++) wr.pick(slice);
    expect(spy).toHaveBeenCalledTimes(1);
    wr.pick([...slice]);
    expect(spy).toHaveBeenCalledTimes(2);
  });

  it('checks the weight sum: WeightOverflow past 2^53 − 1, and the old table stays', () => {
    const wr = new WeightedRandom({ seed: 1 });
    const good = backends(2, { weights: [1, 3] });
    wr.pick(good);
    // 2^21 + 1 maximal weights sum past 2^53 − 1.
    const heavy = { id: 'x', weight: MAX_WEIGHT, isEligible: () => true, load: () => 0 };
    const huge = new Array<typeof heavy>(2_097_153).fill(heavy);
    expect(thrown(() => wr.prepare(huge)).code).toBe('WeightOverflow');
    expect([0, 1]).toContain(wr.pick(good));
  });

  it('rejects a member weight outside [1, 2^32 − 1] naming it', () => {
    const wr = new WeightedRandom({ seed: 1 });
    const bad = [new Backend('a'), { id: 'b', weight: 0, isEligible: () => true, load: () => 0 }];
    expect(() => wr.pick(bad)).toThrow('candidates[1].weight: must be an integer in [1, 4294967295], got 0');
    expect(thrown(() => wr.pick(bad)).code).toBe('InvalidWeight');
  });

  it('Empty / NoEligibleCandidates', () => {
    const wr = new WeightedRandom({ seed: 1 });
    expect(thrown(() => wr.pick([])).code).toBe('Empty');
    expect(thrown(() => wr.pick(backends(3, { status: () => 'draining' }))).code).toBe('NoEligibleCandidates');
  });

  it('replays an exact seeded sequence', () => {
    const wr = new WeightedRandom({ seed: 42 });
    const slice = backends(5, { weights: [1, 2, 3, 4, 5] });
    expect(Array.from({ length: 16 }, () => wr.pick(slice))).toEqual(SEQ_SEED_42);
  });

  it('two unseeded instances are uncorrelated; two with the same seed agree exactly', () => {
    // 64 equal weights: agreement p = 1/64, mean 156.25 of 10,000, σ ≈ 12.4; bound mean + 10σ = 280.
    const slice = backends(64, { weights: Array.from({ length: 64 }, () => 7) });
    const run = (p: WeightedRandom): number[] => Array.from({ length: 10_000 }, () => p.pick(slice));
    expect(agreements(run(new WeightedRandom()), run(new WeightedRandom()))).toBeLessThan(280);
    expect(run(new WeightedRandom({ seed: 6 }))).toEqual(run(new WeightedRandom({ seed: 6 })));
  });
});

const SEQ_SEED_42 = [1, 1, 1, 3, 4, 2, 2, 2, 3, 4, 3, 0, 2, 2, 3, 3];
