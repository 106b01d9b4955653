import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { holdbackCeilings } from '../../src/admission/holdback.js';
import { PoiseError } from '../../src/core/errors.js';

describe('holdbackCeilings', () => {
  it('rank domain: even steps from maxCeiling down to minCeiling (the seed example 0.4..0.9)', () => {
    expect(holdbackCeilings([100, 50, 10], { minCeiling: 0.4, maxCeiling: 0.9 })).toEqual([0.9, 0.65, 0.4]);
    const four = holdbackCeilings([3, 2, 1, 0], { minCeiling: 0.25 });
    expect(four[0]).toBe(1);
    expect(four[1]).toBeCloseTo(0.75, 12);
    expect(four[2]).toBeCloseTo(0.5, 12);
    expect(four[3]).toBe(0.25);
  });

  it("value domain: proportional to the band's number within the active range", () => {
    const c = holdbackCeilings([10, 9, 0], { minCeiling: 0, maxCeiling: 1, domain: 'value' });
    expect(c[0]).toBe(1);
    expect(c[1]).toBeCloseTo(0.9, 12);
    expect(c[2]).toBe(0);
  });

  it('one band gets maxCeiling; none gives an empty list', () => {
    expect(holdbackCeilings([7], { minCeiling: 0.2, maxCeiling: 0.8 })).toEqual([0.8]);
    expect(holdbackCeilings([], { minCeiling: 0.2 })).toEqual([]);
  });

  it('law: ceilings are non-increasing, bounded by [min, max], endpoints exact', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: -1000, max: 1000 }), { minLength: 2, maxLength: 20 }),
        fc.double({ min: 0, max: 0.99, noNaN: true }),
        fc.double({ min: 0.01, max: 1, noNaN: true }),
        (ps, a, b) => {
          const min = Math.min(a, b);
          const max = Math.max(a, b);
          fc.pre(min < 1 && max > 0);
          const desc = [...ps].sort((x, y) => y - x);
          for (const domain of ['rank', 'value'] as const) {
            const c = holdbackCeilings(desc, { minCeiling: min, maxCeiling: max, domain });
            expect(c[0]).toBe(max);
            expect(c[c.length - 1]).toBe(min);
            for (let i = 1; i < c.length; i++) expect(c[i]!).toBeLessThanOrEqual(c[i - 1]! + 1e-12);
            for (const x of c) expect(x >= min - 1e-12 && x <= max + 1e-12).toBe(true);
          }
        },
      ),
    );
  });

  it.each([
    [{ minCeiling: 1 }, 'options.minCeiling: is required and must be a number in [0, 1), got 1'],
    [{} as { minCeiling: number }, 'options.minCeiling: is required and must be a number in [0, 1), got undefined'],
    [{ minCeiling: 0.1, maxCeiling: 0 }, 'options.maxCeiling: must be a number in (0, 1], got 0'],
    [{ minCeiling: 0.6, maxCeiling: 0.5 }, 'options.minCeiling: must not exceed options.maxCeiling (0.5), got 0.6'],
    [{ minCeiling: 0.1, shape: 'cubic' as 'linear' }, 'options.shape: must be "linear", got "cubic"'],
    [{ minCeiling: 0.1, domain: 'log' as 'rank' }, 'options.domain: must be "rank" or "value", got "log"'],
  ])('rejects bad options %#', (opts, message) => {
    expect(() => holdbackCeilings([2, 1], opts)).toThrow(message);
  });

  it('rejects bands that are not strictly descending, naming the index', () => {
    expect(() => holdbackCeilings([1, 2], { minCeiling: 0 })).toThrow(
      'bandsDescending[1]: must be strictly below the previous band 1, got 2',
    );
    expect(() => holdbackCeilings([3, 3], { minCeiling: 0 })).toThrow(PoiseError);
  });
});
