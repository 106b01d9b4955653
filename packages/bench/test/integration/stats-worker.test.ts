/** A latency histogram recorded in a worker thread travels back through postMessage and adds exactly (what the bench's workers rely on). */
import type { RecordableHistogram } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { MAX_US, latencyHistogram, recordMs } from '../../src/stats.js';

describe('latency histograms across threads', () => {
  it('a worker thread’s histogram comes back through postMessage and adds exactly', async () => {
    // What the bench relies on: a RecordableHistogram is one of the native objects postMessage clones.
    const code = `
      const { createHistogram } = require('node:perf_hooks');
      const { parentPort } = require('node:worker_threads');
      const h = createHistogram({ lowest: 1, highest: ${MAX_US}, figures: 3 });
      for (let us = 1; us <= 500; us++) h.record(us);
      parentPort.postMessage({ histogram: h });`;
    const w = new Worker(code, { eval: true });
    const got = await new Promise<RecordableHistogram>((resolve, reject) => {
      w.once('message', (m: { histogram: RecordableHistogram }) => resolve(m.histogram));
      w.once('error', reject);
    });
    const total = latencyHistogram();
    for (let us = 501; us <= 1000; us++) recordMs(total, us / 1000);
    total.add(got);
    await w.terminate();
    expect([total.count, total.min, total.max, total.percentile(50)]).toEqual([1000, 1, 1000, 500]);
  });
});
