import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { apertureSlice } from '../../src/policy/aperture.js';

describe('apertureSlice (deterministic aperture)', () => {
  it('property: the slices of all processes cover every backend with the same total weight', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 60 }),
        fc.double({ min: 0.001, max: 1, noNaN: true }),
        (p, n, width) => {
          const total = new Array<number>(n).fill(0);
          for (let r = 0; r < p; r++) for (const m of apertureSlice(r, p, n, width)) total[m.index]! += m.weight;
          const k = Math.min(p, Math.max(1, Math.ceil(width * p - 1e-9)));
          for (const t of total) expect(t).toBe(k * p);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('property: a slice is contiguous on the ring, its inner members whole (weight = processes), only its two ends fractional', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 60 }),
        fc.double({ min: 0.001, max: 1, noNaN: true }),
        fc.nat(),
        (p, n, width, r0) => {
          const r = r0 % p;
          const s = apertureSlice(r, p, n, width);
          expect(s.length).toBeGreaterThan(0);
          expect(new Set(s.map((m) => m.index)).size).toBe(s.length);
          for (let i = 1; i < s.length; i++) expect(s[i]!.index).toBe((s[i - 1]!.index + 1) % n);
          for (let i = 1; i < s.length - 1; i++) expect(s[i]!.weight).toBe(p);
          for (const m of s) expect(m.weight).toBeGreaterThanOrEqual(1);
          // Its weights add up to its width in ring units: k process units of n.
          const k = Math.min(p, Math.max(1, Math.ceil(width * p - 1e-9)));
          expect(s.reduce((a, m) => a + m.weight, 0)).toBe(k * n);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('3 processes over 4 backends at the narrowest width: thirds of the ring, boundary backends weighted by their overlap', () => {
    // Ring units: 12; backends span 3 each, processes 4 each.
    expect(apertureSlice(0, 3, 4, 0.01)).toEqual([
      { index: 0, weight: 3 },
      { index: 1, weight: 1 },
    ]);
    expect(apertureSlice(1, 3, 4, 0.01)).toEqual([
      { index: 1, weight: 2 },
      { index: 2, weight: 2 },
    ]);
    expect(apertureSlice(2, 3, 4, 0.01)).toEqual([
      { index: 2, weight: 1 },
      { index: 3, weight: 3 },
    ]);
  });

  it('a width is rounded up to whole process units; the whole ring gives every backend the full weight', () => {
    // 0.3 of 4 processes → 2 units (half the ring).
    expect(apertureSlice(3, 4, 8, 0.3)).toEqual([6, 7, 0, 1].map((index) => ({ index, weight: 4 })));
    expect(apertureSlice(1, 2, 3, 1)).toEqual([1, 2, 0].map((index) => ({ index, weight: 2 })));
    expect(() => apertureSlice(2, 2, 3, 0.5)).toThrow('rank must be an integer in [0, 2), got 2');
    expect(() => apertureSlice(0, 2, 3, 0)).toThrow('width must be in (0, 1], got 0');
  });
});
