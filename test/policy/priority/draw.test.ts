import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../../src/core/rng.js';
import { drawSmall, SMALL_COUNT } from '../../../src/policy/priority/draw.js';

describe('drawSmall', () => {
  it('draws exactly what Rng.below draws, word for word, for the same seed', () => {
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
