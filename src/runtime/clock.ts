/**
 * The shared clock: whole milliseconds, modulo 2^30, the same in every
 * thread, read with one load and no allocation.
 *
 * Why not `performance.now()` or `Date.now()`: docs/internals.md ("The
 * LoadTable map", the shared clock). One process-wide ticker thread (started
 * on first use, `unref`ed so it never keeps the process alive) stores
 * CLOCK_MONOTONIC milliseconds since a shared origin into word 0 of a small
 * SharedArrayBuffer, then sleeps 1 ms with `Atomics.wait`. Every Router
 * reads that word; the buffer travels in the RouterAttachment. Resolution
 * is 1 ms; values wrap at 2^30 ms (12.4 days) so they stay V8 small
 * integers, compared by wrapping difference.
 *
 * The ticker sleeps when nobody reads. The clock word carries two flags
 * above its 30 time bits:
 * - FRESH (bit 30): a reader saw this value. A reader that finds it clear
 *   sets it (one compare-and-swap, once per tick and thread); the ticker's
 *   next store clears it.
 * - ASLEEP (bit 31): the ticker found no read during its last tick and
 *   sleeps on the word with `Atomics.wait` (no timeout). The time bits are
 *   stale then: a reader wakes the ticker with `Atomics.notify`, reads the
 *   monotonic clock itself and stores that time (clearing ASLEEP, setting
 *   FRESH). Notify before store: a reader terminated between the two
 *   leaves the ticker awake, never a fresh-looking word over a sleeping
 *   ticker.
 * So an idle process has no thread waking 1,000 times a second, a busy one
 * pays one plain load per read plus one CAS per millisecond per thread, and
 * every read is exact to the millisecond either way.
 *
 * Never backwards: every store (ticker or reader) is a compare-and-swap
 * that only moves the time forward (by wrapping difference), and a reader
 * returns only a value that is, or was just, in the word.
 *
 * Buffer: word 0 the clock word; word 1 the ticker's 1 ms sleep (never
 * notified); bytes 8..15 a Float64, the origin: CLOCK_MONOTONIC ms at
 * creation, so every thread computes the same time from the same source.
 */
import { Worker } from 'node:worker_threads';
import { TIME_MASK, elapsedMs } from '../core/time.js';
import { spinPause } from '../core/pause.js';

/** A clock in milliseconds. */
export type Clock = () => number;

/** Set by a reader: someone read the word since the ticker stored it. @internal */
export const CLOCK_FRESH = 0x40000000;
/** Set by the ticker: it sleeps until a reader wakes it; the time bits are stale. @internal */
export const CLOCK_ASLEEP = 0x80000000 | 0;
const FLAGS = CLOCK_FRESH | CLOCK_ASLEEP;
const BYTES = 16;

// An ES module in a data: URL, not `eval: true` source: an eval'd worker
// takes the parent's `--input-type`, so CommonJS source (`require`) would
// throw in a process started with `--input-type=module` and the unhandled
// worker 'error' would take the process down.
const TICKER = `
import { workerData } from 'node:worker_threads';
const words = new Int32Array(workerData.buffer);
const origin = new Float64Array(workerData.buffer, 8, 1)[0];
const MASK = ${TIME_MASK};
const FRESH = ${CLOCK_FRESH};
const ASLEEP = ${CLOCK_ASLEEP};
const ms = () => Math.floor(Number(process.hrtime.bigint()) / 1e6 - origin) & MASK;
// Woken by a reader: tick at least once before sleeping again.
let woke = false;
for (;;) {
  const now = ms();
  // Store now (clearing FRESH and ASLEEP) unless a reader stored a later time
  // meanwhile: a CAS that only moves forward, so the clock never goes back.
  let cur = Atomics.load(words, 0);
  let stored = false;
  while (((now - (cur & MASK)) << 2) >> 2 >= 0) {
    const seen = Atomics.compareExchange(words, 0, cur, now);
    if (seen === cur) { stored = true; break; }
    cur = seen;
  }
  // No read since the last store (FRESH clear): sleep until a reader
  // notifies. The CAS fails if a reader marked the word in between, and the
  // wait returns at once if one marked it before the wait began, so a read
  // is never left without a ticker.
  if (!woke && stored && (cur & FRESH) === 0 && Atomics.compareExchange(words, 0, now, now | ASLEEP) === now) {
    Atomics.wait(words, 0, now | ASLEEP);
    woke = true;
    continue;
  }
  woke = false;
  // Sleep one millisecond; word 1 is never notified, the timeout is the tick.
  Atomics.wait(words, 1, 0, 1);
}
`;

