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
 *
 * Weights: when the slice's weights differ, a member is drawn in proportion
 * to its weight instead (the alias table of {@link WeightedRandom}, built
 * when the slice is adopted), so `random` honours weights like every other
 * policy; with equal weights the draw above is unchanged.
 */
import type { Candidate } from '../core/candidate.js';
import { modRecip, rejectionLimit32 } from '../core/rng.js';
import { drawEligibleByWeight } from './alias.js';
import { EligibleDraw, throwEmpty } from './slice.js';

/**
 * Uniform random selection.
 *
 * @example
 * const policy = new Random({ seed: 1 });
 * const i = policy.pick(backends);
 */
export class Random extends EligibleDraw {
  /** `below(n)`'s rejection limit, and 1 / n (core/rng.ts `modRecip`). */
  private limit = 0;
  private inv = 0;

  /** Adopts a slice: scratch, weights, and `below(n)`'s limit. */
  override prepare(candidates: readonly Candidate[]): void {
    super.prepare(candidates);
    this.limit = rejectionLimit32(Math.max(1, candidates.length));
    this.inv = 1 / Math.max(1, candidates.length);
  }

  /** A random eligible index (uniform, or by weight when weights differ); `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    if (n === 0) throwEmpty();
    if (n !== this.n || candidates !== this.slice) this.prepare(candidates);
    if (this.weighted) {
      const w = this.alias.draw(this.rng);
      return candidates[w]!.isEligible() ? w : drawEligibleByWeight(candidates, this.rng);
    }
    const rng = this.rng;
    const word = rng.word;
    let r: number;
    // r is a uint32 read from the generator's word (see Rng.word). below(n): redraw at or past the limit.
    do {
      rng.step();
      r = word[0]!;
    } while (r >= this.limit);
    const i = modRecip(r, n, this.inv);
    if (candidates[i]!.isEligible()) return i;
    const m = this.eligible.collect(candidates);
    return this.eligible.at(this.rng.below(m));
  }
}
