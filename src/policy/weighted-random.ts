/**
 * WeightedRandom: member i with probability exactly wᵢ / Σw, O(1) per pick.
 *
 * Vose's alias method in integers (alias.ts), built when a slice is
 * prepared (a different array or length): a column `c = below(n)`, then,
 * unless the column is full, `u = below(Σw)` against its threshold. The
 * proportions are exact, not floating-point approximations; the sum and
 * each wᵢ·n are checked (`WeightOverflow` past 2^53 − 1).
 *
 * Weights are read when the slice is prepared; pass a fresh array (or call
 * {@link WeightedRandom.prepare}) after changing them. An ineligible draw
 * (standalone callers only) falls back to an exact weighted draw over the
 * eligible members by a linear scan.
 */
import type { Candidate } from '../core/candidate.js';
import type { Rng } from '../core/rng.js';
import { AliasTable, drawEligibleByWeight } from './alias.js';
import { throwEmpty, rngFromOptions } from './slice.js';
import type { Policy, SeedOptions } from './types.js';

/**
 * Weighted random selection by the alias method.
 *
 * @example
 * const policy = new WeightedRandom({ seed: 9 });
 * policy.pick([new Backend('a', { weight: 1 }), new Backend('b', { weight: 3 })]); // 'b' 3 times in 4
 */
export class WeightedRandom implements Policy {
  private readonly rng: Rng;
  private slice: readonly Candidate[] | undefined;
  private sliceLength = -1;
  private readonly table = new AliasTable();

  /** OS-seeded unless `seed` is given. */
  constructor(options: SeedOptions = {}) {
    this.rng = rngFromOptions(options);
  }

  /** Builds the alias table for `candidates` (throws `InvalidWeight` / `WeightOverflow`; the old table stays then). */
  prepare(candidates: readonly Candidate[]): void {
    this.table.build(candidates);
    this.slice = candidates;
    this.sliceLength = candidates.length;
  }

  /** An eligible index drawn in proportion to weight; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    if (candidates !== this.slice || candidates.length !== this.sliceLength) this.prepare(candidates);
    const n = candidates.length;
    if (n === 0) throwEmpty();
    const i = this.table.draw(this.rng);
    if (candidates[i]!.isEligible()) return i;
    return drawEligibleByWeight(candidates, this.rng);
  }
}
