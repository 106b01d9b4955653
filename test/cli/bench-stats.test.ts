import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GROWTH, Histogram } from '../../src/cli/bench/stats.js';
import { Rng } from '../../src/core/rng.js';

function exactQuantile(sorted: number[], q: number): number {
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

describe('latency histogram', () => {
  it('every percentile is within the bucket ratio (2 %) of the exact order statistic', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0.001, max: 60_000, noNaN: true }), { minLength: 1, maxLength: 300 }), fc.constantFrom(0.5, 0.9, 0.99, 0.999, 1), (values, q) => {
        const h = new Histogram();
        for (const v of values) h.recordMs(v);
        const exact = exactQuantile([...values].sort((a, b) => a - b), q);
        const got = h.percentileMs(q);
        expect(got).toBeGreaterThanOrEqual(exact / GROWTH - 1e-9);
        expect(got).toBeLessThanOrEqual(exact * GROWTH + 1e-9);
      }),
    );
  });

  it('merging per-worker histograms equals recording everything in one', () => {
    const rng = new Rng(5);
    const parts = [new Histogram(), new Histogram(), new Histogram()];
    const all = new Histogram();
    for (let i = 0; i < 30_000; i++) {
      const v = Math.exp(rng.float() * 8) / 10;
      parts[i % 3]!.recordMs(v);
      all.recordMs(v);
    }
    const merged = new Histogram();
    for (const p of parts) merged.merge(Histogram.from(structuredClone(p.data())));
    expect(merged.count).toBe(30_000);
    for (const q of [0.5, 0.99, 0.999]) expect(merged.percentileMs(q)).toBe(all.percentileMs(q));
    expect(merged.maxMs()).toBe(all.maxMs());
    expect(merged.meanMs()).toBeCloseTo(all.meanMs(), 9);
  });

  it('the CDF is non-decreasing and ends at 1; an empty histogram has NaN percentiles', () => {
    const h = new Histogram();
    expect(h.percentileMs(0.5)).toBeNaN();
    for (let i = 1; i <= 1000; i++) h.recordMs(i / 10);
    const cdf = h.cdf();
    for (let i = 1; i < cdf.length; i++) {
      expect(cdf[i]![0]).toBeGreaterThan(cdf[i - 1]![0]);
      expect(cdf[i]![1]).toBeGreaterThan(cdf[i - 1]![1]);
    }
    expect(cdf.at(-1)![1]).toBe(1);
    expect(cdf.at(-1)![0]).toBe(100);
  });
});
