/**
 * Guide tables (Chen & Asau's "indexed search") over a nondecreasing
 * cumulative array: the same answer as a binary search for the first entry
 * exceeding a draw, in expected O(1) steps.
 *
 * The draw range [0, total) is cut into `buckets` equal buckets of width
 * `pow`, a power of two chosen so that 2·len < buckets ≤ 4·len (or one
 * value per bucket when total ≤ 4·len). `guide[b]` is the first index whose
 * cumulative value exceeds the bucket's lower edge `b × pow`. A lookup jumps
 * to bucket `floor(x / pow)` and walks forward while the entry does not
 * exceed `x`; since `x ≥ b × pow`, the answer is never before `guide[b]`, so
 * the walk never skips it. For a uniform `x` the expected number of steps is
 * at most len / buckets < 1/2.
 *
 * Arithmetic is exact for every total up to 2^53: `x × (1 / pow)` and
 * `b × pow` multiply by powers of two (exact in binary floating point) and
 * `Math.floor` / `Math.ceil` of an exact quotient are exact.
 */

/** Smallest power of two `pow` with ceil(total / pow) ≤ 4 × len (the bucket width). */
export function guideWidth(total: number, len: number): number {
  const limit = 4 * Math.max(1, len);
  let pow = 1;
  while (Math.ceil(total / pow) > limit) pow *= 2;
  return pow;
}

/** Number of buckets of width `pow` covering [0, total). */
export function guideBuckets(total: number, pow: number): number {
  return Math.ceil(total / pow);
}

/** Guide entries needed for `len` cumulative values over draws in [0, total). */
export function guideSize(total: number, len: number): number {
  return guideBuckets(total, guideWidth(total, len));
}

/**
 * Fills `guide[off .. off + buckets)` for the cumulative range `a[lo .. hi)`:
 * entry `b` is the first index in [lo, hi − 1] whose value exceeds `b × pow`
 * (`hi − 1` when none does, the clamp of {@link upperBound}).
 */
export function fillGuide(a: Float64Array, lo: number, hi: number, pow: number, buckets: number, guide: Int32Array, off: number): void {
  let r = lo;
  const last = hi - 1;
  for (let b = 0; b < buckets; b++) {
    const edge = b * pow;
    while (r < last && a[r]! <= edge) r++;
    guide[off + b] = r;
  }
}

/**
 * First index in [lo, hi − 1] whose value exceeds `x`, or `hi − 1` when none
 * does — the reference binary search the guide lookup must agree with.
 */
export function upperBound(a: Float64Array, lo: number, hi: number, x: number): number {
  let l = lo;
  let h = hi - 1;
  while (l < h) {
    const m = (l + h) >>> 1;
    if (a[m]! > x) h = m;
    else l = m + 1;
  }
  return l;
}

/**
 * {@link upperBound} through a guide built by {@link fillGuide} with width
 * `pow` (`inv` = 1 / pow), for 0 ≤ x < total.
 */
export function guideSearch(a: Float64Array, hi: number, x: number, guide: Int32Array, off: number, inv: number): number {
  let r = guide[off + Math.floor(x * inv)]!;
  const last = hi - 1;
  while (r < last && a[r]! <= x) r++;
  return r;
}
