/** ConnectionLimit over real worker threads terminated at random moments (test/fixtures/limit-churn.mjs, on dist/). */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConnectionLimit } from '../../../src/proxy/connection-limit.js';

describe('ConnectionLimit across real threads terminated at random moments', () => {
  it('200 terminations of threads looping take/give: after each reclaim the count is exactly what the living threads hold', async () => {
    // Two churning threads over one limit of 4 (so takes also fail at the limit). Each round terminates
    // one at a random moment and reclaims its row while the other still churns, then the other likewise:
    // the count must come back to exactly 0. The old reclaim (row word changed after the shared count,
    // with no mark) left the count one high in 134 of 300 such terminations.
    const rows = 2;
    const owner = new ConnectionLimit(4, undefined, 0, rows);
    const words = new Int32Array(owner.buffer);
    const start = async (row: number): Promise<Worker> => {
      const w = new Worker(new URL('../../fixtures/limit-churn.mjs', import.meta.url), {
        workerData: { max: 4, buffer: owner.buffer, row },
      });
      await new Promise<void>((resolve, reject) => {
        w.once('message', () => resolve());
        w.once('error', reject);
      });
      return w;
    };
    const stop = async (w: Worker, row: number): Promise<boolean> => {
      await new Promise((r) => setTimeout(r, Math.random() * 3));
      const exited = new Promise((r) => w.once('exit', r));
      await w.terminate();
      await exited;
      const marked = (Atomics.load(words, 16 + row) & (1 << 30)) !== 0;
      owner.reclaim(row);
      expect(owner.held(row)).toBe(0);
      return marked;
    };
    let threads: Worker[] = [];
    let marked = 0;
    try {
      // 100 rounds, and on until a termination has landed in the window (the witness below): quiet, 4 to 10 of
      // 200 terminations do on Node 20 and 24; a loaded CI run saw 0 of 200 once (Node 24), so up to 400 rounds.
      for (let k = 0; k < 100 || (marked === 0 && k < 400); k++) {
        threads = await Promise.all([start(0), start(1)]);
        const first = k % rows;
        if (await stop(threads[first]!, first)) marked++;
        if (await stop(threads[1 - first]!, 1 - first)) marked++;
        expect(owner.count, `round ${k}`).toBe(0);
      }
    } finally {
      await Promise.all(threads.map((w) => w.terminate()));
    }
    // The window is real: some terminations landed in it (the mark was seen), and each was settled exactly.
    expect(marked).toBeGreaterThan(0);
  }, 300_000);
});
