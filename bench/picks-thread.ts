/**
 * One cell of bench/picks.ts's policy-level comparison, in a fresh thread
 * (so one build's or policy's JIT feedback never shapes another's): the
 * public `PowerOfTwo` or `Random` of the build named in workerData, over
 * `Backend` objects with equal weights whose `load()` reads an Int32Array —
 * or the inline two-choice baseline (two `Rng.below(slice.length)` draws,
 * two reads, the lighter index). Reports the fastest batch's ns per pick over `samples`
 * short batches (~1 ms each): the least disturbed by other processes on a
 * shared machine, where a median of long batches times the scheduler.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Rng } from '../src/core/rng.js';

interface Data {
  /** The build's public entry (dist/src/index.js). */
  entry: string;
  subject: 'PowerOfTwo' | 'Random' | 'inline';
  n: number;
  batch: number;
  samples: number;
  /** Wall time of the warm-up. */
  warmupMs: number;
}

interface PolicyLike {
  pick(slice: readonly unknown[]): number;
}
interface Entry {
  Backend: new (id: string, o: { load: () => number }) => unknown;
  PowerOfTwo: new () => PolicyLike;
  Random: new () => PolicyLike;
}

const d = workerData as Data;
const { Backend, PowerOfTwo, Random } = (await import(d.entry)) as Entry;
const n = d.n;
const loads = new Int32Array(n);
const fill = new Rng(n);
for (let i = 0; i < n; i++) loads[i] = fill.below(16);
const slice = Array.from({ length: n }, (_, i) => new Backend(`backend-${i}`, { load: () => loads[i]! }));

/** One pick; each subject its own function literal, so every call site stays monomorphic. */
function op(): () => number {
  if (d.subject === 'PowerOfTwo') {
    const p = new PowerOfTwo();
    return () => p.pick(slice);
  }
  if (d.subject === 'Random') {
    const p = new Random();
    return () => p.pick(slice);
  }
  const rng = new Rng();
  return () => {
    // The slice's length read per pick, as a policy does (a captured constant would fold `%` away).
    const m = slice.length;
    const a = rng.below(m);
    const b = rng.below(m);
    return loads[a]! <= loads[b]! ? a : b;
  };
}

const pick = op();
let sink = 0;
const loop = (count: number): void => {
  for (let k = 0; k < count; k++) sink = (sink + pick()) & 0x3fffffff;
};
// Warm up for a stretch of wall time, not a count: on a loaded machine the optimizing compiler's
// background thread may not have run yet after a fixed count, and the cell would time the interpreter.
const warmUntil = Date.now() + d.warmupMs;
do loop(d.batch >> 2);
while (Date.now() < warmUntil);
const ns: number[] = [];
for (let s = 0; s < d.samples; s++) {
  const t0 = process.hrtime.bigint();
  loop(d.batch);
  ns.push(Number(process.hrtime.bigint() - t0) / d.batch);
}
ns.sort((a, b) => a - b);
parentPort!.postMessage({ ns: ns[0]!, sink });
