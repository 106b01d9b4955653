// The per-slot latency histogram behind the adaptive hedge delay: bucket
// bounds, quantiles against exact ones, the decay every HALVE_AT samples,
// the reset for a new occupant, and that neighbouring slots and words stay
// untouched.
import { describe, expect, it } from 'vitest';
import { BASE_US, HALVE_AT, LATENCY_BUCKETS, bucketOf } from '../../src/load/latency-histogram.js';
import { LoadTable } from '../../src/load/load-table.js';
import { SLOT_WORDS } from '../../src/load/layout.js';

describe('latency histogram', () => {
  it('buckets: k holds latencies up to 128 µs · 2^k, the last everything above', () => {
    expect([0, 1, BASE_US, BASE_US + 1, 2 * BASE_US, 2 * BASE_US + 1, 1_000_000, 1e12].map(bucketOf)).toEqual([
      0,
      0,
      0,
      1,
      1,
      2,
      13,
      LATENCY_BUCKETS - 1,
    ]);
  });

  it('a quantile is within its bucket of the exact one, and never reported below minSamples', () => {
    const t = LoadTable.create({ capacity: 3, maxThreads: 2 });
    const h = t.latencies;
    expect(h.quantileMs(1, 0.95, 1)).toBe(-1);
    // 1000 samples, log-uniform from 0.2 ms to 200 ms.
    const samples = Array.from({ length: 1000 }, (_, i) => 0.2 * 1000 ** (i / 999));
    for (const ms of samples) h.record(1, ms);
    expect(h.quantileMs(1, 0.95, 1001)).toBe(-1);
    for (const q of [0.5, 0.9, 0.95, 0.99]) {
      const exact = samples[Math.ceil(q * 1000) - 1]!;
      const got = h.quantileMs(1, q, 20);
      // Same power-of-two bucket: within a factor 2 either way.
      expect({ q, ratio: got / exact > 0.5 && got / exact < 2 }).toEqual({ q, ratio: true });
    }
    // Its neighbours saw nothing.
    expect(h.quantileMs(0, 0.5, 1)).toBe(-1);
    expect(h.quantileMs(2, 0.5, 1)).toBe(-1);
  });

  it('every HALVE_AT-th sample halves every count (so old samples fade); the reset empties the slot', () => {
    const t = LoadTable.create({ capacity: 2, maxThreads: 2 });
    const h = t.latencies;
    // Three samples of 10 s (the last bucket, beside the sample count) and HALVE_AT − 4 of 1 ms: no decay yet.
    for (let i = 0; i < 3; i++) h.record(0, 10_000);
    for (let i = 0; i < HALVE_AT - 4; i++) h.record(0, 1);
    const k = bucketOf(1000);
    expect(h.count(0, k)).toBe(HALVE_AT - 4);
    expect(h.count(0, LATENCY_BUCKETS - 1)).toBe(3);
    h.record(0, 50);
    expect(h.count(0, k)).toBe((HALVE_AT - 4) >> 1);
    expect(h.count(0, LATENCY_BUCKETS - 1)).toBe(1);
    expect(h.count(0, bucketOf(50_000))).toBe(0);
    // Then 1024 samples of 50 ms: the old ones are a third of the weight, the p50 moved to 50 ms.
    for (let i = 0; i < HALVE_AT; i++) h.record(0, 50);
    expect(h.count(0, k)).toBe((HALVE_AT - 4) >> 2);
    expect(h.quantileMs(0, 0.5, 1)).toBeGreaterThan(32);
    // The words beyond the histogram's (the next slot's tag) are untouched.
    expect(t.words[t.layout.slot(0) + SLOT_WORDS]).toBe(t.tag(1));
    t.resetHealth(0, 0);
    expect(h.quantileMs(0, 0.5, 1)).toBe(-1);
  });
});
