/**
 * LeastLoaded: the eligible member with the lowest `load()`, by a full scan.
 *
 * O(n) per pick with one `load()` call per eligible member. Ties are broken
 * uniformly at random by the seeded RNG (reservoir sampling over the tied
 * minima: the k-th tie replaces the current choice with probability 1/k),
 * never by position — "lowest index wins" would pile every tie, and every cold
 * start, onto the first member.
 *
 * Weights: when the slice's weights differ, loads are compared divided by
 * weight (`load ÷ weight`, by cross-multiplication: a member of weight 2
 * with 4 open requests is as loaded as one of weight 1 with 2), and a tie
 * goes to member i with probability wᵢ / (Σ w of the tied members), by
 * weighted reservoir sampling. So at equal loads of 0 the picks follow the
 * weights exactly, and under held load each member's load settles in
 * proportion to its weight (Envoy's least-request divides by weight the
 * same way). With equal weights this is exactly the unweighted rule above.
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
  private slice: readonly Candidate[] | undefined;
  private sliceLength = -1;
  private weighted = false;

  /** OS-seeded unless `seed` is given. */
  constructor(options: SeedOptions = {}) {
    this.rng = rngFromOptions(options);
  }

  /** Reads whether the weights of `candidates` differ (then loads are compared per unit of weight). */
  prepare(candidates: readonly Candidate[]): void {
    let weighted = false;
    for (let i = 1; i < candidates.length && !weighted; i++) weighted = candidates[i]!.weight !== candidates[0]!.weight;
    this.weighted = weighted;
    this.slice = candidates;
    this.sliceLength = candidates.length;
  }

  /** An eligible index of minimal load (per unit of weight when weights differ); `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    if (n === 0) throwEmpty();
    if (candidates !== this.slice || n !== this.sliceLength) this.prepare(candidates);
    if (this.weighted) return this.pickWeighted(candidates);
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

  /** Unequal weights: minimal load ÷ weight, a tie to member i with probability wᵢ / Σ w of the tied. */
  private pickWeighted(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    let best = -1;
    let bestLoad = 0;
    let bestWeight = 1;
    let tieWeight = 0;
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      if (!c.isEligible()) continue;
      const load = c.load();
      const w = c.weight;
      // load / w against bestLoad / bestWeight, without dividing.
      const lhs = load * bestWeight;
      const rhs = bestLoad * w;
      if (best < 0 || lhs < rhs) {
        best = i;
        bestLoad = load;
        bestWeight = w;
        tieWeight = w;
      } else if (lhs === rhs) {
        tieWeight += w;
        if (this.rng.below(tieWeight) < w) {
          best = i;
          bestLoad = load;
          bestWeight = w;
        }
      }
    }
    if (best < 0) throwNoEligible(n);
    return best;
  }
}
