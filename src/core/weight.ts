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

/** The largest accepted weight, 2^32 − 1. */
export const MAX_WEIGHT = 0xffff_ffff;

/** The largest exact sum; past it `checkedAdd` throws `WeightOverflow`. */
export const MAX_WEIGHT_SUM = Number.MAX_SAFE_INTEGER;

/** True when `value` is an integer in [1, 2^32 − 1]. */
export function isValidWeight(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_WEIGHT;
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
    throw new PoiseError(
      'InvalidWeight',
      `${field}: must be an integer in [1, ${MAX_WEIGHT}], got ${describe(value)}`,
      { field },
    );
  }
  return value;
}

/** `a + b` for non-negative integers, throwing `WeightOverflow` past `MAX_WEIGHT_SUM`. */
export function checkedAdd(a: number, b: number): number {
  const sum = a + b;
  if (sum > MAX_WEIGHT_SUM) {
    throw new PoiseError('WeightOverflow', `weight sum overflow: ${a} + ${b} exceeds ${MAX_WEIGHT_SUM}`);
  }
  return sum;
}

/** `a × b` for non-negative integers, throwing `WeightOverflow` past `MAX_WEIGHT_SUM`. */
export function checkedMul(a: number, b: number): number {
  const product = a * b;
  if (product > MAX_WEIGHT_SUM) {
    throw new PoiseError('WeightOverflow', `weight product overflow: ${a} × ${b} exceeds ${MAX_WEIGHT_SUM}`);
  }
  return product;
}

/** The checked sum of `weightOf(item)` over `items`. */
export function checkedSum<T>(items: readonly T[], weightOf: (item: T) => number): number {
  let sum = 0;
  for (let i = 0; i < items.length; i++) sum = checkedAdd(sum, weightOf(items[i] as T));
  return sum;
}
