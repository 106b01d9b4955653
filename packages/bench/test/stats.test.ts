import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_US, latencyHistogram, recordMs, summarize } from '../src/stats.js';
import { Rng } from '../src/kit.js';

/** The ⌊q·n + ½⌋-th smallest value (at least the first): HdrHistogram's rank for the q-quantile. */
function rankValue(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length, Math.max(1, Math.floor(q * sorted.length + 0.5))) - 1]!;
}

describe('latency statistics on perf_hooks histograms', () => {
  it('exact known inputs: 1 µs … 1000 µs give p50 0.5 ms, p99 0.99 ms, p99.9 0.999 ms, mean 0.5005 ms, max 1 ms', () => {
    const h = latencyHistogram();
    for (let us = 1000; us >= 1; us--) recordMs(h, us / 1000); // order does not matter
    const s = summarize(h);
    expect([s.count, s.p50, s.p99, s.p999, s.mean, s.max]).toEqual([1000, 0.5, 0.99, 0.999, 0.5005, 1]);
    expect(s.cdf[0]).toEqual([0.01, 0.01]);
    expect(s.cdf.at(-1)).toEqual([1, 1]);
  });

  it('exact known inputs with a tail: 990 × 4 ms and 10 × 40 ms put p50 at 4 ms and p99.9 at 40 ms (within 1/1024)', () => {
    const h = latencyHistogram();
    for (let i = 0; i < 990; i++) recordMs(h, 4);
    for (let i = 0; i < 10; i++) recordMs(h, 40);
    const s = summarize(h);
    expect(s.count).toBe(1000);
    // 4000 µs and 40000 µs sit in buckets 2 µs and 32 µs wide: the reported value is the bucket's top.
    expect([s.p50, s.p99, s.p999, s.max]).toEqual([4.001, 4.001, 40.031, 40.031]);
    expect(s.mean).toBeCloseTo((990 * 4 + 10 * 40) / 1000, 2);
  });

  it('every percentile is the rank value or above it by at most 1/1024 (property, 1 µs to 60 s)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.001, max: 60_000, noNaN: true }), { minLength: 1, maxLength: 300 }),
        fc.constantFrom(0.5, 0.9, 0.99, 0.999, 1),
        (values, q) => {
          const h = latencyHistogram();
          for (const v of values) recordMs(h, v);
          const us = values.map((v) => Math.round(v * 1000)).sort((a, b) => a - b);
          const exact = rankValue(us, q);
          const got = h.percentile(q * 100);
          expect(got).toBeGreaterThanOrEqual(exact);
          expect(got).toBeLessThanOrEqual(exact * (1 + 1 / 1024));
        },
      ),
    );
  });

  it('adding per-worker histograms equals recording everything in one', () => {
    const rng = new Rng(5);
    const parts = [latencyHistogram(), latencyHistogram(), latencyHistogram()];
    const all = latencyHistogram();
    for (let i = 0; i < 30_000; i++) {
      const v = Math.exp(rng.float() * 8) / 10;
      recordMs(parts[i % 3]!, v);
      recordMs(all, v);
    }
    const merged = latencyHistogram();
    for (const p of parts) merged.add(p);
    expect(summarize(merged)).toEqual(summarize(all));
  });

  it('out-of-range inputs: under 1 µs, negative and NaN count as 1 µs; above an hour as an hour; empty is NaN', () => {
    const h = latencyHistogram();
    for (const v of [0, -5, Number.NaN, 0.0004]) recordMs(h, v);
    expect([h.count, h.min, h.max]).toEqual([4, 1, 1]);
    recordMs(h, 1e10);
    expect([h.count, h.exceeds, h.max >= MAX_US]).toEqual([5, 0, true]);
    const empty = summarize(latencyHistogram());
    expect([empty.count, empty.p50, empty.p99, empty.p999, empty.mean, empty.max, empty.cdf]).toEqual([0, NaN, NaN, NaN, NaN, NaN, []]);
  });

  it('the CDF is non-decreasing in both coordinates and ends at (max, 1)', () => {
    const h = latencyHistogram();
    for (let i = 1; i <= 1000; i++) recordMs(h, i / 10);
    const cdf = summarize(h).cdf;
    for (let i = 1; i < cdf.length; i++) {
      expect(cdf[i]![0]).toBeGreaterThanOrEqual(cdf[i - 1]![0]);
      expect(cdf[i]![1]).toBeGreaterThan(cdf[i - 1]![1]);
    }
    expect(cdf.at(-1)).toEqual([summarize(h).max, 1]);
  });
});
