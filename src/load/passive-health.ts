/**
 * Passive-health words per slot: consecutive failures and ejections (any
 * router writes them when it releases a lease), the ejection deadline, the
 * outlier detector's interval counters, and the owner's health word.
 */
import { elapsedMs, wrapMs } from '../core/time.js';
import {
  S_EJECTED_UNTIL,
  S_EJECTIONS,
  S_EJECTIONS_TOTAL,
  S_FAILURES,
  S_HEALTH,
  S_INTERVAL_FAIL,
  S_INTERVAL_OK,
  SLOT_WORDS,
  type Layout,
} from './layout.js';

/** Bits of the slot health word (owner-written; routers read them when they rebuild a view). */
export const HealthFlag = {
  /** The active check has failed `fall` times in a row (cleared after `rise` passes). */
  Unhealthy: 1,
  /** The active check reported degraded (a header, a slow reply, a custom verdict). */
  CheckDegraded: 2,
  /** The membership marks the backend `degraded`. */
  MemberDegraded: 4,
  /** The agent beside the active check (`health.agent`) said `down` (cleared when it says `up`). */
  AgentDown: 8,
} as const;

/** Failures word: bit 30 = "ejections to clear" (set by eject, cleared by a success). */
const EJECTED_FLAG = 0x40000000;
const FAILURE_MASK = EJECTED_FLAG - 1;

