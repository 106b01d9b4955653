// Exact counters under worker termination at random moments.
// A worker loops acquire/release; the test terminates it at a random moment,
// waits for the owner's reclaim, and requires every shared counter to be back
// exactly at its value before the worker started. Workers run the compiled
// build (test/fixtures/*.mjs import dist/), so `npm run build` must have run.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../dist/src/core/rng.js';
import { LeaseKind } from '../../dist/src/load/leases.js';
import type { ReclaimEvent } from '../../dist/src/runtime/balancer.js';
import { Balancer, createLogger, createWorkerPool } from '../../dist/src/runtime.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });
const LOOP = new URL('../fixtures/worker-terminate.mjs', import.meta.url);
const rng = new Rng();
const workerErrors: string[] = [];

function members(ids: readonly string[]): { id: string; address: string }[] {
  return ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` }));
}

/** Every slot's (connections, requests), to compare before and after. */
function counters(b: Balancer): string {
  const out: string[] = [];
  for (let s = 0; s < b.table.capacity; s++) {
    const st = b.table.stats(s);
    out.push(`${s}:${st.connections}/${st.requests}`);
  }
  // The pool-wide totals (per-row sums) must come back exactly too.
  out.push(`total:${b.table.totalLeases(LeaseKind.Connection)}/${b.table.totalLeases(LeaseKind.Request)}/${b.table.totalOutstanding()}`);
  return out.join(' ');
}

function nextReclaim(b: Balancer, threadId?: number): Promise<ReclaimEvent> {
  return new Promise((resolve) => {
    const on = (e: ReclaimEvent): void => {
      if (threadId !== undefined && e.threadId !== threadId) return;
      b.off('reclaim', on);
      resolve(e);
    };
    b.on('reclaim', on);
  });
}

/** Resolves once flag[0] is 1 (the worker's signal that it is running); fails at the deadline. */
function whenSet(flag: Int32Array): Promise<void> {
  return until(() => Atomics.load(flag, 0) === 1, 'the worker to signal that it runs');
}

/** A random delay of 0 to ~2 ms: a spin of a random number of microtask-free ticks. */
async function randomMoment(): Promise<void> {
  const spins = rng.below(40);
  for (let k = 0; k < spins; k++) await new Promise((r) => setImmediate(r));
}

/** Starts a looping worker, terminates it at a random moment, waits for its reclaim. */
async function killOnce(b: Balancer, path: 'lease' | 'handle', policy: string, during?: () => Promise<void>): Promise<void> {
  const flag = new Int32Array(new SharedArrayBuffer(4));
  const w = new Worker(LOOP, { workerData: { attachment: b.attachment(), path, policy, flag: flag.buffer, warmup: rng.below(3000) } });
  const tid = w.threadId;
  // A worker that fails on its own (an acquire refused mid-churn, say) is a defect, not a termination.
  w.on('error', (err) => workerErrors.push(String(err)));
  b.watchWorker(w);
  const reclaimed = nextReclaim(b, tid);
  await whenSet(flag);
  if (during !== undefined) await during();
  else await randomMoment();
  await w.terminate();
  await reclaimed;
  expect(b.table.rowOf(tid)).toBe(-1);
}

function ownerLeases(b: Balancer): () => void {
  // The owner holds leases of its own, so "back to before" is not just "zero".
  const r = b.router({ policy: 'round-robin' });
  const held = [r.acquire(), r.acquire({ kind: 'connection' }), r.acquire(), r.acquire({ kind: 'connection' }), r.acquire()];
  return () => {
    for (const l of held) l.release('cancelled');
  };
}

describe('worker termination at random moments leaves every counter exact', () => {
  for (const path of ['lease', 'handle'] as const) {
    it(`200 terminations on the ${path} path: counters back to exactly their value before each worker started`, async () => {
      const b = new Balancer({ logger, capacity: 8 });
      b.update(members(['a', 'b', 'c', 'd']));
      const release = ownerLeases(b);
      const policies = ['p2c', 'p2c:connections', 'p2c:latency', 'least-loaded', 'round-robin'];
      const inexact: string[] = [];
      for (let run = 0; run < 200; run++) {
        const before = counters(b);
        await killOnce(b, path, policies[run % policies.length]!);
        const after = counters(b);
        if (after !== before) inexact.push(`run ${run}: ${before} -> ${after}`);
      }
      expect(inexact).toEqual([]);
      expect(workerErrors).toEqual([]);
      release();
      expect(counters(b)).toBe(counters(new Balancer({ logger, capacity: 8 })));
    }, 240_000);
  }

  it('150 aborted pool tasks (createWorkerPool + run({ signal }) + abort): counters exact after each', async () => {
    const b = new Balancer({ logger, capacity: 8 });
    b.update(members(['a', 'b', 'c', 'd']));
    const release = ownerLeases(b);
    const pool = createWorkerPool({
      balancer: b,
      filename: new URL('../fixtures/pool-spin-task.mjs', import.meta.url),
      threads: 2,
      policy: 'p2c',
    });
    const inexact: string[] = [];
    try {
      for (let run = 0; run < 150; run++) {
        const before = counters(b);
        const started = new Int32Array(new SharedArrayBuffer(4));
        const abort = new AbortController();
        const reclaimed = nextReclaim(b);
        const done = pool.run({ started: started.buffer }, { signal: abort.signal }).catch((e: Error) => e);
        await whenSet(started);
        await randomMoment();
        abort.abort();
        const outcome = await done;
        expect(outcome).toBeInstanceOf(Error);
        await reclaimed;
        const after = counters(b);
        if (after !== before) inexact.push(`run ${run}: ${before} -> ${after}`);
      }
    } finally {
      await pool.close();
    }
    expect(inexact).toEqual([]);
    release();
  }, 240_000);

  it('a replacement worker terminated before it reported ready is reclaimed too: its row is freed (piscina announces workers only once ready)', async () => {
    const b = new Balancer({ logger, capacity: 8 });
    b.update(members(['a', 'b']));
    const gate = new Int32Array(new SharedArrayBuffer(8));
    const pool = createWorkerPool({
      balancer: b,
      filename: new URL('../fixtures/pool-slow-import-task.mjs', import.meta.url),
      threads: 1,
      policy: 'p2c',
      workerData: { gate: gate.buffer },
    });
    const first = pool.piscina.threads[0]!.threadId;
    const started = new Int32Array(new SharedArrayBuffer(4));
    const abort = new AbortController();
    const done = pool.run({ started: started.buffer }, { signal: abort.signal }).catch((e: Error) => e);
    await whenSet(started);
    const reclaimedFirst = nextReclaim(b, first);
    abort.abort();
    expect(await done).toBeInstanceOf(Error);
    await reclaimedFirst;
    // The replacement has attached its Router (claimed a row) and is blocked
    // importing the task module: it never reports ready.
    const next = pool.piscina.threads[0]!;
    const tid = next.threadId;
    expect(tid).not.toBe(first);
    const importing = new Int32Array(gate.buffer, 0, 1);
    await until(() => Atomics.load(importing, 0) === 2, 'the replacement to block importing the task module');
    expect(b.table.rowOf(tid)).toBeGreaterThanOrEqual(0);
    const exited = new Promise<void>((r) => next.once('exit', () => r()));
    await pool.close();
    await exited;
    expect(b.table.rowOf(tid)).toBe(-1);
    expect(b.reclaimStats().events).toBe(2);
    expect(counters(b)).toBe(counters(new Balancer({ logger, capacity: 8 })));
  }, 60_000);

  it('1,000 membership changes with slot reuse while workers are terminated: exact counters and every tombstone freed', async () => {
    // capacity 6 for 4 live backends: every change removes one id and adds a
    // new one, so the new one must reuse a drained tombstone's slot.
    const CAP = 6;
    const b = new Balancer({ logger, capacity: CAP });
    let live = ['m0', 'm1', 'm2', 'm3'];
    let nextId = 4;
    b.update(members(live));
    let changes = 0;
    let refused = 0;
    const churn = async (): Promise<void> => {
      for (let k = 0; k < 10; k++) {
        const drop = rng.below(live.length);
        const candidate = live.map((id, i) => (i === drop ? `m${nextId}` : id));
        try {
          b.update(members(candidate));
          live = candidate;
          nextId++;
          changes++;
        } catch (err) {
          // Every tombstone still held by a lease of the running worker: a clear refusal, nothing changed.
          expect(err).toMatchObject({ code: 'CapacityExhausted' });
          refused++;
        }
        await new Promise((r) => setImmediate(r));
      }
    };
    const paths = ['lease', 'handle'] as const;
    for (let run = 0; changes < 1000; run++) {
      await killOnce(b, paths[run % 2]!, run % 3 === 0 ? 'p2c:connections' : 'p2c', churn);
      expect(run).toBeLessThan(400);
    }
    // No worker left: every counter is zero ...
    expect(counters(b)).toBe(counters(new Balancer({ logger, capacity: CAP })));
    // ... and every tombstone is free: after removing the live ones too, a
    // membership of CAP brand-new ids needs every slot.
    b.update([]);
    const fresh = Array.from({ length: CAP }, (_, i) => `fresh${i}`);
    expect(() => b.update(members(fresh))).not.toThrow();
    for (let s = 0; s < CAP; s++) expect(b.table.stats(s).state).toBe(1);
    expect(changes).toBeGreaterThanOrEqual(1000);
    expect(refused).toBeLessThan(changes);
    expect(workerErrors).toEqual([]);
  }, 300_000);
});
