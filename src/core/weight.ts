/**
 * Weights and checked arithmetic.
 *
 * A weight is an integer in [1, 2^32 − 1] (`MAX_WEIGHT`), the range Envoy and
 * poise-rs use for endpoint and locality weights. Sums of weights are checked:
 * they throw `WeightOverflow` rather than silently losing precision once they
 * pass `Number.MAX_SAFE_INTEGER` (2^53 − 1), so a sum over up to 2^21 maximal
 * weights is always exact.
 */
import { PoiseError, describe } from './errors.js';
import { isIntegerIn } from './validate.js';

/** The largest accepted weight, 2^32 − 1. */
export const MAX_WEIGHT = 0xffff_ffff;

/** The largest exact sum; past it `checkedAdd` throws `WeightOverflow`. @internal */
export const MAX_WEIGHT_SUM = Number.MAX_SAFE_INTEGER;

/** True when `value` is an integer in [1, 2^32 − 1]. */
export function isValidWeight(value: unknown): value is number {
  return isIntegerIn(value, 1, MAX_WEIGHT);
}

/**
 * Returns `value` when it is a valid weight, else throws `InvalidWeight`
 * naming `field` and the reason.
 *
 * @example
 * const w = validateWeight(spec.weight ?? 1, 'backends[3].weight');
 */
export function validateWeight(value: unknown, field = 'weight'): number {
  if (!isValidWeight(value)) {
    throw new PoiseError('InvalidWeight', `${field}: must be an integer in [1, ${MAX_WEIGHT}], got ${describe(value)}`, { field });
  }
  return value;
}

/** `a + b` for non-negative integers, throwing `WeightOverflow` past `MAX_WEIGHT_SUM`. @internal */
export function checkedAdd(a: number, b: number): number {
  const sum = a + b;
  if (sum > MAX_WEIGHT_SUM) {
    throw new PoiseError('WeightOverflow', `weight sum overflow: ${a} + ${b} exceeds ${MAX_WEIGHT_SUM}`);
  }
  return sum;
}

/** `a × b` for non-negative integers, throwing `WeightOverflow` past `MAX_WEIGHT_SUM`. @internal */
export function checkedMul(a: number, b: number): number {
  const product = a * b;
  if (product > MAX_WEIGHT_SUM) {
    throw new PoiseError('WeightOverflow', `weight product overflow: ${a} × ${b} exceeds ${MAX_WEIGHT_SUM}`);
  }
  return product;
}

/** One whole in millionth-share fixed point: 1,000,000 = 100 %. @internal */
export const MILLION = 1_000_000;

/**
 * `floor(a × b / c)` computed exactly for non-negative safe integers `a`, `b`
 * and a positive safe integer `c`, even when `a × b` passes 2^53 (where a
 * plain double product would round). Throws `WeightOverflow` when the result
 * itself is not a safe integer. Allocates nothing.
 *
 * Method: when the product is exact it divides its exact remainder away;
 * otherwise it splits `a = qa·c + ra` and runs a binary long multiplication
 * of `ra × b` modulo `c`, keeping every intermediate below 2^53 (a doubling
 * is exact in binary floating point; additions are rearranged as
 * subtractions whenever they would cross `c`).
 *
 * @example
 * mulDivFloor(5, 1_400_000, 7);              // 1_000_000: 5/7 at 140 % is exactly full
 * mulDivFloor(2 ** 52, 1_000_000, 2 ** 53 - 1); // exact, though the product is ~2^72
 * @internal
 */
export function mulDivFloor(a: number, b: number, c: number): number {
  const p = a * b;
  if (p <= MAX_WEIGHT_SUM) return (p - (p % c)) / c;
  const ra = a % c;
  const qa = (a - ra) / c;
  let q = checkedMul(qa, b);
  if (ra === 0) return q;
  // floor(ra × b / c) with ra < c: Horner over the bits of b, invariant r < c.
  let pow = 1;
  while (pow * 2 <= b) pow *= 2;
  let rest = b;
  let hi = 0;
  let r = 0;
  for (; pow >= 1; pow /= 2) {
    hi *= 2;
    if (r >= c - r) {
      r -= c - r;
      hi += 1;
    } else r += r;
    if (rest >= pow) {
      rest -= pow;
      if (r >= c - ra) {
        r -= c - ra;
        hi += 1;
      } else r += ra;
    }
  }
  q += hi;
  if (q > MAX_WEIGHT_SUM) {
    throw new PoiseError('WeightOverflow', `fixed-point overflow: ${a} × ${b} / ${c} exceeds ${MAX_WEIGHT_SUM}`);
  }
  return q;
}
