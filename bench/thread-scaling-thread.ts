/**
 * One thread of bench/thread-scaling.ts, over the runtime module named in
 * workerData (so one run can compare two builds):
 * - `idle`: attach a Router (claiming a row), take and return one lease so
 *   the row counts as in use, then wait until terminated;
 * - `measure`: attach a Router with `policy`, warm up, then time `samples`
 *   batches of `batch` acquireHandle + releaseHandle pairs, and the same
 *   with the Lease form (acquire().release()); report the median ns per pair.
 */
import { parentPort, workerData } from 'node:worker_threads';

interface Data {
  runtime: string;
  attachment: unknown;
  mode: 'idle' | 'measure';
  policy: string;
  batch: number;
  samples: number;
}

interface RouterLike {
  acquireHandle(opts?: { key?: string }): number;
  releaseHandle(h: number, outcome: 'success', latencyMs?: number): boolean;
  acquire(opts?: { key?: string }): { release(outcome: 'success', opts?: { latencyMs?: number }): void };
}

const d = workerData as Data;
const { Router } = (await import(d.runtime)) as { Router: { attach(a: unknown, o: unknown): RouterLike } };
const { createLogger } = (await import(d.runtime)) as { createLogger(o: { level: string }): unknown };
const logger = createLogger({ level: 'silent' });
const r = Router.attach(d.attachment, { policy: d.policy, logger });

if (d.mode === 'idle') {
  r.releaseHandle(r.acquireHandle(), 'success', 1);
  parentPort!.postMessage('attached');
} else {
  const handleLoop = (n: number): number => {
    let sink = 0;
    for (let i = 0; i < n; i++) {
      const h = r.acquireHandle();
      sink ^= h;
      r.releaseHandle(h, 'success', 1 + (i & 7));
    }
    return sink;
  };
  const leaseLoop = (n: number): number => {
    for (let i = 0; i < n; i++) r.acquire().release('success', { latencyMs: 1 + (i & 7) });
    return n;
  };
  const time = (loop: (n: number) => number): number => {
    loop(d.batch * 2);
    const ns: number[] = [];
    for (let s = 0; s < d.samples; s++) {
      const t0 = process.hrtime.bigint();
      loop(d.batch);
      ns.push(Number(process.hrtime.bigint() - t0) / d.batch);
    }
    ns.sort((a, b) => a - b);
    return ns[ns.length >> 1]!;
  };
  const handle = time(handleLoop);
  const lease = time(leaseLoop);
  parentPort!.postMessage({ handle, lease });
}
