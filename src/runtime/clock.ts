/**
 * The shared clock: whole milliseconds, modulo 2^30, the same in every
 * thread, read with one `Atomics.load` and no allocation.
 *
 * Why not `performance.now()` or `Date.now()`: docs/internals.md ("The
 * LoadTable map", the shared clock). One process-wide ticker thread (started on first use, `unref`ed so it
 * never keeps the process alive) stores `process.hrtime` milliseconds —
 * CLOCK_MONOTONIC, one clock for the whole process — into a 2-word
 * SharedArrayBuffer, then sleeps 1 ms with `Atomics.wait`. Every Router reads
 * that word; the buffer travels in the RouterAttachment. Resolution is 1 ms
 * (the LoadTable stores times in ms anyway); a starved ticker makes the clock
 * lag, never go backwards. Values wrap at 2^30 ms (12.4 days) so they stay V8
 * small integers; the LoadTable compares them by wrapping difference.
 */
import { Worker } from 'node:worker_threads';
import { TIME_MASK } from '../core/time.js';

/** A clock in milliseconds. */
export type Clock = () => number;

// An ES module in a data: URL, not `eval: true` source: an eval'd worker
// takes the parent's `--input-type`, so CommonJS source (`require`) would
// throw in a process started with `--input-type=module` and the unhandled
// worker 'error' would take the process down.
const TICKER = `
import { workerData } from 'node:worker_threads';
const words = new Int32Array(workerData.buffer);
const t0 = process.hrtime.bigint();
for (;;) {
  // A single store per tick: readers see the old or the new time, never a mix.
  Atomics.store(words, 0, Number((process.hrtime.bigint() - t0) / 1000000n) & ${TIME_MASK});
  // Sleep one millisecond; word 1 is never notified, the timeout is the tick.
  Atomics.wait(words, 1, 0, 1);
}
`;

let buffer: SharedArrayBuffer | undefined;

/**
 * The process clock's shared buffer, starting the ticker thread on first use
 * (owner thread). Pass it to other threads; read it with {@link clockReader}.
 * @internal
 */
export function processClockBuffer(): SharedArrayBuffer {
  if (buffer === undefined) {
    const b = new SharedArrayBuffer(8);
    const ticker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(TICKER)}`), { workerData: { buffer: b } });
    ticker.unref();
    buffer = b;
  }
  return buffer;
}

/**
 * A clock reading a shared clock buffer: one `Atomics.load`, a small integer.
 *
 * @example
 * const now = clockReader(processClockBuffer());
 * const t = now(); // ms (mod 2^30), comparable across threads
 * @internal
 */
export function clockReader(clock: SharedArrayBuffer): Clock {
  const words = new Int32Array(clock);
  // The ticker's single store per tick; a load sees one whole value.
  return () => Atomics.load(words, 0);
}

/** The process clock (starts the ticker on first use). @internal */
export function sharedClock(): Clock {
  return clockReader(processClockBuffer());
}
