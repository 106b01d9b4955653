// Outlier detection over routers in several worker threads: every worker
// adds to the same interval counters, the owner judges the sum.
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';

const FIXTURE = new URL('../fixtures/outcome-worker.mjs', import.meta.url);
const workers: Worker[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.terminate()));
});

function round(w: Worker, n: number, failing: string[]): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
    w.postMessage({ n, failing });
  });
}

describe('outlier detection across worker threads', () => {
  it("counts every worker's outcomes exactly once and ejects the 30 % failer for all of them", async () => {
    // The shared process clock (the workers' clock too); the timer's interval is a day, so only the sweep below runs.
    const b = new Balancer({
      capacity: 16,
      maxThreads: 8,
      logger: createLogger({ level: 'silent' }),
      // 20 % of six hosts is one host (the default 10 % is less than one).
      health: { outlier: { intervalMs: 86_400_000, baseEjectionTimeMs: 600_000, maxEjectionPercent: 20 } },
    });
    const ids = ['b0', 'b1', 'b2', 'b3', 'b4', 'b5'];
    b.update(ids.map((id, i) => ({ id, address: `127.0.0.1:${20000 + i}` })));
    for (let i = 0; i < 4; i++) {
      const w = new Worker(FIXTURE, { workerData: { attachment: b.attachment() } });
      b.watchWorker(w, i);
      workers.push(w);
    }
    // Four workers in parallel, 600 leases each: round-robin gives every backend 100 per worker.
    const per = await Promise.all(workers.map((w) => round(w, 600, ['b5'])));
    for (const p of per) expect(p).toEqual(Object.fromEntries(ids.map((id) => [id, 100])));
    // The interval words hold the sum over the threads: 400 requests, 120 failed on b5.
    const slotOfB5 = 5;
    expect(b.table.stats(slotOfB5)).toMatchObject({ intervalSuccesses: 280, intervalFailures: 120 });
    expect(b.table.stats(0)).toMatchObject({ intervalSuccesses: 400, intervalFailures: 0 });
    expect(b.sweepOutliers()).toEqual(['b5']);
    expect(b.table.stats(slotOfB5)).toMatchObject({ intervalSuccesses: 0, intervalFailures: 0 });
    // Every worker's router sees the ejection at its next pick.
    const after = await Promise.all(workers.map((w) => round(w, 500, [])));
    for (const p of after) expect(p['b5']).toBeUndefined();
    b.close();
  });
});
