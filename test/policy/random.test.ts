import { describe, expect, it } from 'vitest';
import { Random } from '../../src/policy/random.js';
import { agreements, backends, binomialSigma, histogram } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

describe('Random', () => {
  it('is uniform: each of 8 members within 5σ of N/8 over 80,000 picks', () => {
    // p = 1/8, N = 80,000: mean 10,000, σ = √(N·p·(1−p)) ≈ 93.5; band ±5σ ≈ ±468 (a 5% bias fails).
    const N = 80_000;
    const sigma = binomialSigma(N, 1 / 8);
    expect(sigma).toBeCloseTo(93.54, 1);
    const r = new Random({ seed: 3 });
    const slice = backends(8);
    for (const count of histogram(8, N, () => r.pick(slice))) expect(Math.abs(count - N / 8)).toBeLessThanOrEqual(5 * sigma);
  });

  it('is uniform over the eligible members only', () => {
    // Eligible 0, 2, 5 of 6: p = 1/3 each, N = 30,000: σ ≈ 81.6; band ±5σ.
    const N = 30_000;
    const sigma = binomialSigma(N, 1 / 3);
    const slice = backends(6, { status: (i) => ([0, 2, 5].includes(i) ? 'ready' : 'unavailable') });
    const r = new Random({ seed: 4 });
    const counts = histogram(6, N, () => r.pick(slice));
    expect([counts[1], counts[3], counts[4]]).toEqual([0, 0, 0]);
    for (const i of [0, 2, 5]) expect(Math.abs(counts[i]! - N / 3)).toBeLessThanOrEqual(5 * sigma);
  });

  it('Empty / NoEligibleCandidates', () => {
    const r = new Random({ seed: 1 });
    expect(thrown(() => r.pick([])).code).toBe('Empty');
    expect(thrown(() => r.pick(backends(4, { status: () => 'draining' }))).code).toBe('NoEligibleCandidates');
  });

  it('replays an exact seeded sequence', () => {
    const r = new Random({ seed: 42 });
    const slice = backends(10);
    expect(Array.from({ length: 16 }, () => r.pick(slice))).toEqual(SEQ_SEED_42);
  });

  it('two unseeded instances are uncorrelated; two with the same seed agree exactly', () => {
    // Agreement per pick p = 1/64: mean 156.25 of 10,000, σ ≈ 12.4; bound mean + 10σ = 280.
    const slice = backends(64);
    const run = (r: Random): number[] => Array.from({ length: 10_000 }, () => r.pick(slice));
    expect(agreements(run(new Random()), run(new Random()))).toBeLessThan(280);
    expect(run(new Random({ seed: 99n }))).toEqual(run(new Random({ seed: 99n })));
  });
});

const SEQ_SEED_42 = [1, 2, 6, 3, 6, 7, 4, 6, 1, 9, 7, 2, 7, 8, 5, 8];
