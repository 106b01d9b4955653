/**
 * LeastLoaded: the eligible member with the lowest `load()`, by a full scan.
 *
 * O(n) per pick with one `load()` call per eligible member. Ties are broken
 * uniformly at random by the seeded RNG (reservoir sampling over the tied
 * minima: the k-th tie replaces the current choice with probability 1/k),
 * never by position — "lowest index wins" would pile every tie, and every cold
 * start, onto the first member.
 *
 * Prefer {@link PowerOfTwo} when several independent selectors share
 * backends: each of them computing the global minimum herds them onto the
 * same member. LeastLoaded suits a single selector with a small slice.
 */
import type { Candidate } from '../core/candidate.js';
import type { Rng } from '../core/rng.js';
import { throwEmpty, throwNoEligible, rngFromOptions } from './slice.js';
import type { Policy, SeedOptions } from './types.js';

/**
 * Least loaded with random tie-breaking.
 *
 * @example
 * const policy = new LeastLoaded({ seed: 3 });
 * const i = policy.pick(backends); // calls load() on every eligible backend
 */
export class LeastLoaded implements Policy {
  private readonly rng: Rng;

  /** OS-seeded unless `seed` is given. */
  constructor(options: SeedOptions = {}) {
    this.rng = rngFromOptions(options);
  }

  /** Nothing to prepare; present for a uniform policy interface. */
  prepare(_candidates: readonly Candidate[]): void {}

  /** An eligible index of minimal load; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    if (n === 0) throwEmpty();
    let best = -1;
    let bestLoad = 0;
    let ties = 0;
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      if (!c.isEligible()) continue;
      const load = c.load();
      if (best < 0 || load < bestLoad) {
        best = i;
        bestLoad = load;
        ties = 1;
      } else if (load === bestLoad && this.rng.below(++ties) === 0) {
        best = i;
      }
    }
    if (best < 0) throwNoEligible(n);
    return best;
  }
}
