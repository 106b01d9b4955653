/**
 * The retry budget lives in the shared table: worker threads racing for
 * retries draw on one budget exactly (dist/, real worker threads).
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Balancer } from '../../dist/src/runtime/balancer.js';

const WORKER = new URL('../fixtures/retry-budget-worker.mjs', import.meta.url);

describe('retry budget across worker threads', () => {
  it('4 threads × 2,000 requests, each followed by every retry granted: exactly ratio × 8,000 retries in all, never one more', async () => {
    // A one-hour window: nothing expires during the test, so the allowance is ratio × all requests.
    const balancer = new Balancer({ capacity: 4, retryBudget: { ratio: 0.25, minRetriesPerSecond: 0, ttlMs: 3_600_000 } });
    balancer.update([{ id: 'a', address: '127.0.0.1:7000' }]);
    const threads = 4;
    const n = 2000;
    try {
      const workers = Array.from({ length: threads }, () => new Worker(WORKER, { workerData: { attachment: balancer.attachment() } }));
      await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))));
      const results = await Promise.all(
        workers.map(
          (w) =>
            new Promise<{ granted: number }>((resolve, reject) => {
              w.once('message', resolve);
              w.once('error', reject);
              w.postMessage({ n });
            }),
        ),
      );
      await Promise.all(workers.map((w) => w.terminate()));
      // The thread that finished last asked after every request of every thread was counted, until refused:
      // the window's whole allowance was spent, and a retry granted twice would show as one too many.
      const granted = results.reduce((s, r) => s + r.granted, 0);
      expect(granted).toBe(0.25 * threads * n);
      const stats = balancer.retryBudgetStats();
      expect(stats).toMatchObject({ requests: threads * n, allowed: granted, available: 0 });
      // Each request's loop ended with exactly one refusal.
      expect(stats.refused).toBe(threads * n);
    } finally {
      balancer.close();
    }
  });
});