let buffer: SharedArrayBuffer | undefined;
let processTicker: ClockTicker = 'thread';

/**
 * Where a clock buffer's ticker runs:
 * - `thread`: its own worker thread (the default). It ticks whatever this
 *   thread does, so it suits a host whose event loop may be blocked; it
 *   costs an isolate and a Node environment (about 9 MB on Node 20, 13 MB
 *   on Node 24).
 * - `loop`: this thread's event loop — one reused, `unref`ed 1 ms timer
 *   while reads come, `Atomics.waitAsync` on the clock word while asleep.
 *   No thread; but the time lags by however long this loop is busy, so only
 *   for an owner that does nothing else (`poise proxy` with worker threads).
 * @internal
 */
export type ClockTicker = 'thread' | 'loop';

/** CLOCK_MONOTONIC milliseconds (fractional), the same source in every thread. */
function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/**
 * A new clock buffer with its ticker started ({@link ClockTicker}). The
 * process has one ({@link processClockBuffer}); tests make their own.
 * @internal
 */
export function startClock(ticker: ClockTicker, startThread: (b: SharedArrayBuffer) => TickerThread = tickerThread): SharedArrayBuffer {
  const b = new SharedArrayBuffer(BYTES);
  // Written before the buffer is shared (the Worker's start is the barrier).
  new Float64Array(b, 8, 1)[0] = monotonicMs();
  if (ticker === 'loop') {
    loopTicker(b);
  } else {
    const t = startThread(b);
    t.unref();
    // A thread needs descriptors of its own (its event loop's), so it may
    // fail to start (ERR_WORKER_INIT_FAILED: EMFILE under a low `ulimit -n`).
    // Unheard, that 'error' would end the process; ignored, it would leave the
    // clock frozen. This thread's loop ticks the buffer instead, and says so.
    t.once('error', (err: Error) => {
      process.emitWarning(`the shared clock's ticker thread failed (${err.message}); the clock ticks on this thread's event loop instead`, {
        type: 'PoiseWarning',
        code: 'POISE_CLOCK_TICKER',
      });
      loopTicker(b);
    });
  }
  return b;
}

/** What {@link startClock} needs of its ticker thread (a `Worker`; tests pass one that fails). @internal */
export interface TickerThread {
  unref(): void;
  once(event: 'error', listener: (err: Error) => void): unknown;
}

