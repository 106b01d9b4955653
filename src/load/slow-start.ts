/**
 * Slow start: a backend that becomes eligible again — it joined, or passed
 * its active check after failing it, or its ejection ended — is cold (JIT,
 * caches, connection pools), so its share ramps up over a window instead of
 * jumping to its weight. Envoy's `slow_start_config` semantics:
 *
 *     factor = max(minWeightPercent / 100, (elapsed / windowMs) ^ (1 / aggression))   while elapsed < windowMs, else 1
 *
 * Words: three header words (the configuration, written by the owner) and
 * one slot word, the ramp start (layout.ts). The owner writes the ramp start
 * when it makes an occupant eligible (a new backend, a check passed again);
 * an ejection's end needs no write, its deadline word stays in the slot and
 * counts as a ramp start once it is past. Every router reads both at its
 * view builds, so all threads ramp one backend together.
 *
 * Relative, not absolute: a router divides every member's factor by the
 * largest factor among the members it builds on, so when every backend
 * ramps from the same instant (all new) nobody is ramped relative to anyone
 * (Envoy's slow start does nothing then; this gives the same answer), and a
 * pool whose only warm member is ejected ramps the cold ones relative to
 * each other only.
 */
import { elapsedMs, wrapMs } from '../core/time.js';
import { H_SLOW_AGGRESSION, H_SLOW_MIN, H_SLOW_WINDOW_MS, S_EJECTED_UNTIL, S_RAMP_START, type Layout } from './layout.js';

/** Slow start as the table stores it. */
export interface SlowStartConfig {
  /** The ramp, ms (≥ 1). */
  windowMs: number;
  /** The curve's aggression, thousandths (1000 = linear; higher ramps faster at first). */
  aggressionMilli: number;
  /** The factor's floor, thousandths (Envoy's default 10 % = 100). */
  minMilli: number;
}

/**
 * The ramp factor after `elapsed` of `windowMs` ms (1 at and after the window;
 * `minMilli / 1000` at least). Pure: the one formula.
 */
export function rampFactor(elapsed: number, c: SlowStartConfig): number {
  if (elapsed >= c.windowMs) return 1;
  const curve = elapsed <= 0 ? 0 : (elapsed / c.windowMs) ** (1000 / c.aggressionMilli);
  return Math.max(c.minMilli / 1000, curve);
}

/** The slow-start words of one table. */
export class SlowStart {
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /** Turns slow start on with `config`, or off. Owner only; the window last, so a reader that sees it on sees the rest. */
  configure(config: SlowStartConfig | undefined): void {
    if (config === undefined) {
      Atomics.store(this.i32, H_SLOW_WINDOW_MS, 0);
      return;
    }
    Atomics.store(this.i32, H_SLOW_AGGRESSION, config.aggressionMilli);
    Atomics.store(this.i32, H_SLOW_MIN, config.minMilli);
    Atomics.store(this.i32, H_SLOW_WINDOW_MS, config.windowMs);
  }

  /** The configuration in force, or undefined when off. */
  config(): SlowStartConfig | undefined {
    const windowMs = Atomics.load(this.i32, H_SLOW_WINDOW_MS);
    if (windowMs === 0) return undefined;
    return { windowMs, aggressionMilli: Atomics.load(this.i32, H_SLOW_AGGRESSION), minMilli: Atomics.load(this.i32, H_SLOW_MIN) };
  }

  /** Owner: slot `slot`'s occupant becomes eligible at `nowMs` (shared-clock ms) and ramps from then. */
  markEligible(slot: number, nowMs: number): void {
    // 0 means "none": a start at exactly 0 is recorded 1 ms late.
    Atomics.store(this.i32, this.layout.slot(slot) + S_RAMP_START, wrapMs(nowMs) || 1);
  }

  /** Owner: slot `slot`'s occupant does not ramp (its ramp start is forgotten). */
  clear(slot: number): void {
    Atomics.store(this.i32, this.layout.slot(slot) + S_RAMP_START, 0);
  }

  /**
   * Milliseconds since slot `slot` last became eligible at `nowMs` — the
   * later of the owner's ramp start and an ejection deadline already past —
   * or -1 when neither is recorded. Read at view builds (Atomics: off the
   * pick path).
   */
  sinceEligible(slot: number, nowMs: number): number {
    const o = this.layout.slot(slot);
    const now = wrapMs(nowMs);
    const start = Atomics.load(this.i32, o + S_RAMP_START);
    const until = Atomics.load(this.i32, o + S_EJECTED_UNTIL);
    let since = start === 0 ? -1 : elapsedMs(now, start);
    if (until !== 0) {
      const afterEjection = elapsedMs(now, until);
      if (afterEjection >= 0 && (since < 0 || afterEjection < since)) since = afterEjection;
    }
    return since;
  }
}
