/**
 * Backend-reported load: what a backend says about itself, written by the
 * owner into slot words (layout.ts). Each word has one writer: the agent
 * check (HAProxy's agent protocol) writes words 24–25, the ORCA weight
 * computation (health/orca.ts) writes word 39. The two weights are never
 * merged here: runtime/effective-weight.ts combines them by one rule
 * (HAProxy keeps the agent's weight and the check's state in separate
 * fields the same way).
 *
 * | word | field           | unit |
 * |------|-----------------|------|
 * | 24   | agent weight    | the multiplier of the spec weight the agent asks for, parts per million (valid when flag 1 is set) |
 * | 25   | agent flags     | 1 = the agent reported a weight, 2 = drain, 4 = maint |
 * | 39   | ORCA weight     | the A58 weight's multiplier of the spec weight, ppm + 1; 0 = none |
 * | 32   | report seqlock  | even = words 33–37 stable, odd = a thread is writing them |
 * | 33–35 | utilization, qps, eps | the last ORCA report: millionths, hundredths, hundredths (saturated at 2^30 − 1) |
 * | 36   | report at       | when it came, shared-clock ms mod 2^30; 0 = none |
 * | 37   | reporting since | when its unbroken run of reports began (A58's blackout) |
 *
 * Words 32–37 (the slot's third line) are written by whichever thread saw a report — the owner's
 * endpoint poll, or any thread's HTTP dispatcher reading the
 * `endpoint-load-metrics` response header — and read by the owner's
 * periodic A58 computation (health/orca.ts), which writes word 39.
 *
 * Routers read them at view builds (effective-weight.ts): a drained or
 * maintained backend takes no new leases (the ones it holds run to their
 * end), and the reported weights, combined, multiply the spec weight (and,
 * for load-based policies, divide the load), as slow start does.
 */
import { elapsedMs } from '../core/time.js';
import {
  type Layout,
  S_ORCA_AT,
  S_ORCA_EPS,
  S_ORCA_QPS,
  S_ORCA_SEQ,
  S_ORCA_SINCE,
  S_ORCA_UTIL,
  S_ORCA_WEIGHT,
  S_REPORTED_STATE,
  S_REPORTED_WEIGHT,
} from './layout.js';

/** Bits of the reported flags word. */
export const ReportFlag = {
  /** The agent's weight word holds a report. */
  Weight: 1,
  /** The backend asked for no new traffic (agent `drain`). */
  Drain: 2,
  /** The backend is in maintenance (agent `maint`). */
  Maint: 4,
} as const;

/** Largest multiplier a report may ask for (100×), ppm. */
export const MAX_REPORTED_PPM = 100_000_000;

/** Largest fixed-point figure a report word holds: stays a V8 small integer. */
const MAX_FIGURE = 0x3fffffff;
/** How many times a reader retries a report being written before it leaves it for its next round. */
const READ_TRIES = 8;

/** One ORCA report as read back from a slot (a reused object). */
export interface SlotReport {
  /** Utilization (the scanner's choice of application or CPU). */
  utilization: number;
  /** Queries per second. */
  qps: number;
  /** Errors per second. */
  eps: number;
  /** When it came, wrapped ms. */
  at: number;
  /** When its unbroken run of reports began, wrapped ms. */
  since: number;
}

function fixed(v: number, scale: number): number {
  const x = Math.round(v * scale);
  return Math.min(MAX_FIGURE, Math.max(0, x));
}

/** The reported-load words of one table. */
export class BackendLoad {
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /** Owner, the agent check only: slot `slot`'s agent reports weight multiplier `ppm` (undefined: no weight report). Returns whether anything changed. */
  setAgentWeight(slot: number, ppm: number | undefined): boolean {
    const o = this.layout.slot(slot);
    const flags = Atomics.load(this.i32, o + S_REPORTED_STATE);
    if (ppm === undefined) return this.setFlags(slot, flags & ~ReportFlag.Weight);
    const v = Math.max(0, Math.min(MAX_REPORTED_PPM, Math.round(ppm)));
    const changed = Atomics.load(this.i32, o + S_REPORTED_WEIGHT) !== v || (flags & ReportFlag.Weight) === 0;
    // The weight before the flag that says it is there (SC stores, in order).
    Atomics.store(this.i32, o + S_REPORTED_WEIGHT, v);
    return this.setFlags(slot, flags | ReportFlag.Weight) || changed;
  }

