/**
 * The admission region: what lets the admission gates of several threads
 * serve their waiters as one queue per band, oldest first, and wake each
 * other when capacity frees — without adding anything but one plain load to
 * a release when nobody waits.
 *
 * Words (layout.ts):
 * - `waiters` (header): how many gates have waiters now. A hint: a gate adds
 *   one when its queues go from empty to not, subtracts one when they empty.
 *   Every release reads it with a plain load; only when it is not 0 does the
 *   release bump `generation` and notify.
 * - `generation` (header): bumped by such a release, and by a gate that
 *   admitted and leaves capacity for others; every gate with waiters waits on
 *   it with `Atomics.waitAsync` (with its poll interval as the timeout, the
 *   fallback for a wake-up that a dead thread's hint, below, could miss).
 * - `tickets[b]` (header, one per band index b, most important first): the
 *   next ticket of band b. Every waiter of every gate takes one.
 * - per row, `oldest[b]`: the ticket of that row's oldest waiter in band b,
 *   with bit 30 set (0 = none), and `counted`: whether the row's gate counts
 *   in `waiters`. Written only by the row's gate.
 *
 * The rule the gates follow: a waiter is admitted only when no row has a
 * waiter of a more important band, and no row has an older one of its own
 * band — so across threads the queue is FIFO per band, and bands are served
 * most important first, as they are inside one gate.
 *
 * A thread that dies leaves its row's words; the owner clears them when it
 * reclaims the row (`reclaimRow`), and takes its `counted` back out of
 * `waiters`. A worker terminated between its row's `counted` and the shared
 * `waiters` can leave the hint one off: one too many costs releases a
 * needless notify until a gate next empties; one too few makes wake-ups
 * fall back to the gates' poll interval. Neither changes who is admitted.
 */
import { A_GENERATION, A_ROW_COUNTED, A_ROW_OLDEST, A_TICKETS, A_WAITERS, ADMISSION_BANDS, H_ROWS, type Layout } from './layout.js';

/** Bit 30 marks a stored ticket (so ticket 0 is not "none"); tickets are 30-bit and wrap. */
const PRESENT = 1 << 30;
const TICKET_MASK = PRESENT - 1;

/** True when 30-bit ticket `a` was issued before `b` (wrapping comparison). */
export function ticketBefore(a: number, b: number): boolean {
  return ((a - b) << 2) >> 2 < 0;
}

/** The admission words of one table. */
export class AdmissionRegion {
  /** Band indices the region tracks across threads (a gate with more bands serves the rest per thread). */
  static readonly BANDS = ADMISSION_BANDS;
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  // --- the release path ------------------------------------------------------------

  /**
   * A lease came back: wakes the gates that wait, if any. One plain load
   * when nobody waits (the hint is a count of gates, read stale at worst by
   * a few nanoseconds: a gate that starts waiting just then still polls).
   */
  released(): void {
    if (this.i32[A_WAITERS] !== 0) this.wake();
  }

  /** Bumps the generation and wakes every gate waiting on it. */
  wake(): void {
    // add then notify: a gate that read the old generation and is about to
    // wait sees the new value (waitAsync compares atomically) or is notified.
    Atomics.add(this.i32, A_GENERATION, 1);
    Atomics.notify(this.i32, A_GENERATION);
  }

  /** The generation a gate waits on. */
  generation(): number {
    return Atomics.load(this.i32, A_GENERATION);
  }

  /** `Atomics.waitAsync` on the generation: resolves when it moves from `seen` or after `timeoutMs`. */
  waitForRelease(seen: number, timeoutMs: number): Promise<unknown> {
    const r = (
      Atomics as unknown as {
        waitAsync(a: Int32Array, i: number, v: number, t: number): { async: boolean; value: Promise<unknown> | string };
      }
    ).waitAsync(this.i32, A_GENERATION, seen, timeoutMs);
    return r.async ? (r.value as Promise<unknown>) : Promise.resolve(r.value);
  }

  // --- a gate's row ----------------------------------------------------------------

  /** Takes the next ticket of band index `band`. */
  takeTicket(band: number): number {
    // add: every gate of every thread draws from one counter; wraps harmlessly (30-bit comparisons).
    return Atomics.add(this.i32, A_TICKETS + band, 1) & TICKET_MASK;
  }

  /** Publishes row `row`'s oldest waiter of band `band` (`ticket`), or none (`undefined`). */
  setOldest(row: number, band: number, ticket: number | undefined): void {
    // Single writer (the row's gate); SC so another gate's scan sees it in order with the generation.
    Atomics.store(this.i32, this.oldestAt(row, band), ticket === undefined ? 0 : (ticket & TICKET_MASK) | PRESENT);
  }

  /** Counts row `row`'s gate in the waiters hint (`true`) or out (`false`), once each way. */
  setCounted(row: number, counted: boolean): void {
    const p = this.layout.admissionRow(row) + A_ROW_COUNTED;
    const was = Atomics.load(this.i32, p) !== 0;
    if (was === counted) return;
    Atomics.store(this.i32, p, counted ? 1 : 0);
    Atomics.add(this.i32, A_WAITERS, counted ? 1 : -1);
  }

  /**
   * May row `row` admit its oldest waiter of band `band` (ticket `ticket`)?
   * Not while any row holds a waiter of a more important band, nor an older
   * one of this band. O(rows × bands), read only while something waits.
   */
  mayAdmit(row: number, band: number, ticket: number): boolean {
    const i = this.i32;
    const rows = Atomics.load(i, H_ROWS);
    for (let r = 0; r < rows; r++) {
      if (r === row) continue;
      const base = this.layout.admissionRow(r) + A_ROW_OLDEST;
      for (let b = 0; b < band; b++) if (Atomics.load(i, base + b) !== 0) return false;
      const t = Atomics.load(i, base + band);
      if (t !== 0 && ticketBefore(t & TICKET_MASK, ticket)) return false;
    }
    return true;
  }

  /**
   * May a new arrival of band `band` in row `row` skip the queue? Only when
   * no row waits in this band or a more important one (the hint first: one
   * plain load when nobody waits anywhere).
   */
  nobodyWaitsFor(row: number, band: number): boolean {
    const i = this.i32;
    if (i[A_WAITERS] === 0) return true;
    const rows = Atomics.load(i, H_ROWS);
    for (let r = 0; r < rows; r++) {
      if (r === row) continue;
      const base = this.layout.admissionRow(r) + A_ROW_OLDEST;
      for (let b = 0; b <= band; b++) if (Atomics.load(i, base + b) !== 0) return false;
    }
    return true;
  }

  /** Owner, reclaiming a dead thread's row: forgets its waiters and takes it out of the hint. */
  reclaimRow(row: number): void {
    const base = this.layout.admissionRow(row);
    for (let b = 0; b < ADMISSION_BANDS; b++) Atomics.store(this.i32, base + A_ROW_OLDEST + b, 0);
    // exchange: the row's flag read and cleared in one step (the row has no writer now).
    if (Atomics.exchange(this.i32, base + A_ROW_COUNTED, 0) !== 0) Atomics.sub(this.i32, A_WAITERS, 1);
    // Its waiters are gone: wake the others, whose turn it may now be.
    if (Atomics.load(this.i32, A_WAITERS) !== 0) this.wake();
  }

  private oldestAt(row: number, band: number): number {
    return this.layout.admissionRow(row) + A_ROW_OLDEST + band;
  }
}
