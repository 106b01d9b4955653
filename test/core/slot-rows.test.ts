/**
 * The generation-keyed row table (src/core/slot-rows.ts): a row counts for
 * one (slot, generation); a reader asking for another generation reads
 * nothing; the first writer of a new generation starts the row from zero,
 * whatever the old counts were (carries included); rows do not overlap.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TWO_32 } from '../../src/core/counter64.js';
import { GenerationRows } from '../../src/core/slot-rows.js';

function table(capacity = 4, counters = 3, rowWords = 8, base = 5): GenerationRows {
  return new GenerationRows(new Int32Array(new SharedArrayBuffer((base + capacity * rowWords) * 4)), base, capacity, rowWords, counters);
}

describe('GenerationRows', () => {
  it('counts per (slot, generation); stale or future generations and out-of-range slots read nothing', () => {
    const t = table();
    const r = t.writable(2, 7);
    t.add(r, 0, 5);
    t.add(r, 2, TWO_32 - 1);
    t.add(r, 2, 3);
    const read = t.readable(2, 7);
    expect([t.read(read, 0), t.read(read, 1), t.read(read, 2)]).toEqual([5, 0, TWO_32 + 2]);
    expect(t.readable(2, 6)).toBe(-1);
    expect(t.readable(2, 8)).toBe(-1);
    expect(t.readable(1, 7)).toBe(-1);
    expect(t.writable(-1, 7)).toBe(-1);
    expect(t.writable(4, 7)).toBe(-1);
    expect(t.readable(4, 7)).toBe(-1);
  });

  it('a reused slot starts from zero for its new generation, and its neighbours keep their counts', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: TWO_32 - 1 }), { minLength: 3, maxLength: 3 }),
        fc.integer({ min: 0, max: 1000 }),
        (old, fresh) => {
          const t = table();
          const a = t.writable(1, 3);
          for (let k = 0; k < 3; k++) t.add(a, k, old[k]!);
          const n = t.writable(0, 9);
          t.add(n, 1, 11);
          const b = t.writable(1, 4);
          t.add(b, 1, fresh);
          const r = t.readable(1, 4);
          expect([t.read(r, 0), t.read(r, 1), t.read(r, 2)]).toEqual([0, fresh, 0]);
          expect(t.readable(1, 3)).toBe(-1);
          expect(t.read(t.readable(0, 9), 1)).toBe(11);
        },
      ),
    );
  });

  it('refuses a row too small for its counters, naming the field', () => {
    expect(() => table(4, 4, 8)).toThrow('rowWords');
  });
});
