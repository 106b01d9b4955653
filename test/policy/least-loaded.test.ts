import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { LeastLoaded } from '../../src/policy/least-loaded.js';
import { agreements, backends, binomialSigma, histogram } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

describe('LeastLoaded', () => {
  it('returns the strictly least loaded eligible member, reading every eligible load once', () => {
    let reads = 0;
    const loads = [5, 3, 9, 1, 4];
    const slice = loads.map((l, i) => new Backend(`b${i}`, { load: () => (reads++, l), status: i === 3 ? 'draining' : 'ready' }));
    const ll = new LeastLoaded({ seed: 1 });
    expect(ll.pick(slice)).toBe(1);
    expect(reads).toBe(4);
  });

  it('breaks ties uniformly by the RNG, never by position', () => {
    // Tied minima at 0, 1, 3 (load 0): p = 1/3 each, N = 30,000: σ = √(N·⅓·⅔) ≈ 81.6; band ±5σ.
    // "First wins" would give member 0 every time.
    const N = 30_000;
    const sigma = binomialSigma(N, 1 / 3);
    const slice = backends(5, { loads: [0, 0, 4, 0, 2] });
    const ll = new LeastLoaded({ seed: 2 });
    const counts = histogram(5, N, () => ll.pick(slice));
    expect(counts[2]! + counts[4]!).toBe(0);
    for (const i of [0, 1, 3]) expect(Math.abs(counts[i]! - N / 3)).toBeLessThanOrEqual(5 * sigma);
  });

  it('Empty / NoEligibleCandidates', () => {
    const ll = new LeastLoaded({ seed: 1 });
    expect(thrown(() => ll.pick([])).code).toBe('Empty');
    expect(thrown(() => ll.pick(backends(3, { status: () => 'unavailable' }))).code).toBe('NoEligibleCandidates');
  });

  it('replays an exact seeded sequence', () => {
    const ll = new LeastLoaded({ seed: 42 });
    const slice = backends(6, { loads: [2, 0, 1, 0, 0, 3] });
    expect(Array.from({ length: 16 }, () => ll.pick(slice))).toEqual([1, 4, 3, 3, 1, 1, 4, 1, 4, 3, 4, 1, 4, 1, 4, 4]);
  });

  it('two unseeded instances are uncorrelated; two with the same seed agree exactly', () => {
    // All 64 tied: agreement p = 1/64, mean 156.25 of 10,000, σ ≈ 12.4; bound mean + 10σ = 280.
    const slice = backends(64);
    const run = (p: LeastLoaded): number[] => Array.from({ length: 10_000 }, () => p.pick(slice));
    expect(agreements(run(new LeastLoaded()), run(new LeastLoaded()))).toBeLessThan(280);
    expect(run(new LeastLoaded({ seed: 8 }))).toEqual(run(new LeastLoaded({ seed: 8 })));
  });
});
