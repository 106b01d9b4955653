/**
 * bench/thread-scaling: the cost of one acquire + release against the number
 * of threads attached to the table (1, 2, 4, 8, 16, 32).
 *
 *   node dist/bench/thread-scaling.js [--quick] [--baseline PATH/dist/src/runtime.js] [--check]
 *
 * For each thread count T, T − 1 idle worker threads attach a Router (each
 * claims a row of the table and takes one lease, so the row is in use) and
 * one fresh worker thread times acquireHandle + releaseHandle on 8 backends
 * (median of batches), and the Lease form. Idle threads are enough to show a
 * cost that grows with the threads attached: a servers' worth of cores is
 * not needed. Each cell runs in a fresh measuring thread, so one policy's JIT
 * feedback never slows another's.
 *
 * With `--baseline`, the same cells run against that build too, interleaved
 * (baseline, this build, baseline, ...), so a before/after comparison shares
 * one machine state. The target (docs/benchmarks.md): p2c:connections ≤ 100 ns
 * and p2c:latency ≤ 150 ns at every thread count, least-loaded at 32 threads ≤
 * 1.25× its cost at 1, the Lease form within 20 ns of the handle form (at 1
 * thread). With `--check` the process exits non-zero when this build misses
 * one, printing which (bench/lib/targets.ts).
 *
 * Results: bench/results/thread-scaling.json.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { Targets } from './lib/targets.js';

export const THREAD_COUNTS = [1, 2, 4, 8, 16, 32];
export const SCALING_POLICIES = ['round-robin', 'p2c:connections', 'p2c:latency', 'least-loaded', 'p2c'];
const THREAD_FILE = new URL('./thread-scaling-thread.js', import.meta.url);
const HERE = path.dirname(fileURLToPath(import.meta.url));

interface BalancerLike {
  update(members: { id: string; address: string }[]): void;
  attachment(): unknown;
  watchWorker(w: Worker, index: number): void;
  close(): void;
}

/**
 * Waits until this process (every thread) used under 5 % of a core over
 * 200 ms, at most 10 s: 31 freshly started threads keep compiling and
 * collecting for a while after they say 'attached', and a measurement taken
 * then times their start-up, not the table.
 */
async function processQuiet(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const before = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const used = process.cpuUsage(before);
    if (used.user + used.system < 10_000) return;
  }
}