/** The passive-health words of one table. */
export class PassiveHealth {
  private readonly i32: Int32Array;
  private readonly slotBase: number;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.slotBase = layout.slotBase;
  }

  private at(slot: number): number {
    return this.slotBase + slot * SLOT_WORDS;
  }

  /** Adds one consecutive failure; returns the new count. */
  addFailure(slot: number): number {
    // add: concurrent failures from several threads all count (the add
    // leaves the ejection flag in bit 30 as it is).
    return (Atomics.add(this.i32, this.at(slot) + S_FAILURES, 1) + 1) & FAILURE_MASK;
  }

  /** A success: clears consecutive failures and the ejection exponent (writes only when non-zero). */
  clearFailures(slot: number): void {
    const o = this.at(slot);
    // A plain load first (tear-free), so the common all-clear case writes
    // nothing and keeps the line shared. An ejection sets bit 30 of the
    // failures word, so a zero word means both failures and ejections are
    // clear. A failure racing this read, or the stores below, may be
    // forgotten, which is the meaning of "a success resets".
    const w = this.i32[o + S_FAILURES]!;
    if (w === 0) return;
    // Clear the ejection count before the flag that advertises it, so a
    // reader that sees the flag gone sees the count gone too.
    if ((w & EJECTED_FLAG) !== 0) Atomics.store(this.i32, o + S_EJECTIONS, 0);
    Atomics.store(this.i32, o + S_FAILURES, 0);
  }

  /** Consecutive failures (without the ejection flag). */
  failures(slot: number): number {
    return Atomics.load(this.i32, this.at(slot) + S_FAILURES) & FAILURE_MASK;
  }

  /** Consecutive ejections so far (the backoff exponent). */
  ejections(slot: number): number {
    return Atomics.load(this.i32, this.at(slot) + S_EJECTIONS);
  }

  /** Ejections of the slot's occupant since it took the slot (a success does not reset it; wraps at 2^32). */
  ejectionsTotal(slot: number): number {
    return Atomics.load(this.i32, this.at(slot) + S_EJECTIONS_TOTAL) >>> 0;
  }

  /** Ejects a slot until `untilMs` (never stored as 0), resets failures, counts the ejection. */
  eject(slot: number, untilMs: number): void {
    const o = this.at(slot);
    const until = wrapMs(untilMs) || 1;
    // Each word is one store/add; the health epoch bump that follows (SC)
    // publishes them together to routers that refresh on it. The count first,
    // then the failures word with the flag that tells clearFailures there is
    // a count to clear (failures reset to 0).
    Atomics.store(this.i32, o + S_EJECTED_UNTIL, until);
    Atomics.add(this.i32, o + S_EJECTIONS, 1);
    // add: two threads ejecting at once both count (statistics only).
    Atomics.add(this.i32, o + S_EJECTIONS_TOTAL, 1);
    Atomics.store(this.i32, o + S_FAILURES, EJECTED_FLAG);
  }

  /**
   * Owner: ends a slot's ejection now (an active check passed). The ejection
   * count stays, so the next ejection still lasts longer; the caller bumps
   * the health epoch, which publishes the store to routers that refresh on it.
   */
  uneject(slot: number): void {
    Atomics.store(this.i32, this.at(slot) + S_EJECTED_UNTIL, 0);
  }

  /** The raw ejection deadline word (shared-clock ms mod 2^30; 0 = not ejected). */
  ejectedUntil(slot: number): number {
    return Atomics.load(this.i32, this.at(slot) + S_EJECTED_UNTIL);
  }

  /** Milliseconds of ejection left at `nowMs` (0 when not ejected). */
  ejectedForMs(slot: number, nowMs: number): number {
    const until = Atomics.load(this.i32, this.at(slot) + S_EJECTED_UNTIL);
    if (until === 0) return 0;
    const left = elapsedMs(until, wrapMs(nowMs));
    // biome-ignore lint/complexity/useMathMinMax: read when a view is rebuilt; a compare keeps the value a small integer
    return left > 0 ? left : 0;
  }

  /**
   * Adds released outcomes to the slot's interval counters (any router; it
   * batches them, like its picks, and flushes at least once a second — the
   * detector's interval is seconds).
   */
  countOutcomes(slot: number, successes: number, failures: number): void {
    // add: routers in every thread count into the same words and none may be
    // lost; the owner's exchange below takes whatever has been added so far.
    if (successes > 0) Atomics.add(this.i32, this.at(slot) + S_INTERVAL_OK, successes);
    if (failures > 0) Atomics.add(this.i32, this.at(slot) + S_INTERVAL_FAIL, failures);
  }

  /**
   * Owner: reads and zeroes the slot's interval counters, storing successes
   * in `out[0]` and failures in `out[1]` (no allocation). Each exchange is one
   * atomic step, so an outcome counted concurrently lands in exactly one
   * interval — this one or the next.
   */
  takeInterval(slot: number, out: Int32Array): void {
    const o = this.at(slot);
    out[0] = Atomics.exchange(this.i32, o + S_INTERVAL_OK, 0) >>> 0;
    out[1] = Atomics.exchange(this.i32, o + S_INTERVAL_FAIL, 0) >>> 0;
  }

  /** The interval counters as they stand (statistics). */
  interval(slot: number): [successes: number, failures: number] {
    const o = this.at(slot);
    return [Atomics.load(this.i32, o + S_INTERVAL_OK), Atomics.load(this.i32, o + S_INTERVAL_FAIL)];
  }

  /** The slot's health word ({@link HealthFlag} bits). */
  health(slot: number): number {
    // Owner-written with one store; a load sees a whole word.
    return Atomics.load(this.i32, this.at(slot) + S_HEALTH);
  }

  /**
   * Owner: replaces the bits of `mask` in the health word with those of
   * `bits`; returns whether the word changed. The caller bumps the health
   * epoch after its writes so routers rebuild their views.
   */
  setHealth(slot: number, mask: number, bits: number): boolean {
    const p = this.at(slot) + S_HEALTH;
    // Single writer (the owner): load + store cannot lose a concurrent update.
    const old = Atomics.load(this.i32, p);
    const next = (old & ~mask) | (bits & mask);
    if (next === old) return false;
    Atomics.store(this.i32, p, next);
    return true;
  }

  /** Owner: every word back to zero for a new occupant (the slot is Free or Closing: no router writes it). */
  reset(slot: number): void {
    const o = this.at(slot);
    // Stores are visible before the tag that admits the next occupant (SC).
    for (const w of [S_FAILURES, S_EJECTIONS, S_EJECTIONS_TOTAL, S_EJECTED_UNTIL, S_INTERVAL_OK, S_INTERVAL_FAIL, S_HEALTH]) {
      Atomics.store(this.i32, o + w, 0);
    }
  }
}