  /** Owner, the agent check only: sets slot `slot`'s drain / maint bits to `bits` (the weight bit is kept). Returns whether anything changed. */
  setAdmin(slot: number, bits: number): boolean {
    const flags = Atomics.load(this.i32, this.layout.slot(slot) + S_REPORTED_STATE);
    return this.setFlags(slot, (flags & ReportFlag.Weight) | (bits & (ReportFlag.Drain | ReportFlag.Maint)));
  }

  /**
   * Owner, the ORCA weight computation only: slot `slot`'s A58 weight is
   * multiplier `ppm` (undefined: none). Returns whether it changed. One
   * word, ppm + 1 (0 = none): a store is the whole write, so a view build
   * never sees a weight without its presence.
   */
  setOrcaWeight(slot: number, ppm: number | undefined): boolean {
    const v = ppm === undefined ? 0 : Math.max(0, Math.min(MAX_REPORTED_PPM, Math.round(ppm))) + 1;
    // One word, one writer (the owner's ORCA computation): the exchange tells whether it moved.
    return Atomics.exchange(this.i32, this.layout.slot(slot) + S_ORCA_WEIGHT, v) !== v;
  }

  /** Owner: forgets every report of slot `slot` (a new occupant: no thread holds a lease on the slot, so none writes it). */
  clear(slot: number): void {
    const o = this.layout.slot(slot);
    Atomics.store(this.i32, o + S_REPORTED_STATE, 0);
    Atomics.store(this.i32, o + S_REPORTED_WEIGHT, 0);
    Atomics.store(this.i32, o + S_ORCA_WEIGHT, 0);
    for (let w = S_ORCA_UTIL; w <= S_ORCA_SINCE; w++) Atomics.store(this.i32, o + w, 0);
  }

  /**
   * Any thread: records backend `slot`'s ORCA report (utilization, queries/s,
   * errors/s) made at `nowMs` (wrapped). The caller holds a lease on the
   * slot, so the occupant cannot change meanwhile. The first report after
   * none (or after the owner expired the last) starts a new run; a report
   * without queries or utilization ends the run.
   *
   * Writers exclude one another by a compare-and-swap of the seqlock word
   * from even to odd; one that finds it odd or loses the swap drops its
   * report and returns false: another thread is recording the same
   * backend's load at that instant, and only the latest report is kept
   * anyway. Every word is stored with Atomics (sequentially consistent), so
   * a reader that sees the same even sequence before and after reading the
   * five words read one report whole. Allocates nothing.
   */
  report(slot: number, utilization: number, qps: number, eps: number, nowMs: number): boolean {
    const i32 = this.i32;
    const o = this.layout.slot(slot);
    const seq = Atomics.load(i32, o + S_ORCA_SEQ);
    if ((seq & 1) !== 0 || Atomics.compareExchange(i32, o + S_ORCA_SEQ, seq, seq + 1) !== seq) return false;
    const util = fixed(utilization, 1e6);
    const q = fixed(qps, 100);
    Atomics.store(i32, o + S_ORCA_UTIL, util);
    Atomics.store(i32, o + S_ORCA_QPS, q);
    Atomics.store(i32, o + S_ORCA_EPS, fixed(eps, 100));
    if (util === 0 || q === 0) {
      // A report without load gives no weight and ends the run (A58 counts only non-empty reports).
      Atomics.store(i32, o + S_ORCA_AT, 0);
      Atomics.store(i32, o + S_ORCA_SINCE, 0);
    } else {
      const at = nowMs === 0 ? 1 : nowMs;
      if (Atomics.load(i32, o + S_ORCA_AT) === 0) Atomics.store(i32, o + S_ORCA_SINCE, at);
      Atomics.store(i32, o + S_ORCA_AT, at);
    }
    // Even again, and never past 2^30 (a small integer): the lock is free.
    Atomics.store(i32, o + S_ORCA_SEQ, (seq + 2) & MAX_FIGURE);
    return true;
  }

