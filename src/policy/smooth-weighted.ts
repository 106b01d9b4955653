/**
 * SmoothWeightedRoundRobin: nginx's smooth weighted round robin.
 *
 * Each pick adds every eligible member's weight to its current weight, chooses
 * the member with the largest current weight (the first on a tie) and
 * subtracts the eligible total from it. Over any Σw consecutive picks of a
 * fixed slice started from zero state, member i is chosen exactly wᵢ times,
 * and the choices are interleaved (weights 5, 1, 1 give a a b a c a a rather
 * than a a a a a b c).
 *
 * Cost: O(n) per pick — the scan is nginx's algorithm itself, not a missing
 * table — but allocation-free (current weights live in a Float64Array).
 * Prefer {@link WeightedRandom} (O(1)) for large slices.
 *
 * State is keyed by identity: when the slice changes, a member that stays
 * keeps its current weight and a new member starts at 0, so a membership
 * change migrates the rotation instead of restarting it. (A carried weight is
 * clamped to ±Σw of the new slice, which keeps every value an exact integer.)
 * Ineligible members (standalone callers only) sit out a pick, as nginx's
 * down peers do. Weights are read when the slice is prepared; Σw is checked
 * (`WeightOverflow` past 2^51, leaving headroom for exact current weights).
 */
import type { Candidate } from '../core/candidate.js';
import { PoiseError, checkOptionKeys } from '../core/errors.js';
import { checkedAdd, validateWeight } from '../core/weight.js';
import { throwEmpty, throwNoEligible } from './slice.js';
import type { Policy, SeedOptions } from './types.js';

/** Largest Σw: current weights stay within a few Σw, and 4·2^51 = 2^53 is still exact. */
const MAX_TOTAL = 2 ** 51;

/**
 * Smooth weighted round robin (nginx).
 *
 * @example
 * const swrr = new SmoothWeightedRoundRobin();
 * // weights a=5, b=1, c=1 → a a b a c a a, repeating
 */
export class SmoothWeightedRoundRobin implements Policy {
  private slice: readonly Candidate[] | undefined;
  private sliceLength = -1;
  private weights = new Float64Array(0);
  private current = new Float64Array(0);
  /** Ids of the prepared slice, so state migrates even if the caller mutated the array in place. */
  private ids: string[] = [];

  /** Deterministic; options are accepted for a uniform interface (`seed` is unused). */
  constructor(options: SeedOptions = {}) {
    checkOptionKeys(options, ['seed']);
  }

  /** Adopts `candidates`, carrying current weights over by id (throws `InvalidWeight` / `WeightOverflow`; the old state stays then). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    const weights = new Float64Array(n);
    let total = 0;
    for (let i = 0; i < n; i++) {
      weights[i] = validateWeight(candidates[i]!.weight, `candidates[${i}].weight`);
      total = checkedAdd(total, weights[i]!);
    }
    if (total > MAX_TOTAL) {
      throw new PoiseError('WeightOverflow', `weight sum overflow: ${total} exceeds ${MAX_TOTAL} (smooth weighted round robin)`);
    }
    const current = new Float64Array(n);
    const carried = new Map<string, number>();
    for (let i = 0; i < this.ids.length; i++) carried.set(this.ids[i]!, this.current[i]!);
    const ids = new Array<string>(n);
    for (let i = 0; i < n; i++) {
      ids[i] = candidates[i]!.id;
      const c = carried.get(ids[i]!) ?? 0;
      current[i] = Math.min(total, Math.max(-total, c));
    }
    this.ids = ids;
    this.slice = candidates;
    this.sliceLength = n;
    this.weights = weights;
    this.current = current;
  }

  /** The eligible index with the largest current weight; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    if (candidates !== this.slice || candidates.length !== this.sliceLength) this.prepare(candidates);
    const n = candidates.length;
    if (n === 0) throwEmpty();
    const current = this.current;
    const weights = this.weights;
    let best = -1;
    let bestCurrent = 0;
    let total = 0;
    for (let i = 0; i < n; i++) {
      if (!candidates[i]!.isEligible()) continue;
      const w = weights[i]!;
      const c = current[i]! + w;
      current[i] = c;
      total += w;
      if (best < 0 || c > bestCurrent) {
        best = i;
        bestCurrent = c;
      }
    }
    if (best < 0) throwNoEligible(n);
    current[best] = bestCurrent - total;
    return best;
  }
}
