/**
 * bench/workers: the shared LoadTable under real worker threads.
 *
 *   node dist/bench/workers.js [--quick] [--check]
 *
 * 1. One thread (tinybench, 1,000 ops per timed iteration so the harness's
 *    ~100 ns per call is amortised): acquireHandle + releaseHandle per
 *    policy, against a same-run baseline — the same P2C loop on a plain local
 *    Int32Array, no sharing, no Atomics. The ratio is the cost of sharing.
 * 2. 1, 2 and 4 workers per policy: each worker times its own `ops` pairs
 *    after a barrier; throughput = Σ ops / slowest worker's time.
 * 3. Padded vs unaligned slots: two workers each hammering its own adjacent
 *    slot with the table operations of an acquire + release (counters in the
 *    slot's first half, PeakEWMA and failure reads in its second: unaligned,
 *    worker 0's second half shares a line with worker 1's counters — the
 *    false-sharing probe), and two p2c workers over 8 backends (true sharing
 *    dominates there).
 * 4. Reclamation: a worker holding 100 leases is terminated; time from
 *    `terminate()` to the owner's 'reclaim' with every counter exact.
 * 5. Heap bytes per acquire+release after warm-up, per policy, each in a
 *    fresh worker thread (process.memoryUsage().heapUsed median chunk
 *    deltas; see bench/lib/harness.ts): the handle form and the Lease form.
 *
 * Targets (`--check` exits non-zero when one is missed, printing which):
 * p2c:connections 2 workers ÷ 1 ≥ 1.6 with 8 backends (printed beside the
 * same ratio at 64 backends, where two threads rarely meet on a slot), and
 * reclamation (terminate() → exact counters) ≤ 100 ms at the median.
 *
 * Results: bench/results/workers.json.
 */
import { Worker } from 'node:worker_threads';
import { Bench } from 'tinybench';
import { Rng } from '../src/core/rng.js';
import { createLogger } from '../src/log.js';
import { Balancer, type ReclaimEvent } from '../src/runtime/balancer.js';
import { KEYED_POLICY_NAMES, POLICY_NAMES, type PolicyName } from '../src/runtime/policies.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { Targets } from './lib/targets.js';

const quick = process.argv.includes('--quick');
const logger = createLogger({ level: 'silent' });
const BACKENDS = 8;
const OPS_PER_ITER = 1000;
const WORKER_OPS = quick ? 100_000 : 1_000_000;
const THREADS = [1, 2, 4];
const WORKER_FILE = new URL('./workers-thread.js', import.meta.url);
const KEYS = Array.from({ length: 256 }, (_, i) => ({ key: `user-${i}` }));

