/**
 * AliasTable: Vose's alias method in integers — member i drawn with
 * probability exactly wᵢ / Σw in two draws, O(1).
 *
 * Each member's scaled weight wᵢ·n is split into n columns of height Σw:
 * column c keeps itself below threshold `prob[c]` and sends the rest to
 * `alias[c]`. A draw takes a column `c = below(n)` and, unless the column
 * is full, `u = below(Σw)`: `u < prob[c] ? c : alias[c]`. Every quantity is
 * an integer below 2^53, so the proportions are exact. Weights are integers
 * in [1, 2^32 − 1]; the sum and each wᵢ·n are checked (`WeightOverflow` past
 * 2^53 − 1). Shared by {@link WeightedRandom} and the weighted draws of
 * {@link PowerOfTwo}. @internal
 */
import type { Candidate } from '../core/candidate.js';
import type { Rng } from '../core/rng.js';
import { PoiseError } from '../core/errors.js';
import { checkedAdd, checkedMul, validateWeight } from '../core/weight.js';

/** An alias table over the weights of one slice. @internal */
export class AliasTable {
  /** Σw of the built slice. */
  total = 0;
  /** Members of the built slice. */
  n = 0;
  private prob = new Float64Array(0);
  private alias = new Int32Array(0);

  /** Builds the table for `candidates` (throws `InvalidWeight` / `WeightOverflow`; the old table stays then). */
  build(candidates: readonly Candidate[]): void {
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
    this.n = n;
    this.prob = prob;
    this.alias = alias;
  }

  /** A member index drawn in proportion to weight: `below(n)`, then `below(Σw)` unless the column is full. */
  draw(rng: Rng): number {
    const c = rng.below(this.n);
    const threshold = this.prob[c]!;
    return threshold === this.total || rng.below(this.total) < threshold ? c : this.alias[c]!;
  }
}

/**
 * Slow path (an ineligible draw, standalone callers only): an exact weighted
 * draw over the eligible members by a linear scan; `NoEligibleCandidates`
 * when there are none. @internal
 */
export function drawEligibleByWeight(candidates: readonly Candidate[], rng: Rng): number {
  const n = candidates.length;
  let sum = 0;
  for (let i = 0; i < n; i++) if (candidates[i]!.isEligible()) sum += candidates[i]!.weight;
  if (sum > 0) {
    let u = rng.below(sum);
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      if (!c.isEligible()) continue;
      if (u < c.weight) return i;
      u -= c.weight;
    }
  }
  throw new PoiseError('NoEligibleCandidates', `pick: none of the ${n} candidates is eligible`);
}
