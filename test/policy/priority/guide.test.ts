import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { fillGuide, guideBuckets, guideSearch, guideSize, guideWidth, upperBound } from '../../../src/policy/priority/guide.js';

/** Cumulative sums of `steps` (exact: the generators keep totals below 2^53). */
function cumulative(steps: readonly number[]): Float64Array {
  const a = new Float64Array(steps.length);
  let acc = 0;
  steps.forEach((s, i) => {
    acc += s;
    a[i] = acc;
  });
  return a;
}

/** A guide for all of `a` over [0, total), placed at `off` inside a larger array (as the table does). */
function guideFor(a: Float64Array, total: number, off: number): { guide: Int32Array; inv: number; pow: number } {
  const pow = guideWidth(total, a.length);
  const guide = new Int32Array(off + guideBuckets(total, pow) + 3).fill(-1);
  fillGuide(a, 0, a.length, pow, guideBuckets(total, pow), guide, off);
  return { guide, inv: 1 / pow, pow };
}

/** Draws worth checking: both ends, every bucket edge and its predecessor, every cumulative value ± 1. */
function probes(a: Float64Array, total: number, pow: number): number[] {
  const xs = new Set<number>([0, total - 1]);
  for (let e = 0; e < total; e += pow) {
    xs.add(e);
    if (e > 0) xs.add(e - 1);
    if (xs.size > 4000) break;
  }
  for (const v of a) for (const x of [v - 1, v, v + 1]) if (x >= 0 && x < total) xs.add(x);
  return [...xs];
}

// Weight steps as the table sees them: endpoint weights in [1, 2^32 − 1] (small, huge or mixed),
// and share steps in [0, 1e6] that may be zero (a priority or locality with no share).
const endpointWeights = fc.array(
  fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 2 ** 32 - 1 }), fc.constant(2 ** 32 - 1)),
  { minLength: 1, maxLength: 300 },
);

describe('guide table lookup ≡ binary search', () => {
  it('agrees with upperBound on endpoint prefix sums, including totals far above 2^32', () => {
    fc.assert(
      fc.property(
        endpointWeights,
        fc.nat(5),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }), { maxLength: 50 }),
        (ws, off, us) => {
          const a = cumulative(ws);
          const total = a[a.length - 1]!;
          const { guide, inv, pow } = guideFor(a, total, off);
          const xs = [...probes(a, total, pow), ...us.map((u) => Math.floor(u * total))];
          for (const x of xs) expect(guideSearch(a, a.length, x, guide, off, inv)).toBe(upperBound(a, 0, a.length, x));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('agrees on share arrays with zero steps over [0, 1e6)', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(4), { minLength: 1, maxLength: 40 }), (parts) => {
        // Shares proportional to `parts` (zeros allowed), summing to exactly 1e6 when any part is nonzero.
        const sum = parts.reduce((s, p) => s + p, 0);
        const shares = parts.map((p) => (sum === 0 ? 0 : Math.floor((p * 1e6) / sum)));
        const first = shares.findIndex((s) => s > 0);
        if (first >= 0) shares[first]! += 1e6 - shares.reduce((s, p) => s + p, 0);
        const a = cumulative(shares);
        const { guide, inv, pow } = guideFor(a, 1e6, 0);
        for (const x of probes(a, 1e6, pow)) expect(guideSearch(a, a.length, x, guide, 0, inv)).toBe(upperBound(a, 0, a.length, x));
      }),
      { numRuns: 300 },
    );
  });

  it('agrees on every draw of small exhaustive ranges', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 30 }), (ws) => {
        const a = cumulative(ws);
        const total = a[a.length - 1]!;
        const { guide, inv } = guideFor(a, total, 2);
        for (let x = 0; x < total; x++) expect(guideSearch(a, a.length, x, guide, 2, inv)).toBe(upperBound(a, 0, a.length, x));
      }),
      { numRuns: 200 },
    );
  });

  it('uses a power-of-two bucket width with 2·len < buckets ≤ 4·len, or one draw per bucket', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), fc.integer({ min: 1, max: 1 << 20 }), (total, len) => {
        const pow = guideWidth(total, len);
        const buckets = guideBuckets(total, pow);
        expect(Math.log2(pow) % 1).toBe(0);
        expect(buckets).toBe(guideSize(total, len));
        expect(buckets).toBeLessThanOrEqual(4 * len);
        if (pow > 1) expect(buckets).toBeGreaterThan(2 * len);
        else expect(buckets).toBe(total);
        // The last draw lands in the last bucket: floor((total − 1) / pow) = buckets − 1, computed exactly.
        expect(Math.floor((total - 1) * (1 / pow))).toBe(buckets - 1);
      }),
      { numRuns: 1000 },
    );
  });

  it('handles the largest exact totals (a sum near 2^53)', () => {
    const ws = [2 ** 52, 1, 2 ** 52 - 3, 1];
    const a = cumulative(ws);
    const total = a[a.length - 1]!;
    expect(total).toBe(Number.MAX_SAFE_INTEGER);
    const { guide, inv, pow } = guideFor(a, total, 0);
    for (const x of probes(a, total, pow)) expect(guideSearch(a, a.length, x, guide, 0, inv)).toBe(upperBound(a, 0, a.length, x));
    expect(guideSearch(a, a.length, 2 ** 52 - 1, guide, 0, inv)).toBe(0);
    expect(guideSearch(a, a.length, 2 ** 52, guide, 0, inv)).toBe(1);
    expect(guideSearch(a, a.length, 2 ** 52 + 1, guide, 0, inv)).toBe(2);
    expect(guideSearch(a, a.length, total - 1, guide, 0, inv)).toBe(3);
  });
});
