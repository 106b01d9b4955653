/** ProxyCounters across real threads: each worker counts into its own row; every row and the totals read back exactly. */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ProxyCounter, ProxyCounters } from '../../src/proxy/counters.js';

describe('ProxyCounters in worker threads', () => {
  it('four worker threads counting into their own rows: every row and the totals are exact (20 runs)', async () => {
    for (let run = 0; run < 20; run++) {
      const c = ProxyCounters.create({ workers: 4 });
      const n = 2000;
      await Promise.all(
        [0, 1, 2, 3].map(
          (worker) =>
            new Promise((resolve, reject) => {
              const w = new Worker(new URL('../fixtures/proxy-counters-worker.mjs', import.meta.url), {
                workerData: { buffer: c.buffer, worker, n, chunk: 0xfffffff0, ms: 2 + worker },
              });
              w.once('message', resolve);
              w.once('error', reject);
            }),
        ),
      );
      for (let w = 0; w < 4; w++) {
        expect(c.value(w, ProxyCounter.Accepted)).toBe(n);
        expect(c.value(w, ProxyCounter.BytesIn)).toBe(n * 0xfffffff0);
        expect(c.value(w, ProxyCounter.IdleTimeouts)).toBe(n / 2);
        expect(c.active(w)).toBe(0);
      }
      expect(c.total(ProxyCounter.Accepted)).toBe(4 * n);
      // 2..5 ms all fall in the (1 ms, 5 ms] bucket.
      expect(c.durationBuckets()[1]).toBe(4 * n);
    }
  });
});
