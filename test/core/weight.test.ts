import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_WEIGHT,
  MAX_WEIGHT_SUM,
  MILLION,
  checkedAdd,
  checkedMul,
  isValidWeight,
  mulDivFloor,
  validateWeight,
} from '../../src/core/weight.js';
import { thrown } from '../helpers/thrown.js';

describe('weights', () => {
  it('accepts exactly the integers in [1, 2^32 − 1]', () => {
    expect(MAX_WEIGHT).toBe(4294967295);
    for (const w of [1, 2, 1000, MAX_WEIGHT]) expect(isValidWeight(w)).toBe(true);
    for (const w of [0, -1, 1.5, MAX_WEIGHT + 1, Number.NaN, Number.POSITIVE_INFINITY, '3', null, undefined, 3n]) {
      expect(isValidWeight(w)).toBe(false);
    }
  });

  it.each([
    [-2, 'backends[3].weight', 'backends[3].weight: must be an integer in [1, 4294967295], got -2'],
    [0, 'weight', 'weight: must be an integer in [1, 4294967295], got 0'],
    [1.5, 'w', 'w: must be an integer in [1, 4294967295], got 1.5'],
    [4294967296, 'weight', 'weight: must be an integer in [1, 4294967295], got 4294967296'],
    ['3', 'weight', 'weight: must be an integer in [1, 4294967295], got "3"'],
    [null, 'weight', 'weight: must be an integer in [1, 4294967295], got null'],
  ])('validateWeight(%o) names the field: %s', (value, field, message) => {
    const err = thrown(() => validateWeight(value, field));
    expect(err.code).toBe('InvalidWeight');
    expect(err.message).toBe(message);
    expect(err.field).toBe(field);
  });

  it('validateWeight returns a valid weight unchanged', () => {
    expect(validateWeight(7)).toBe(7);
  });

  it('checked sums throw WeightOverflow instead of losing precision', () => {
    expect(checkedAdd(MAX_WEIGHT_SUM - 1, 1)).toBe(MAX_WEIGHT_SUM);
    const add = thrown(() => checkedAdd(MAX_WEIGHT_SUM, 1));
    expect(add.code).toBe('WeightOverflow');
    expect(add.message).toBe('weight sum overflow: 9007199254740991 + 1 exceeds 9007199254740991');
    const mul = thrown(() => checkedMul(2 ** 32, 2 ** 21));
    expect(mul.code).toBe('WeightOverflow');
    expect(mul.message).toBe('weight product overflow: 4294967296 × 2097152 exceeds 9007199254740991');
    expect(checkedMul(MAX_WEIGHT, 2 ** 20)).toBe(MAX_WEIGHT * 2 ** 20);
  });

  it('mulDivFloor is exactly floor(a·b/c), also past 2^53 (checked against BigInt)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: MAX_WEIGHT_SUM }),
        fc.integer({ min: 0, max: 2 ** 32 }),
        fc.integer({ min: 1, max: MAX_WEIGHT_SUM }),
        (a, b, c) => {
          const exact = (BigInt(a) * BigInt(b)) / BigInt(c);
          if (exact > BigInt(MAX_WEIGHT_SUM)) expect(thrown(() => mulDivFloor(a, b, c)).code).toBe('WeightOverflow');
          else expect(mulDivFloor(a, b, c)).toBe(Number(exact));
        },
      ),
      { numRuns: 2000 },
    );
    expect(mulDivFloor(5, 1_400_000, 7)).toBe(1_000_000);
    expect(mulDivFloor(2 ** 52, 1_000_000, 2 ** 53 - 1)).toBe(Number((2n ** 52n * 1_000_000n) / (2n ** 53n - 1n)));
  });
});

describe('mulDivFloor at the edges', () => {
  it('is exact where a double product would round (near 2^53 denominators)', () => {
    // a × 1e6 = 379,499 × c − 1 exactly; the double product rounds up to 379,499 × c.
    const a = 1_709_111_554_987_477;
    const c = 4_503_599_627_370_499;
    expect(Math.floor((a * MILLION) / c)).toBe(379_499);
    expect(mulDivFloor(a, MILLION, c)).toBe(379_498);
  });

  it('just below 5/7 at 140 % is not full', () => {
    expect(mulDivFloor(714_285, 1_400_000, 1_000_000)).toBe(999_999);
  });

  it('throws WeightOverflow when the quotient itself is unsafe', () => {
    expect(() => mulDivFloor(Number.MAX_SAFE_INTEGER, 4, 2)).toThrow(expect.objectContaining({ code: 'WeightOverflow' }));
  });
});