/** The ticker thread over `b`: TICKER in a Worker of its own. */
function tickerThread(b: SharedArrayBuffer): TickerThread {
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(TICKER)}`), { workerData: { buffer: b } });
}

/**
 * The ticker thread's loop (TICKER) on this thread's event loop: the same
 * forward-only CAS store and the same sleep protocol, with a reused timer
 * for the 1 ms tick and `Atomics.waitAsync` for the sleep (a pending
 * waitAsync holds no handle, so like the unref'd timer it never keeps the
 * process alive). Nothing is allocated per tick while awake.
 */
function loopTicker(b: SharedArrayBuffer): void {
  const words = new Int32Array(b);
  const origin = new Float64Array(b, 8, 1)[0]!;
  let woke = false;
  const tick = (): void => {
    const now = Math.floor(monotonicMs() - origin) & TIME_MASK;
    // Store now unless a reader stored a later time meanwhile (forward only).
    let cur = Atomics.load(words, 0);
    let stored = false;
    while (elapsedMs(now, cur & TIME_MASK) >= 0) {
      const seen = Atomics.compareExchange(words, 0, cur, now);
      if (seen === cur) {
        stored = true;
        break;
      }
      cur = seen;
    }
    // No read since the last store: sleep until a reader notifies. As in the
    // thread: the CAS fails if a reader marked the word in between, and a
    // waitAsync on a word that already changed resolves at once ('not-equal').
    if (!woke && stored && (cur & CLOCK_FRESH) === 0 && Atomics.compareExchange(words, 0, now, now | CLOCK_ASLEEP) === now) {
      woke = true;
      const w = Atomics.waitAsync(words, 0, now | CLOCK_ASLEEP);
      if (w.async) void w.value.then(tick);
      else timer.refresh();
      return;
    }
    woke = false;
    timer.refresh();
  };
  // One Timeout object for the ticker's life: refresh() re-arms it without allocating.
  const timer = setTimeout(tick, 1);
  timer.unref();
}

/**
 * Where the process clock's ticker runs ({@link ClockTicker}); call before
 * anything reads the process clock (a Balancer's construction does). Returns
 * false, changing nothing, once the process clock exists.
 * @internal
 */
export function useProcessClockTicker(ticker: ClockTicker): boolean {
  if (buffer !== undefined) return false;
  processTicker = ticker;
  return true;
}

/**
 * The process clock's shared buffer, starting its ticker on first use
 * (owner thread; a thread unless {@link useProcessClockTicker} said
 * otherwise). Pass it to other threads; read it with {@link clockReader}.
 * @internal
 */
export function processClockBuffer(): SharedArrayBuffer {
  if (buffer === undefined) buffer = startClock(processTicker);
  return buffer;
}

/**
 * The read side of one clock buffer in one thread. `now()` is one plain
 * load when the word is FRESH (the common case under load); otherwise
 * {@link ClockWords.slow}.
 * @internal
 */
export class ClockWords {
  private readonly words: Int32Array;
  /** `performance.now() + offset` = ms since the buffer's origin (this thread's performance origin differs). */
  private readonly offset: number;

  constructor(clock: SharedArrayBuffer) {
    this.words = new Int32Array(clock);
    this.offset = sourceOffset(clock);
  }

  /** Shared-clock ms modulo 2^30. */
  now(): number {
    // A plain load: a stale or torn-free old value only sends us to slow(),
    // which re-reads with Atomics.
    const v = this.words[0]!;
    return (v & FLAGS) === CLOCK_FRESH ? v & TIME_MASK : this.slow();
  }

  /** Marks the word FRESH, or — the ticker asleep — stores the time read directly and wakes it. */
  private slow(): number {
    const w = this.words;
    for (;;) {
      const v = Atomics.load(w, 0);
      if ((v & CLOCK_ASLEEP) !== 0) {
        // The ticker sleeps and the time bits are stale: read the source.
        const direct = Math.floor(performance.now() + this.offset) & TIME_MASK;
        const t = elapsedMs(direct, v & TIME_MASK) > 0 ? direct : v & TIME_MASK;
        // Wake first, then store: a thread terminated between the two leaves
        // the ticker awake (it stores on its own), never a word that looks
        // fresh with the ticker asleep behind it (a frozen clock). The store
        // happens only if nobody changed the word meanwhile; else retry.
        Atomics.notify(w, 0, 1);
        if (Atomics.compareExchange(w, 0, v, t | CLOCK_FRESH) === v) return t;
        spinPause();
        continue;
      }
      if ((v & CLOCK_FRESH) !== 0) return v & TIME_MASK;
      // First read since the ticker's store: mark it, so the ticker stays awake.
      if (Atomics.compareExchange(w, 0, v, v | CLOCK_FRESH) === v) return v & TIME_MASK;
      spinPause();
    }
  }
}

/** `performance.now() + offset` = ms since `clock`'s origin, in this thread (whose performance origin is its own). */
function sourceOffset(clock: SharedArrayBuffer): number {
  const origin = clock.byteLength >= BYTES ? new Float64Array(clock, 8, 1)[0]! : 0;
  return monotonicMs() - performance.now() - origin;
}

/**
 * A clock on the time line of the clock buffer `clock` that reads the
 * source itself (`performance.now()`: about 50 ns, nothing allocated) and
 * never touches the buffer's word, so its reads keep no ticker awake. For a
 * thread that reads the time per connection or per request rather than per
 * pick — `poise proxy`'s routers: at a few thousand connections a second a
 * direct read costs a few hundred nanoseconds per connection, where the
 * ticker kept awake by those reads wakes its thread 1,000 times a second
 * (measured: ~3 µs of the main thread's CPU per short connection, Node 24,
 * two proxy workers). Exact to the millisecond; values agree with
 * {@link clockReader}'s over the same buffer (whose ticker lags the source
 * by less than its 1 ms tick) and never go backwards.
 * @internal
 */
export function directClock(clock: SharedArrayBuffer): Clock {
  const offset = sourceOffset(clock);
  return () => Math.floor(performance.now() + offset) & TIME_MASK;
}

/**
 * A clock reading a shared clock buffer: one load, a small integer.
 *
 * @example
 * const now = clockReader(processClockBuffer());
 * const t = now(); // ms (mod 2^30), comparable across threads
 * @internal
 */
export function clockReader(clock: SharedArrayBuffer): Clock {
  const words = new ClockWords(clock);
  return () => words.now();
}

/** The process clock (starts the ticker on first use). @internal */
export function sharedClock(): Clock {
  return clockReader(processClockBuffer());
}
