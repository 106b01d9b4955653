/**
 * The task each pool worker runs for one policy: a closed loop of C
 * concurrent requests. Each request is `acquire()` on this worker's own
 * Router → one line-protocol request to the leased backend (over a
 * persistent connection per loop and backend, or a fresh connection) →
 * `lease.release(outcome, { latencyMs })`. Latencies go into this worker's
 * own histogram (stats.ts), which travels back in the result for the main
 * thread to merge.
 *
 * The control words (a SharedArrayBuffer shared with the main thread):
 * `PHASE` (warm-up → measure → stop), `READY` (workers whose loops are
 * running) and one completed-request counter per worker for progress.
 */
import type { RecordableHistogram } from 'node:perf_hooks';
import { workerRouter, type Lease, type Outcome } from 'poise-lb/runtime';
import { Rng } from './kit.js';
import type { ConnectionMode } from './flags.js';
import { LineConnection } from './protocol.js';
import { latencyHistogram, recordMs } from './stats.js';

/** Control word indices. */
export const PHASE = 0;
export const READY = 1;
/** First per-worker progress counter; worker i uses COUNTERS + i. */
export const COUNTERS = 2;
/** PHASE values. */
export const WARMUP = 0;
export const MEASURE = 1;
export const STOP = 2;

/** What the main thread sends. */
export interface WorkerTask {
  index: number;
  control: SharedArrayBuffer;
  concurrency: number;
  connection: ConnectionMode;
  keyed: boolean;
  seed: number | null;
}

/** What a worker sends back. */
export interface WorkerResult {
  index: number;
  /** Request latencies in the measured window, µs (a Histogram survives postMessage: stats.ts). */
  histogram: RecordableHistogram;
  /** [backend id, requests, errors] in the measured window. */
  perBackend: Array<[string, number, number]>;
  requests: number;
  errors: number;
  acquireErrors: number;
}

interface Tally {
  requests: number;
  errors: number;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Runs the closed loop until the main thread sets PHASE to STOP. */
export default async function runWorker(task: WorkerTask): Promise<WorkerResult> {
  const router = workerRouter();
  const control = new Int32Array(task.control);
  const keys = task.seed === null ? new Rng() : new Rng(BigInt(task.seed) * 65_537n + BigInt(task.index) + 1n);
  const histogram = latencyHistogram();
  const tallies = new Map<string, Tally>();
  let requests = 0;
  let errors = 0;
  let acquireErrors = 0;
  const connectionKind = router.policyName === 'p2c:connections' || router.policyName === 'p2c:connectionTime';

  /** Per loop: the connect time (ms) of the connection the current request opened, or -1 when it reused one. */
  interface LoopState {
    pool: Map<string, LineConnection>;
    connectMs: number;
  }

  async function connect(lease: Lease, st: LoopState): Promise<LineConnection> {
    const t0 = performance.now();
    const conn = await LineConnection.open(lease.host, lease.port);
    st.connectMs = performance.now() - t0;
    return conn;
  }

  async function send(lease: Lease, st: LoopState): Promise<boolean> {
    st.connectMs = -1;
    if (task.connection === 'per-request') {
      const conn = await connect(lease, st);
      try {
        return await conn.request();
      } finally {
        conn.close();
      }
    }
    let conn = st.pool.get(lease.address);
    if (conn === undefined || !conn.usable) {
      conn = await connect(lease, st);
      st.pool.set(lease.address, conn);
    }
    return conn.request();
  }

  async function loop(): Promise<void> {
    const st: LoopState = { pool: new Map(), connectMs: -1 };
    // Atomics.load: the main thread's PHASE store must be seen promptly; a plain
    // read of shared memory has no such guarantee.
    while (Atomics.load(control, PHASE) !== STOP) {
      const start = performance.now();
      let lease: Lease;
      try {
        lease = router.acquire(task.keyed ? { key: keys.nextU32() } : undefined);
      } catch {
        if (Atomics.load(control, PHASE) === MEASURE) {
          acquireErrors++;
          errors++;
        }
        await pause(1); // nothing eligible right now: do not spin
        continue;
      }
      let outcome: Outcome = 'success';
      try {
        if (!(await send(lease, st))) outcome = 'failure';
      } catch {
        outcome = 'failure';
      }
      const connected = st.connectMs;
      const latencyMs = performance.now() - start;
      // A request lease's sample is the request latency; a connection lease's
      // (p2c:connections, p2c:connectionTime) is the connect time, when this
      // request had to open a connection.
      if (connectionKind) lease.release(outcome, connected >= 0 ? { connectMs: connected, latencyMs: connected } : undefined);
      else lease.release(outcome, connected >= 0 ? { latencyMs, connectMs: connected } : { latencyMs });
      if (Atomics.load(control, PHASE) !== MEASURE) continue;
      recordMs(histogram, latencyMs);
      requests++;
      let t = tallies.get(lease.id);
      if (t === undefined) {
        t = { requests: 0, errors: 0 };
        tallies.set(lease.id, t);
      }
      t.requests++;
      if (outcome !== 'success') {
        t.errors++;
        errors++;
      }
      // Atomics.add: the main thread reads this counter for progress while we
      // write it; an atomic increment is the only safe read-modify-write.
      Atomics.add(control, COUNTERS + task.index, 1);
    }
    for (const conn of st.pool.values()) conn.close();
  }

  // Atomics.add + notify: the main thread waits (Atomics.waitAsync) until every
  // worker's loops are running before it starts the warm-up clock.
  Atomics.add(control, READY, 1);
  Atomics.notify(control, READY);
  await Promise.all(Array.from({ length: task.concurrency }, () => loop()));
  return {
    index: task.index,
    histogram,
    perBackend: [...tallies].map(([id, t]) => [id, t.requests, t.errors]),
    requests,
    errors,
    acquireErrors,
  };
}
