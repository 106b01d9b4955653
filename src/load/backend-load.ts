/**
 * Backend-reported load: what a backend says about itself, written by the
 * owner (an `agent` health check speaking HAProxy's agent protocol, or an
 * ORCA-style weight source) into two slot words (layout.ts):
 *
 * | word | field           | unit |
 * |------|-----------------|------|
 * | 24   | reported weight | the multiplier of the spec weight the backend asks for, parts per million (valid when flag 1 is set) |
 * | 25   | reported flags  | 1 = a weight is reported, 2 = drain, 4 = maint |
 *
 * Routers read them at view builds (effective-weight.ts): a drained or
 * maintained backend takes no new leases (the ones it holds run to their
 * end), and a reported weight multiplies the spec weight (and, for
 * load-based policies, divides the load), as slow start does.
 */
import { S_REPORTED_STATE, S_REPORTED_WEIGHT, type Layout } from './layout.js';

/** Bits of the reported flags word. */
export const ReportFlag = {
  /** The weight word holds a report. */
  Weight: 1,
  /** The backend asked for no new traffic (agent `drain`). */
  Drain: 2,
  /** The backend is in maintenance (agent `maint`). */
  Maint: 4,
} as const;

/** Largest multiplier a report may ask for (100×), ppm. */
export const MAX_REPORTED_PPM = 100_000_000;

/** The reported-load words of one table. */
export class BackendLoad {
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /** Owner: slot `slot` reports weight multiplier `ppm` (undefined: no weight report). */
  setWeight(slot: number, ppm: number | undefined): boolean {
    const o = this.layout.slot(slot);
    const flags = Atomics.load(this.i32, o + S_REPORTED_STATE);
    if (ppm === undefined) return this.setFlags(slot, flags & ~ReportFlag.Weight);
    const v = Math.max(0, Math.min(MAX_REPORTED_PPM, Math.round(ppm)));
    const changed = Atomics.load(this.i32, o + S_REPORTED_WEIGHT) !== v || (flags & ReportFlag.Weight) === 0;
    // The weight before the flag that says it is there (SC stores, in order).
    Atomics.store(this.i32, o + S_REPORTED_WEIGHT, v);
    return this.setFlags(slot, flags | ReportFlag.Weight) || changed;
  }

  /** Owner: sets slot `slot`'s drain / maint bits to `bits` (the weight bit is kept). Returns whether anything changed. */
  setAdmin(slot: number, bits: number): boolean {
    const flags = Atomics.load(this.i32, this.layout.slot(slot) + S_REPORTED_STATE);
    return this.setFlags(slot, (flags & ReportFlag.Weight) | (bits & (ReportFlag.Drain | ReportFlag.Maint)));
  }

  /** Owner: forgets every report of slot `slot` (a new occupant). */
  clear(slot: number): void {
    const o = this.layout.slot(slot);
    Atomics.store(this.i32, o + S_REPORTED_STATE, 0);
    Atomics.store(this.i32, o + S_REPORTED_WEIGHT, 0);
  }

  /** The flags word of slot `slot` (`ReportFlag` bits). */
  flags(slot: number): number {
    return Atomics.load(this.i32, this.layout.slot(slot) + S_REPORTED_STATE);
  }

  /** The reported multiplier of slot `slot` (1 when none is reported). */
  multiplier(slot: number): number {
    const o = this.layout.slot(slot);
    if ((Atomics.load(this.i32, o + S_REPORTED_STATE) & ReportFlag.Weight) === 0) return 1;
    return Atomics.load(this.i32, o + S_REPORTED_WEIGHT) / 1_000_000;
  }

  private setFlags(slot: number, flags: number): boolean {
    const at = this.layout.slot(slot) + S_REPORTED_STATE;
    return Atomics.exchange(this.i32, at, flags) !== flags;
  }
}
