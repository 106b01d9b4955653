import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MILLION, mulDivFloor } from '../../src/core/weight.js';

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

describe('mulDivFloor (exact fixed-point)', () => {
  it('equals the BigInt floor(a × b / c) for any safe operands with a safe result', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        fc.integer({ min: 0, max: 2 ** 32 }),
        fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
        (a, b, c) => {
          const want = (BigInt(a) * BigInt(b)) / BigInt(c);
          if (want > SAFE) expect(() => mulDivFloor(a, b, c)).toThrow(/overflow/);
          else expect(mulDivFloor(a, b, c)).toBe(Number(want));
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('is exact where a double product would round (near 2^53 denominators)', () => {
    // a × 1e6 = 379,499 × c − 1 exactly; the double product rounds up to 379,499 × c.
    const a = 1_709_111_554_987_477;
    const c = 4_503_599_627_370_499;
    expect(Math.floor((a * MILLION) / c)).toBe(379_499);
    expect(mulDivFloor(a, MILLION, c)).toBe(379_498);
  });

  it('5/7 at 140 % is exactly full, just below 5/7 is not', () => {
    expect(mulDivFloor(5, 1_400_000, 7)).toBe(MILLION);
    expect(mulDivFloor(714_285, 1_400_000, 1_000_000)).toBe(999_999);
  });

  it('throws WeightOverflow when the quotient itself is unsafe', () => {
    expect(() => mulDivFloor(Number.MAX_SAFE_INTEGER, 4, 2)).toThrow(
      expect.objectContaining({ code: 'WeightOverflow' }),
    );
  });
});

describe('drawSmall', () => {
  it('draws exactly what Rng.below draws, word for word, for the same seed', async () => {
    const { Rng } = await import('../../src/core/rng.js');
    const { drawSmall, SMALL_COUNT } = await import('../../src/policy/priority/draw.js');
    fc.assert(
      fc.property(fc.integer(), fc.array(fc.integer({ min: 1, max: SMALL_COUNT }), { minLength: 1, maxLength: 50 }), (seed, ns) => {
        const a = new Rng(seed);
        const b = new Rng(seed);
        for (const n of ns) expect(drawSmall(a, n)).toBe(b.below(n));
        expect(a.nextU32()).toBe(b.nextU32());
      }),
      { numRuns: 300 },
    );
  });
});
