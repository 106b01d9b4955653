/**
 * A coarse timing wheel shared by every connection of a proxy: one unref'd
 * interval per wheel instead of one timer per socket, and no re-arming on
 * every chunk — a connection only stamps `wheel.now` (a number read, no
 * call) when it sees activity, and the wheel asks it for its deadline when
 * its bucket comes round (lazy rescheduling, as in Varghese & Lauck's hashed
 * wheel and Linux's TCP keepalive timers).
 *
 * Precision: an entry expires between its deadline and its deadline plus two
 * ticks (activity stamps are up to one tick old; a bucket is visited once a
 * tick). Entries due beyond one revolution wait in their bucket and are
 * re-checked each revolution.
 *
 * Time is injected: a {@link TimerSource} (`timers`) gives the wheel its
 * clock and its tick, so a test drives every timeout by hand; without one
 * the wheel ticks on an unref'd `setInterval` and reads `performance.now`.
 */
import type { TimerSource } from '../core/timers.js';

/** Something the wheel can expire. @internal */
export interface WheelEntry {
  /** Absolute deadline on the wheel's clock (ms), or Infinity when none applies now. */
  deadline(): number;
  /** Called once when `now >= deadline()`; the entry is already removed. */
  expire(now: number): void;
  /** Bucket index the wheel keeps the entry in (-1 when not in the wheel). */
  wheelBucket: number;
}

/** Options of {@link TimeoutWheel}. @internal */
export interface TimeoutWheelOptions {
  /** Bucket width, ms (>= 1). */
  tickMs: number;
  /** Buckets per revolution; default 64. */
  buckets?: number;
  /**
   * The clock and the timers the wheel ticks on (one timer armed at a time,
   * while the wheel holds an entry); default an unref'd `setInterval` over
   * `performance.now`.
   */
  timers?: TimerSource;
  /** Monotonic ms; default the timer source's clock, else `performance.now`. */
  clock?: () => number;
  /** Starts the periodic tick; returns a stop function. Default: on `timers`, else an unref'd setInterval. */
  schedule?: (fn: () => void, everyMs: number) => () => void;
}

function defaultSchedule(fn: () => void, everyMs: number): () => void {
  const t = setInterval(fn, everyMs);
  t.unref();
  return () => clearInterval(t);
}

/** A periodic tick on a timer source: one one-shot timer, re-armed before each tick runs. */
function scheduleOn(timers: TimerSource): (fn: () => void, everyMs: number) => () => void {
  return (fn, everyMs) => {
    let live = true;
    let handle: unknown;
    const run = (): void => {
      if (!live) return;
      handle = timers.setTimeout(run, everyMs);
      fn();
    };
    handle = timers.setTimeout(run, everyMs);
    return () => {
      live = false;
      timers.clearTimeout(handle);
    };
  };
}

/** @internal */
export class TimeoutWheel {
  /** The wheel's clock at its last tick (or add), ms: what entries stamp activity with. */
  now: number;
  readonly tickMs: number;
  private readonly buckets: Set<WheelEntry>[];
  private readonly clock: () => number;
  private readonly schedule: (fn: () => void, everyMs: number) => () => void;
  private stop: (() => void) | undefined;
  private size = 0;
  /** Index of the tick last processed (floor(now / tickMs)). */
  private cursor: number;

  constructor(opts: TimeoutWheelOptions) {
    this.tickMs = Math.max(1, Math.floor(opts.tickMs));
    const timers = opts.timers;
    this.clock = opts.clock ?? (timers === undefined ? () => performance.now() : () => timers.now());
    this.schedule = opts.schedule ?? (timers === undefined ? defaultSchedule : scheduleOn(timers));
    this.buckets = Array.from({ length: opts.buckets ?? 64 }, () => new Set<WheelEntry>());
    this.now = this.clock();
    this.cursor = Math.floor(this.now / this.tickMs);
  }

  /** Entries in the wheel. */
  get count(): number {
    return this.size;
  }

  /** Adds (or re-files) `entry` by its current deadline. */
  add(entry: WheelEntry): void {
    if (this.size === 0 && this.stop === undefined) {
      this.now = this.clock();
      this.cursor = Math.floor(this.now / this.tickMs);
      this.stop = this.schedule(() => this.tick(), this.tickMs);
    }
    this.file(entry, entry.deadline());
  }

  /** Removes `entry` (no-op when absent). */
  remove(entry: WheelEntry): void {
    if (entry.wheelBucket < 0) return;
    this.buckets[entry.wheelBucket]!.delete(entry);
    entry.wheelBucket = -1;
    if (--this.size === 0) this.halt();
  }

  /** Processes every tick up to the clock's now (called by the interval; tests may call it). */
  tick(): void {
    this.now = this.clock();
    const target = Math.floor(this.now / this.tickMs);
    // At most one revolution: older ticks map onto the same buckets.
    const from = Math.max(this.cursor + 1, target - this.buckets.length + 1);
    for (let t = from; t <= target && this.size > 0; t++) {
      this.cursor = t;
      const bucket = this.buckets[t % this.buckets.length]!;
      for (const entry of [...bucket]) {
        const due = entry.deadline();
        if (due <= this.now) {
          this.remove(entry);
          entry.expire(this.now);
        } else {
          bucket.delete(entry);
          this.size--;
          entry.wheelBucket = -1;
          this.file(entry, due);
        }
      }
    }
    this.cursor = Math.max(this.cursor, target);
  }

  private file(entry: WheelEntry, due: number): void {
    if (entry.wheelBucket >= 0) {
      this.buckets[entry.wheelBucket]!.delete(entry);
      this.size--;
    }
    // Never the bucket being processed now: the next visit would be a revolution away.
    const at = Number.isFinite(due) ? Math.max(Math.ceil(due / this.tickMs), this.cursor + 1) : this.cursor + this.buckets.length;
    const index = at % this.buckets.length;
    this.buckets[index]!.add(entry);
    entry.wheelBucket = index;
    this.size++;
  }

  private halt(): void {
    this.stop?.();
    this.stop = undefined;
  }
}
