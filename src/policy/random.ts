/**
 * Random: every eligible member equally likely, O(1) per pick.
 *
 * One `rng.below(n)` draw, inlined: the uint32 is read from `rng.word` after
 * `rng.step()` (never returned from a call, which could box it: see
 * `Rng.word`), with `below`'s exact rejection rule (limit = 2^32 − 2^32 mod
 * n, cached per slice length), so the sequence is `below(n)`'s. When the drawn member is ineligible (only possible
 * for standalone callers; the runtime's slices are all eligible), a fresh
 * uniform draw among the eligible members is made, so the result is exactly
 * uniform over the eligible members either way.
 */
import type { Candidate } from '../core/candidate.js';
import { rejectionLimit32 } from '../core/rng.js';
import { EligibleDraw, throwEmpty } from './slice.js';

/**
 * Uniform random selection.
 *
 * @example
 * const policy = new Random({ seed: 1 });
 * const i = policy.pick(backends);
 */
export class Random extends EligibleDraw {
  /** Slice length `limit` was computed for. */
  private n = -1;
  /** `below(n)`'s rejection limit. */
  private limit = 0;

  /** A uniformly random eligible index; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    if (n === 0) throwEmpty();
    if (n !== this.n) {
      this.limit = rejectionLimit32(n);
      this.n = n;
    }
    const rng = this.rng;
    let i: number;
    for (;;) {
      // r is a uint32 read from the generator's word (see Rng.word). below(n): redraw at or past the limit.
      rng.step();
      const r = rng.word[0]!;
      if (r < this.limit) {
        i = r % n;
        break;
      }
    }
    if (candidates[i]!.isEligible()) return i;
    const m = this.eligible.collect(candidates);
    return this.eligible.at(this.rng.below(m));
  }
}
