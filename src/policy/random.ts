/**
 * Random: every eligible member equally likely, O(1) per pick.
 *
 * One `rng.below(n)` draw. When the drawn member is ineligible (only possible
 * for standalone callers; the runtime's slices are all eligible), a fresh
 * uniform draw among the eligible members is made, so the result is exactly
 * uniform over the eligible members either way.
 */
import type { Candidate } from '../core/candidate.js';
import { Rng } from '../core/rng.js';
import { EligibleIndices, throwEmpty } from './slice.js';
import type { Policy, SeedOptions } from './types.js';

/**
 * Uniform random selection.
 *
 * @example
 * const policy = new Random({ seed: 1 });
 * const i = policy.pick(backends);
 */
export class Random implements Policy {
  private readonly rng: Rng;
  private readonly eligible = new EligibleIndices();

  /** OS-seeded unless `seed` is given. */
  constructor(options: SeedOptions = {}) {
    this.rng = new Rng(options.seed);
  }

  /** Reserves scratch space for a slice (optional; picks need no table). */
  prepare(candidates: readonly Candidate[]): void {
    this.eligible.reserve(candidates.length);
  }

  /** A uniformly random eligible index; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    if (n === 0) throwEmpty();
    const i = this.rng.below(n);
    if (candidates[i]!.isEligible()) return i;
    const m = this.eligible.collect(candidates);
    return this.eligible.at(this.rng.below(m));
  }
}
