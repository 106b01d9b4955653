/**
 * A paused clock for tests (tower's `time::pause()` / `advance()`): time
 * moves only when the test advances it, and due timers run in deadline
 * order (then in the order they were set), each seeing `now()` at its own
 * deadline. A TimerSource for the components that take one.
 */
import type { TimerSource } from '../../src/core/timers.js';

interface Entry {
  at: number;
  seq: number;
  fn: () => void;
  live: boolean;
}

export class ManualTimers implements TimerSource {
  private t: number;
  private seq = 0;
  private entries: Entry[] = [];

  constructor(start = 0) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const e: Entry = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, live: true };
    this.entries.push(e);
    return e;
  }

  clearTimeout(handle: unknown): void {
    if (handle !== undefined && handle !== null) (handle as Entry).live = false;
  }

  /** Timers set and not yet run or cleared. */
  get pending(): number {
    return this.entries.filter((e) => e.live).length;
  }

  /**
   * Moves the clock forward by `ms`, running every timer that falls due on
   * the way (including timers those set, if they fall due within `ms`), and
   * after each one the microtasks it queued (so promise chains settle).
   */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      const due = this.entries.filter((e) => e.live && e.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      due.live = false;
      this.t = due.at;
      due.fn();
      await flushMicrotasks();
    }
    this.entries = this.entries.filter((e) => e.live);
    this.t = end;
    await flushMicrotasks();
  }
}

/** Lets queued microtasks (and the promise chains they start) run. */
export async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}
