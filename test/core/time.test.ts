import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TIME_MASK, elapsedMs, wrapMs } from '../../src/core/time.js';

describe('wrapped time', () => {
  it('wraps at 2^30 ms and stays a small non-negative integer', () => {
    expect(TIME_MASK).toBe(2 ** 30 - 1);
    expect(wrapMs(TIME_MASK)).toBe(TIME_MASK);
    expect(wrapMs(2 ** 30)).toBe(0);
    expect(wrapMs(2 ** 30 + 7)).toBe(7);
    expect(wrapMs(3 * 2 ** 30 + 1)).toBe(1);
  });

  it('measures across the wrap boundary exactly', () => {
    expect(elapsedMs(wrapMs(TIME_MASK + 1), TIME_MASK)).toBe(1);
    expect(elapsedMs(5, TIME_MASK - 4)).toBe(10);
    expect(elapsedMs(TIME_MASK - 4, 5)).toBe(-10);
    expect(elapsedMs(0, 0)).toBe(0);
    // The representable range is [−2^29, 2^29): 2^29 − 1 ahead is still "after", 2^29 ahead reads as before.
    expect(elapsedMs(wrapMs(100 + 2 ** 29 - 1), 100)).toBe(2 ** 29 - 1);
    expect(elapsedMs(wrapMs(100 + 2 ** 29), 100)).toBe(-(2 ** 29));
  });

  it('elapsedMs(wrap(t + d), wrap(t)) = d for every t and every |d| < 2^29 (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: -(2 ** 29), max: 2 ** 29 - 1 }), (t, d) => {
        expect(elapsedMs(wrapMs(t + d), wrapMs(t))).toBe(d);
      }),
    );
  });

  it('is antisymmetric away from the ±2^29 edge (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: TIME_MASK }), fc.integer({ min: 0, max: TIME_MASK }), (a, b) => {
        const d = elapsedMs(a, b);
        if (d !== -(2 ** 29)) expect(elapsedMs(b, a)).toBe(0 - d + 0);
      }),
    );
  });
});
