import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { HttpCounters, LATENCY_BUCKETS_SECONDS, outcomeCode } from '../../../src/http/counters.js';
import { thrown } from '../../helpers/thrown.js';
import { until } from '../../helpers/until.js';

const bucketOf = (ms: number): number => {
  const k = LATENCY_BUCKETS_SECONDS.findIndex((s) => ms / 1000 <= s);
  return k < 0 ? LATENCY_BUCKETS_SECONDS.length : k;
};

describe('HttpCounters', () => {
  it('counts outcomes, retries and latencies per (slot, generation), exactly', () => {
    const c = HttpCounters.create({ capacity: 4 });
    c.record(2, 7, outcomeCode('success'), 0.4);
    c.record(2, 7, outcomeCode('success'), 3);
    c.record(2, 7, outcomeCode('failure'), 30);
    c.record(2, 7, outcomeCode('cancelled'), -1);
    c.record(2, 7, outcomeCode('overload'), 20_000);
    c.retry(2, 7, false);
    c.retry(2, 7, true);
    c.retry(2, 7, true);
    const f = c.figures(2, 7);
    expect(f.outcomes).toEqual([2, 1, 1, 1]);
    expect([f.retries, f.retriesRefused]).toEqual([1, 2]);
    expect(f.latencySumSeconds).toBeCloseTo((400 + 3000 + 30_000 + 20_000_000) / 1e6, 9);
    const expected = new Array<number>(LATENCY_BUCKETS_SECONDS.length + 1).fill(0);
    for (const ms of [0.4, 3, 30, 20_000]) expected[bucketOf(ms)]!++;
    expect(f.buckets).toEqual(expected);
    // Another slot, or another generation of this one, has nothing.
    expect(c.figures(1, 7).outcomes).toEqual([0, 0, 0, 0]);
    expect(c.figures(2, 8).outcomes).toEqual([0, 0, 0, 0]);
  });

  it("a slot's next generation starts from zero: its first write takes the old backend's counts out", () => {
    const c = HttpCounters.create({ capacity: 1 });
    for (let i = 0; i < 5; i++) c.record(0, 1, 0, 2);
    c.retry(0, 1, false);
    expect(c.figures(0, 1).outcomes[0]).toBe(5);
    // Before its first write the new generation reads zero; the old one still reads its counts.
    expect(c.figures(0, 2).outcomes[0]).toBe(0);
    c.record(0, 2, 1, 7);
    expect(c.figures(0, 2)).toMatchObject({ outcomes: [0, 1, 0, 0], retries: 0, latencySumSeconds: 0.007 });
    expect(c.figures(0, 2).buckets.reduce((a, b) => a + b, 0)).toBe(1);
    expect(c.figures(0, 1).outcomes).toEqual([0, 0, 0, 0]);
  });

  it('carries across 2^32 in the 64-bit pairs (the latency sum in µs), and a reset borrows back', () => {
    const c = HttpCounters.create({ capacity: 1 });
    // Each observation adds at most 2^32 − 1 µs; three of them carry twice.
    const big = 4_000_000_000 / 1000; // ms
    for (let i = 0; i < 3; i++) c.record(0, 1, 0, big);
    expect(c.figures(0, 1).latencySumSeconds).toBe(12_000);
    c.record(0, 2, 0, 1);
    expect(c.figures(0, 2).latencySumSeconds).toBe(0.001);
  });

  it('writers of a new generation racing in two threads lose nothing and keep nothing of the old (400 slots × 2 threads)', async () => {
    const slots = 400;
    const m = 25;
    const c = HttpCounters.create({ capacity: slots });
    for (let s = 0; s < slots; s++) for (let i = 0; i < 3 + (s % 5); i++) c.record(s, 1, 1, 40);
    const go = new SharedArrayBuffer(4 * (2 + slots));
    const flag = new Int32Array(go);
    const workers = [0, 1].map(
      () =>
        new Worker(new URL('../../fixtures/http-counters-writer.mjs', import.meta.url), {
          workerData: { buffer: c.buffer, go, slots, writers: 2, generation: 2, m, latencyMs: 3 },
        }),
    );
    const done = workers.map((w) => new Promise((resolve, reject) => w.once('message', resolve).once('error', reject)));
    // Both ready (at their wait), then released together.
    await until(() => Atomics.load(flag, 1) === 2, 'both writers ready');
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
    await Promise.all(done);
    await Promise.all(workers.map((w) => w.terminate()));
    for (let s = 0; s < slots; s++) {
      const f = c.figures(s, 2);
      expect({ s, outcomes: f.outcomes, retries: f.retries, sum: Math.round(f.latencySumSeconds * 1e6) }).toEqual({
        s,
        outcomes: [2 * m, 0, 0, 0],
        retries: 2 * m,
        sum: 2 * m * 3000,
      });
      expect(f.buckets[bucketOf(3)]).toBe(2 * m);
    }
  });

  it('refuses a bad capacity or a foreign buffer', () => {
    expect(thrown(() => HttpCounters.create({ capacity: 0 })).message).toBe(
      'options.capacity: must be an integer in [1, 1048576] (balancer.table.capacity), got 0',
    );
    expect(thrown(() => HttpCounters.attach(new SharedArrayBuffer(64))).message).toBe(
      'buffer: is not an HttpCounters buffer of this poise-lb version',
    );
  });
});
