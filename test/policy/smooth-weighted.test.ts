import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { SmoothWeightedRoundRobin } from '../../src/policy/smooth-weighted.js';
import { backends, histogram } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

const weighted = (spec: Record<string, number>): Backend[] => Object.entries(spec).map(([id, weight]) => new Backend(id, { weight }));
const run = (p: SmoothWeightedRoundRobin, slice: readonly Backend[], k: number): string[] =>
  Array.from({ length: k }, () => slice[p.pick(slice)]!.id);

describe('SmoothWeightedRoundRobin', () => {
  it("interleaves nginx's example: weights 5, 1, 1 → a a b a c a a", () => {
    const swrr = new SmoothWeightedRoundRobin();
    const slice = weighted({ a: 5, b: 1, c: 1 });
    expect(run(swrr, slice, 14)).toEqual(['a', 'a', 'b', 'a', 'c', 'a', 'a', 'a', 'a', 'b', 'a', 'c', 'a', 'a']);
  });

  it('conserves weight exactly: every cycle of Σw picks serves member i exactly wᵢ times', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 1, maxLength: 10 }), (weights) => {
        const swrr = new SmoothWeightedRoundRobin();
        const slice = backends(weights.length, { weights });
        const total = weights.reduce((a, b) => a + b, 0);
        for (let cycle = 0; cycle < 3; cycle++) {
          expect(histogram(weights.length, total, () => swrr.pick(slice))).toEqual(weights);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('proportions over a long run: |countᵢ − N·wᵢ/Σw| < wᵢ (deterministic: σ = 0, only the last partial cycle deviates)', () => {
    const weights = [7, 3, 11, 1];
    const N = 100_003;
    const swrr = new SmoothWeightedRoundRobin();
    const slice = backends(4, { weights });
    const counts = histogram(4, N, () => swrr.pick(slice));
    weights.forEach((w, i) => {
      expect(Math.abs(counts[i]! - (N * w) / 22)).toBeLessThan(w);
    });
  });

  it('migrates state by id on a membership change (a staying member keeps its current weight, a new one starts at 0)', () => {
    const swrr = new SmoothWeightedRoundRobin();
    const before = weighted({ a: 2, b: 1 });
    // currents: a 2,b 1 → a (a −1); a 1, b 2 → b (b −1).
    expect(run(swrr, before, 2)).toEqual(['a', 'b']);
    // b keeps −1, c starts at 0: b 0, c 1 → c; b 1, c 0 → b. A reset would serve b first.
    const after = [before[1]!, new Backend('c')];
    expect(run(swrr, after, 2)).toEqual(['c', 'b']);
  });

  it('ineligible members sit out and do not accumulate', () => {
    const swrr = new SmoothWeightedRoundRobin();
    const slice = backends(3, { weights: [5, 1, 1], status: (i) => (i === 0 ? 'draining' : 'ready') });
    expect(histogram(3, 100, () => swrr.pick(slice))).toEqual([0, 50, 50]);
  });

  it('Empty / NoEligibleCandidates / WeightOverflow', () => {
    const swrr = new SmoothWeightedRoundRobin();
    expect(thrown(() => swrr.pick([])).code).toBe('Empty');
    expect(thrown(() => swrr.pick(backends(3, { status: () => 'unavailable' }))).code).toBe('NoEligibleCandidates');
    const heavy = { id: 'x', weight: 0xffff_ffff, isEligible: () => true, load: () => 0 };
    expect(thrown(() => swrr.pick(new Array<typeof heavy>(524_289).fill(heavy))).code).toBe('WeightOverflow');
  });
});