  /**
   * Owner: reads slot `slot`'s last report into `out`. False when there is
   * none, or when writers kept it busy for every try (the next round reads
   * it). A report not newer than `expiryMs` is returned; one older is
   * forgotten here (its run ends, so the next report starts a new blackout)
   * and false returned.
   */
  readReport(slot: number, nowMs: number, expiryMs: number, out: SlotReport): boolean {
    const i32 = this.i32;
    const o = this.layout.slot(slot);
    for (let k = 0; k < READ_TRIES; k++) {
      const seq = Atomics.load(i32, o + S_ORCA_SEQ);
      if ((seq & 1) !== 0) continue;
      const at = Atomics.load(i32, o + S_ORCA_AT);
      out.utilization = Atomics.load(i32, o + S_ORCA_UTIL) / 1e6;
      out.qps = Atomics.load(i32, o + S_ORCA_QPS) / 100;
      out.eps = Atomics.load(i32, o + S_ORCA_EPS) / 100;
      out.since = Atomics.load(i32, o + S_ORCA_SINCE);
      out.at = at;
      if (Atomics.load(i32, o + S_ORCA_SEQ) !== seq) continue;
      if (at === 0) return false;
      if (elapsedMs(nowMs, at) < expiryMs) return true;
      // Expired: end the run under the lock, unless a writer is there (then a new report came).
      if (Atomics.compareExchange(i32, o + S_ORCA_SEQ, seq, seq + 1) === seq) {
        Atomics.store(i32, o + S_ORCA_AT, 0);
        Atomics.store(i32, o + S_ORCA_SINCE, 0);
        Atomics.store(i32, o + S_ORCA_SEQ, (seq + 2) & MAX_FIGURE);
      }
      return false;
    }
    return false;
  }

  /** The agent's flags word of slot `slot` (`ReportFlag` bits). */
  flags(slot: number): number {
    // Sequentially consistent load: the owner's stores are seen in order (weight before its flag).
    return Atomics.load(this.i32, this.layout.slot(slot) + S_REPORTED_STATE);
  }

  /** The agent's multiplier of slot `slot`, or undefined when its agent reports no weight. */
  agentWeight(slot: number): number | undefined {
    const o = this.layout.slot(slot);
    // The flag is stored after the weight (setAgentWeight): a set flag read here means the weight beside it is the one it announced.
    if ((Atomics.load(this.i32, o + S_REPORTED_STATE) & ReportFlag.Weight) === 0) return undefined;
    return Atomics.load(this.i32, o + S_REPORTED_WEIGHT) / 1_000_000;
  }

  /** The agent's multiplier of slot `slot` (1 when its agent reports no weight). */
  agentMultiplier(slot: number): number {
    return this.agentWeight(slot) ?? 1;
  }

  /** ORCA's multiplier of slot `slot`, or undefined when no A58 weight is in force. */
  orcaWeight(slot: number): number | undefined {
    // One word holds both the presence and the value: a single load reads them together.
    const v = Atomics.load(this.i32, this.layout.slot(slot) + S_ORCA_WEIGHT);
    return v === 0 ? undefined : (v - 1) / 1_000_000;
  }

  /** ORCA's multiplier of slot `slot` (1 when no A58 weight is in force). */
  orcaMultiplier(slot: number): number {
    return this.orcaWeight(slot) ?? 1;
  }

  private setFlags(slot: number, flags: number): boolean {
    const at = this.layout.slot(slot) + S_REPORTED_STATE;
    return Atomics.exchange(this.i32, at, flags) !== flags;
  }
}
