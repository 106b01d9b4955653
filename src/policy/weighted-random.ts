/**
 * WeightedRandom: member i with probability exactly wᵢ / Σw, O(1) per pick.
 *
 * Vose's alias method in integers. When a slice is prepared (a different
 * array or length), each member's scaled weight wᵢ·n is split into n columns
 * of height Σw: column c keeps itself below threshold `prob[c]` and sends the
 * rest to `alias[c]`. A pick draws a column `c = below(n)` and, unless the
 * column is full, `u = below(Σw)`: `u < prob[c] ? c : alias[c]`. Every
 * quantity is an integer below 2^53, so the proportions are exact, not
 * floating-point approximations. Weights are integers in [1, 2^32 − 1]; the
 * sum and each wᵢ·n are checked (`WeightOverflow` past 2^53 − 1).
 *
 * Weights are read when the slice is prepared; pass a fresh array (or call
 * {@link WeightedRandom.prepare}) after changing them. An ineligible draw
 * (standalone callers only) falls back to an exact weighted draw over the
 * eligible members by a linear scan.
 */
import type { Candidate } from '../core/candidate.js';
import type { Rng } from '../core/rng.js';
import { checkedAdd, checkedMul, validateWeight } from '../core/weight.js';
import { throwEmpty, throwNoEligible, rngFromOptions } from './slice.js';
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
  private total = 0;
  private prob = new Float64Array(0);
  private alias = new Int32Array(0);

  /** OS-seeded unless `seed` is given. */
  constructor(options: SeedOptions = {}) {
    this.rng = rngFromOptions(options);
  }

  /** Builds the alias table for `candidates` (throws `InvalidWeight` / `WeightOverflow`; the old table stays then). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    let total = 0;
    for (let i = 0; i < n; i++) total = checkedAdd(total, validateWeight(candidates[i]!.weight, `candidates[${i}].weight`));
    const scaled = new Float64Array(n);
    for (let i = 0; i < n; i++) scaled[i] = checkedMul(candidates[i]!.weight, n);
    const prob = new Float64Array(n).fill(total);
    const alias = new Int32Array(n);
    const small = new Int32Array(n);
    const large = new Int32Array(n);
    let ns = 0;
    let nl = 0;
    for (let i = 0; i < n; i++) {
      alias[i] = i;
      if (scaled[i]! < total) small[ns++] = i;
      else large[nl++] = i;
    }
    while (ns > 0 && nl > 0) {
      const s = small[--ns]!;
      const g = large[--nl]!;
      prob[s] = scaled[s]!;
      alias[s] = g;
      scaled[g] = scaled[g]! - (total - scaled[s]!);
      if (scaled[g]! < total) small[ns++] = g;
      else large[nl++] = g;
    }
    // Whatever remains in either list has a full column (exact in integers).
    this.total = total;
    this.prob = prob;
    this.alias = alias;
    this.slice = candidates;
    this.sliceLength = n;
  }

  /** An eligible index drawn in proportion to weight; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    if (candidates !== this.slice || candidates.length !== this.sliceLength) this.prepare(candidates);
    const n = candidates.length;
    if (n === 0) throwEmpty();
    const c = this.rng.below(n);
    const threshold = this.prob[c]!;
    const i = threshold === this.total || this.rng.below(this.total) < threshold ? c : this.alias[c]!;
    if (candidates[i]!.isEligible()) return i;
    return this.pickEligible(candidates);
  }

  /** Slow path: an exact weighted draw over the eligible members. */
  private pickEligible(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    let sum = 0;
    for (let i = 0; i < n; i++) if (candidates[i]!.isEligible()) sum += candidates[i]!.weight;
    if (sum === 0) throwNoEligible(n);
    let u = this.rng.below(sum);
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      if (!c.isEligible()) continue;
      if (u < c.weight) return i;
      u -= c.weight;
    }
    throwNoEligible(n);
  }
}