/** One cell: median ns per acquire + release (handle form) and per Lease form. */
async function cell(runtime: string, threads: number, policy: string, quick: boolean): Promise<{ handle: number; lease: number }> {
  const { Balancer, createLogger } = (await import(runtime)) as {
    Balancer: new (o: unknown) => BalancerLike;
    createLogger(o: { level: string }): unknown;
  };
  const b = new Balancer({ logger: createLogger({ level: 'silent' }), capacity: 64 });
  b.update(Array.from({ length: 8 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}` })));
  const base = { runtime, attachment: b.attachment(), policy, batch: quick ? 50_000 : 200_000, samples: quick ? 5 : 9 };
  const idle: Worker[] = [];
  try {
    for (let i = 0; i < threads - 1; i++) {
      const w = new Worker(THREAD_FILE, { workerData: { ...base, mode: 'idle' } });
      b.watchWorker(w, i);
      idle.push(w);
    }
    await Promise.all(idle.map((w) => new Promise((resolve, reject) => (w.once('message', resolve), w.once('error', reject)))));
    await processQuiet();
    const m = new Worker(THREAD_FILE, { workerData: { ...base, mode: 'measure' } });
    const out = await new Promise<{ handle: number; lease: number }>(
      (resolve, reject) => (m.once('message', resolve), m.once('error', reject)),
    );
    await m.terminate();
    return out;
  } finally {
    await Promise.all(idle.map((w) => w.terminate()));
    b.close();
  }
}

export interface ScalingResult {
  /** build label → policy → thread count → { handle, lease } ns */
  [build: string]: Record<string, Record<number, { handle: number; lease: number }>>;
}

/** Runs every cell for each build (interleaved), `rounds` times, keeping each cell's median over rounds. */
export async function scaling(builds: Record<string, string>, quick: boolean, rounds: number): Promise<ScalingResult> {
  const raw: Record<string, Record<string, Record<number, { handle: number[]; lease: number[] }>>> = {};
  for (const label of Object.keys(builds)) raw[label] = {};
  const total = rounds * THREAD_COUNTS.length * SCALING_POLICIES.length * Object.keys(builds).length;
  let done = 0;
  for (let round = 0; round < rounds; round++) {
    for (const threads of THREAD_COUNTS) {
      for (const policy of SCALING_POLICIES) {
        for (const [label, runtime] of Object.entries(builds)) {
          progress(`thread scaling ${++done}/${total}: ${label} ${policy} × ${threads} threads (load ${os.loadavg()[0]!.toFixed(2)})`);
          const r = await cell(runtime, threads, policy, quick);
          raw[label]![policy] ??= {};
          const byPolicy = raw[label]![policy]!;
          byPolicy[threads] ??= { handle: [], lease: [] };
          byPolicy[threads]!.handle.push(r.handle);
          byPolicy[threads]!.lease.push(r.lease);
        }
      }
    }
  }
  progressDone();
  const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const out: ScalingResult = {};
  for (const [label, policies] of Object.entries(raw)) {
    out[label] = {};
    for (const [policy, byThreads] of Object.entries(policies)) {
      out[label]![policy] = {};
      for (const [t, c] of Object.entries(byThreads)) out[label]![policy]![Number(t)] = { handle: med(c.handle), lease: med(c.lease) };
    }
  }
  return out;
}

/** The table: one row per build and policy, ns per acquire + release at each thread count. */
export function scalingRows(result: ScalingResult): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  for (const policy of SCALING_POLICIES) {
    for (const [label, policies] of Object.entries(result)) {
      const c = policies[policy]!;
      const row: Record<string, unknown> = { policy, build: label };
      for (const t of THREAD_COUNTS) row[`${t} thr`] = c[t]!.handle;
      row['32/1'] = c[32]!.handle / c[1]!.handle;
      row['Lease − handle (1 thr)'] = c[1]!.lease - c[1]!.handle;
      rows.push(row);
    }
  }
  return rows;
}

/** The targets (file comment) against one build's cells. */
export function checkScaling(cells: ScalingResult[string], targets: Targets): void {
  const at = (policy: string): Record<number, { handle: number; lease: number }> => cells[policy]!;
  for (const [policy, limit] of [
    ['p2c:connections', 100],
    ['p2c:latency', 150],
  ] as const) {
    for (const t of THREAD_COUNTS) {
      const ns = at(policy)[t]!.handle;
      targets.expect(ns <= limit, `${policy} at ${t} threads: ${ns.toFixed(1)} ns per acquire + release, target ≤ ${limit}`);
    }
  }
  const ll = at('least-loaded');
  targets.expect(
    ll[32]!.handle <= 1.25 * ll[1]!.handle,
    `least-loaded 32 threads ÷ 1: ${(ll[32]!.handle / ll[1]!.handle).toFixed(2)}, target ≤ 1.25`,
  );
  for (const policy of SCALING_POLICIES) {
    const c = at(policy)[1]!;
    targets.expect(c.lease - c.handle <= 20, `${policy} Lease − handle at 1 thread: ${(c.lease - c.handle).toFixed(1)} ns, target ≤ 20`);
  }
}

async function main(): Promise<void> {
  const targets = new Targets();
  const quick = process.argv.includes('--quick');
  const at = process.argv.indexOf('--baseline');
  const builds: Record<string, string> = {};
  if (at > 0) builds['baseline'] = pathToFileURL(path.resolve(process.argv[at + 1]!)).href;
  builds['this build'] = pathToFileURL(path.resolve(HERE, '..', 'src', 'runtime.js')).href;
  const load = os.loadavg();
  const result = await scaling(builds, quick, quick ? 1 : 3);
  console.log(formatTable(scalingRows(result)));
  const file = writeResults('thread-scaling', {
    quick,
    backends: 8,
    threadCounts: THREAD_COUNTS,
    loadavgAtStart: load,
    method:
      'per cell: T − 1 idle attached threads, then a wait until the process uses < 5 % of a core over 200 ms, one fresh measuring thread; median over batches of acquireHandle + releaseHandle (and acquire().release()) pairs; median over rounds; builds interleaved',
    builds: Object.fromEntries(Object.keys(builds).map((k) => [k, k === 'baseline' ? process.argv[at + 1] : 'dist/src/runtime.js'])),
    result,
  });
  console.log(`\nwrote ${file}`);
  checkScaling(result['this build']!, targets);
  targets.finish('bench:thread-scaling');
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) await main();