function members(n: number): { id: string; address: string }[] {
  return Array.from({ length: n }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}` }));
}

function balancer(layout: 'padded' | 'unaligned' = 'padded', backends = BACKENDS): Balancer {
  const b = new Balancer({ logger, capacity: 64, layout });
  b.update(members(backends));
  return b;
}

async function timeIteration(name: string, iteration: () => void): Promise<number> {
  for (let i = 0; i < 20; i++) iteration();
  const bench = new Bench({ time: quick ? 100 : 500, iterations: quick ? 5 : 20 });
  bench.add(name, iteration);
  await bench.run();
  const result = bench.tasks[0]!.result;
  if (result.state !== 'completed') throw new Error(`${name}: ${result.state}`);
  return (result.latency.mean * 1e6) / OPS_PER_ITER;
}

/** The baseline: the same P2C acquire/release shape on a plain, unshared Int32Array. */
function baselineIteration(): () => void {
  const counts = new Int32Array(BACKENDS);
  const rng = new Rng();
  let sink = 0;
  return () => {
    for (let i = 0; i < OPS_PER_ITER; i++) {
      const a = rng.below(BACKENDS);
      let b = rng.below(BACKENDS - 1);
      if (b >= a) b++;
      const la = counts[a]!;
      const lb = counts[b]!;
      const pick = la < lb ? a : lb < la ? b : rng.coin() ? a : b;
      counts[pick]!++;
      sink ^= pick;
      counts[pick]!--;
    }
    if (sink === -1) console.log(sink);
  };
}

function routerIteration(policy: PolicyName, b: Balancer): () => void {
  const r = b.router({ policy });
  const keyed = KEYED_POLICY_NAMES.includes(policy);
  let sink = 0;
  return () => {
    for (let i = 0; i < OPS_PER_ITER; i++) {
      const h = keyed ? r.acquireHandle(KEYS[i & 255]) : r.acquireHandle();
      sink ^= h;
      r.releaseHandle(h, 'success', 1 + (i & 7));
    }
    if (sink === -1) console.log(sink);
  };
}

interface WorkerResult {
  ns: number;
  ops: number;
}

async function runWorkers(
  b: Balancer,
  n: number,
  data: (i: number) => Record<string, unknown>,
): Promise<{ nsPerOp: number; mopsPerSec: number }> {
  const barrier = new SharedArrayBuffer(8);
  const ctl = new Int32Array(barrier);
  const ws: Worker[] = [];
  const results: Promise<WorkerResult>[] = [];
  for (let i = 0; i < n; i++) {
    const w = new Worker(WORKER_FILE, {
      workerData: { attachment: b.attachment(), ops: WORKER_OPS, barrier, hold: 0, slot: 0, policy: 'p2c', mode: 'router', ...data(i) },
    });
    b.watchWorker(w, i);
    ws.push(w);
    results.push(
      new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }),
    );
  }
  // Wait (Atomics.waitAsync keeps this thread's event loop running for the workers' start-up).
  for (;;) {
    const ready = Atomics.load(ctl, 0);
    if (ready >= n) break;
    await (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number): { value: Promise<string> | string } }).waitAsync(
      ctl,
      0,
      ready,
    ).value;
  }
  Atomics.store(ctl, 1, 1);
  Atomics.notify(ctl, 1);
  const rs = await Promise.all(results);
  await Promise.all(ws.map((w) => w.terminate()));
  const slowest = Math.max(...rs.map((r) => r.ns));
  const total = rs.reduce((s, r) => s + r.ops, 0);
  return { nsPerOp: rs.reduce((s, r) => s + r.ns / r.ops, 0) / rs.length, mopsPerSec: (total / slowest) * 1e3 };
}

async function reclamation(trials: number): Promise<{ msToExact: number[]; ownerMs: number[] }> {
  const msToExact: number[] = [];
  const ownerMs: number[] = [];
  for (let k = 0; k < trials; k++) {
    const b = balancer();
    const w = new Worker(WORKER_FILE, {
      workerData: {
        attachment: b.attachment(),
        mode: 'spin',
        hold: 100,
        ops: 0,
        slot: 0,
        policy: 'p2c',
        barrier: new SharedArrayBuffer(8),
      },
    });
    b.watchWorker(w, 0);
    await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    const reclaimed = new Promise<ReclaimEvent>((resolve) => b.once('reclaim', resolve));
    const t0 = performance.now();
    void w.terminate();
    const event = await reclaimed;
    const t1 = performance.now();
    for (let s = 0; s < BACKENDS; s++) {
      const st = b.table.stats(s);
      if (st.connections !== 0 || st.requests !== 0) throw new Error(`reclamation left slot ${s} at ${st.connections}/${st.requests}`);
    }
    if (event.leases < 100) throw new Error(`reclaimed only ${event.leases} leases`);
    msToExact.push(t1 - t0);
    ownerMs.push(event.ms);
  }
  return { msToExact, ownerMs };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

async function main(): Promise<void> {
  const targets = new Targets();
  const rows: Record<string, unknown>[] = [];
  const json: Record<string, unknown> = { quick, backends: BACKENDS, workerOps: WORKER_OPS };

  // 1. One thread.
  progress('one thread: baseline');
  const baseNs = await timeIteration('baseline', baselineIteration());
  const single: Record<string, { ns: number; ratio: number }> = {};
  for (const policy of POLICY_NAMES) {
    progress(`one thread: ${policy}`);
    const ns = await timeIteration(policy, routerIteration(policy, balancer()));
    single[policy] = { ns, ratio: ns / baseNs };
  }
  json['oneThread'] = { baselineNsPerOp: baseNs, policies: single, time: 'tinybench mean iteration / 1000 ops' };

  // 2. Workers.
  const scaling: Record<string, Record<number, { nsPerOp: number; mopsPerSec: number }>> = {};
  for (const policy of POLICY_NAMES) {
    scaling[policy] = {};
    for (const n of THREADS) {
      progress(`workers: ${policy} × ${n}`);
      scaling[policy]![n] = await runWorkers(balancer(), n, () => ({ policy }));
    }
    const s = scaling[policy]!;
    rows.push({
      policy,
      'ns/op 1 thread': single[policy]!.ns,
      'vs baseline': single[policy]!.ratio,
      'Mops/s 1w': s[1]!.mopsPerSec,
      'Mops/s 2w': s[2]!.mopsPerSec,
      'Mops/s 4w': s[4]!.mopsPerSec,
      '2w/1w': s[2]!.mopsPerSec / s[1]!.mopsPerSec,
    });
  }
  json['workers'] = scaling;
  // p2c:connections at 64 backends: the same loop where two threads rarely lease one slot at once.
  progress('workers: p2c:connections × 1, 2 at 64 backends');
  const wide = {
    1: await runWorkers(balancer('padded', 64), 1, () => ({ policy: 'p2c:connections' })),
    2: await runWorkers(balancer('padded', 64), 2, () => ({ policy: 'p2c:connections' })),
  };
  json['p2cConnections64Backends'] = wide;
  const ratio8 = scaling['p2c:connections']![2]!.mopsPerSec / scaling['p2c:connections']![1]!.mopsPerSec;
  const ratio64 = wide[2].mopsPerSec / wide[1].mopsPerSec;
  targets.expect(
    ratio8 >= 1.6,
    `p2c:connections 2 workers ÷ 1, 8 backends: ${ratio8.toFixed(2)}, target ≥ 1.6 (64 backends: ${ratio64.toFixed(2)})`,
  );

  // 3. Padding.
  progress('padding: adjacent slots');
  const padded = await runWorkers(balancer('padded'), 2, (i) => ({ mode: 'slot', slot: i }));
  const unaligned = await runWorkers(balancer('unaligned'), 2, (i) => ({ mode: 'slot', slot: i }));
  progress('padding: p2c over 8 backends');
  const paddedP2c = await runWorkers(balancer('padded'), 2, () => ({ policy: 'p2c' }));
  const unalignedP2c = await runWorkers(balancer('unaligned'), 2, () => ({ policy: 'p2c' }));
  json['padding'] = {
    adjacentSlots: { padded, unaligned, unalignedOverPaddedNs: unaligned.nsPerOp / padded.nsPerOp },
    p2c: { padded: paddedP2c, unaligned: unalignedP2c, unalignedOverPaddedNs: unalignedP2c.nsPerOp / paddedP2c.nsPerOp },
  };

  // 4. Reclamation.
  progress('reclamation');
  const rec = await reclamation(quick ? 3 : 9);
  json['reclamation'] = { ...rec, medianMsToExact: median(rec.msToExact), maxMsToExact: Math.max(...rec.msToExact), targetMs: 100 };
  targets.expect(
    median(rec.msToExact) <= 100,
    `reclamation, terminate() → exact counters: median ${median(rec.msToExact).toFixed(1)} ms, target ≤ 100`,
  );

  // 5. Allocation, one fresh worker per policy (isolated JIT feedback, as in an application with one policy).
  const heap: Record<string, { handle: number; lease: number }> = {};
  for (const policy of POLICY_NAMES) {
    progress(`allocation: ${policy}`);
    const b = balancer();
    const w = new Worker(WORKER_FILE, {
      workerData: {
        attachment: b.attachment(),
        mode: 'heap',
        policy,
        chunks: quick ? 11 : 41,
        ops: 0,
        hold: 0,
        slot: 0,
        barrier: new SharedArrayBuffer(8),
      },
    });
    heap[policy] = await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await w.terminate();
  }
  json['heapBytesPerOp'] = {
    policies: heap,
    method:
      'process.memoryUsage().heapUsed, median of 10,000-op chunk deltas minus an empty op, after 50,000 warm-up ops, in a fresh worker per policy (bench/lib/harness.ts)',
  };
  for (const row of rows) {
    const h = heap[row['policy'] as string]!;
    row['heap B/op handle'] = h.handle;
    row['heap B/op Lease'] = h.lease;
  }
  progressDone();

  console.log(formatTable(rows));
  console.log();
  console.log(
    formatTable([
      {
        probe: 'adjacent slots, 2 workers',
        'padded ns/op': padded.nsPerOp,
        'unaligned ns/op': unaligned.nsPerOp,
        'unaligned/padded': unaligned.nsPerOp / padded.nsPerOp,
      },
      {
        probe: 'p2c, 8 backends, 2 workers',
        'padded ns/op': paddedP2c.nsPerOp,
        'unaligned ns/op': unalignedP2c.nsPerOp,
        'unaligned/padded': unalignedP2c.nsPerOp / paddedP2c.nsPerOp,
      },
    ]),
  );
  console.log();
  console.log(
    formatTable([
      { measure: 'baseline ns/op (plain local Int32Array)', value: baseNs },
      { measure: 'p2c:connections 2w/1w, 8 backends', value: ratio8 },
      { measure: 'p2c:connections 2w/1w, 64 backends', value: ratio64 },
      { measure: 'reclamation ms, terminate() → exact counters (median)', value: median(rec.msToExact) },
      { measure: 'reclamation ms (max)', value: Math.max(...rec.msToExact) },
    ]),
  );
  const file = writeResults('workers', json);
  console.log(`\nwrote ${file}`);
  targets.finish('bench:workers');
}

await main();
