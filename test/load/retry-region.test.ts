/**
 * The retry budget region: one budget over shared words (two views of one
 * buffer are two threads' views), buckets that expire whole, counts that
 * saturate, the floor divided among a fleet's processes.
 */
import { describe, expect, it } from 'vitest';
import { RETRY_WORDS } from '../../src/load/layout.js';
import { RetryRegion } from '../../src/load/retry-region.js';

/** Two views of one shared region, configured by the first. */
function shared(config = { bucketMs: 100, ratioPpm: 200_000, floor: 0 }): [RetryRegion, RetryRegion] {
  const words = new Int32Array(new SharedArrayBuffer(RETRY_WORDS * 4 + 64));
  const a = new RetryRegion(words, 16);
  const b = new RetryRegion(words, 16);
  a.configure(config);
  return [a, b];
}

describe('RetryRegion', () => {
  it('two views draw on one budget: what one grants, the other cannot', () => {
    const [a, b] = shared();
    for (let i = 0; i < 10; i++) (i % 2 === 0 ? a : b).onRequest(1000);
    // 20 % of 10 requests: 2 retries in all, whichever view asks.
    expect([a.tryRetry(1000), b.tryRetry(1000), a.tryRetry(1000), b.tryRetry(1000)]).toEqual([true, true, false, false]);
    expect(b.totals()).toEqual({ requests: 10, allowed: 2, refused: 2 });
    expect(a.window(1000)).toEqual({ requests: 10, retries: 2 });
  });

  it('a bucket counts for ten buckets, then expires whole; its words start again at the next add', () => {
    const [a] = shared({ bucketMs: 100, ratioPpm: 1_000_000, floor: 0 });
    for (let i = 0; i < 5; i++) a.onRequest(1050);
    expect(a.window(1999)).toEqual({ requests: 5, retries: 0 });
    // Bucket 10 is out of the window at bucket 20 (buckets 11..20); the ring entry is shared with bucket 20.
    expect(a.window(2000)).toEqual({ requests: 0, retries: 0 });
    a.onRequest(2000);
    expect(a.window(2000)).toEqual({ requests: 1, retries: 0 });
    expect(a.available(2000)).toBe(1);
  });

  it('a bucket count saturates at 2^20 − 1 instead of spilling into its tag', () => {
    const [a] = shared({ bucketMs: 1000, ratioPpm: 0, floor: 0 });
    for (let i = 0; i < 2 ** 20 + 5; i++) a.onRequest(0);
    expect(a.window(0).requests).toBe(2 ** 20 - 1);
    expect(a.totals().requests).toBe(2 ** 20 + 5);
  });

  it('the floor is divided among the processes sharing it (whole thousandths of a retry)', () => {
    const [a] = shared({ bucketMs: 100, ratioPpm: 0, floor: 10 });
    expect(a.available(0)).toBe(10);
    a.shareFloor(4);
    // 10 / 4 = 2.5 retries: two whole ones.
    expect(a.available(0)).toBe(2);
    expect([a.tryRetry(0), a.tryRetry(0), a.tryRetry(0)]).toEqual([true, true, false]);
    expect(a.config()).toEqual({ bucketMs: 100, ratioPpm: 0, floor: 10, processes: 4 });
    a.shareFloor(1);
    expect(a.available(0)).toBe(8);
  });

  it('without a budget every retry is allowed and counted', () => {
    const words = new Int32Array(RETRY_WORDS);
    const r = new RetryRegion(words);
    expect(r.enabled).toBe(false);
    r.onRequest(0);
    expect([r.tryRetry(0), r.tryRetry(0)]).toEqual([true, true]);
    expect(r.totals()).toEqual({ requests: 1, allowed: 2, refused: 0 });
    expect(r.available(0)).toBe(Number.POSITIVE_INFINITY);
  });
});
