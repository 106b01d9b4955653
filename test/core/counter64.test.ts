/**
 * The 64-bit counter pair (src/core/counter64.ts): any sequence of adds and
 * subtractions leaves the pair equal to the exact sum (carries across 2^32
 * and borrows included), and a read returns it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TWO_32, add64, read64, sub64 } from '../../src/core/counter64.js';

describe('counter64', () => {
  it('carries into the high word exactly when the low word crosses 2^32', () => {
    const i32 = new Int32Array(new SharedArrayBuffer(16));
    add64(i32, 2, TWO_32 - 1);
    expect([read64(i32, 2), i32[3]]).toEqual([TWO_32 - 1, 0]);
    add64(i32, 2, 1);
    expect([read64(i32, 2), i32[2], i32[3]]).toEqual([TWO_32, 0, 1]);
    add64(i32, 2, TWO_32 - 1);
    expect(read64(i32, 2)).toBe(2 * TWO_32 - 1);
    // The neighbours are untouched.
    expect([i32[0], i32[1]]).toEqual([0, 0]);
  });

  it('any sequence of adds and in-range subtractions leaves the exact sum', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: TWO_32 - 1 })), { maxLength: 60 }), (ops) => {
        const i32 = new Int32Array(new SharedArrayBuffer(8));
        let expected = 0;
        for (const [sub, n] of ops) {
          if (sub) {
            // Subtract up to what the pair holds (counts never go negative), with a high part too.
            const v = Math.min(expected, n * 3);
            sub64(i32, 0, v);
            expected -= v;
          } else {
            add64(i32, 0, n);
            expected += n;
          }
          expect(read64(i32, 0)).toBe(expected);
        }
      }),
    );
  });
});
