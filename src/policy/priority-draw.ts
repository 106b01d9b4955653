/**
 * `drawSmall(rng, n)`: the value `rng.below(n)` would draw — the same words
 * consumed, the same rejection of the short last bucket — for counts below
 * 2^30, without boxing.
 *
 * Why: docs/internals.md ("Numbers that do not allocate"). Callers narrow a
 * count to a small integer (`n | 0`) at the call site when `n <= SMALL_COUNT`
 * and call `rng.below(n)` otherwise; the draws are identical either way.
 */
import type { Rng } from '../core/rng.js';

const TWO_32 = 4294967296;
/** Counts up to this (2^30 − 1) are small-integer (Smi) values in V8 and draw through {@link drawSmall}. */
export const SMALL_COUNT = 0x3fff_ffff;

/** Uniform in [0, n) for an integer 1 <= n <= SMALL_COUNT; identical to `rng.below(n)`. */
export function drawSmall(rng: Rng, n: number): number {
  // limit is the largest multiple of n not above 2^32; words at or past it are redrawn.
  const limit = TWO_32 - (TWO_32 % n);
  // r is read from the generator's word, never returned as a uint32 (see Rng.word).
  let r: number;
  do {
    rng.step();
    r = rng.word[0]!;
  } while (r >= limit);
  return r % n;
}
