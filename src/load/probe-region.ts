/**
 * The probe pool (the `probe` policy, Prequal's asynchronous probes): what
 * each backend last said about itself — its requests in flight and its
 * latency estimate, and when — shared by every thread of the process, so
 * one probe answers every thread's picks.
 *
 * Words (layout.ts):
 *
 * | where          | word | field       | written by | read by |
 * |----------------|------|-------------|------------|---------|
 * | process region | 0–4  | on, max age (ms), max uses, quantile (ppm), sample | the owner's prober (`health/probe-pool.ts`, `configure`) | every pick of `probe` (plain loads) |
 * | process region | 5    | cold threshold: the quantile of the fresh answers' in-flight counts, + 1 (0 = unknown) | the owner's prober, each round | every pick of `probe` |
 * | process region | 6–8  | probes sent, answers recorded, header reports recorded | the prober (6, 7); any thread's dispatcher (8) | metrics, tests |
 * | slot 48        | seq  | seqlock over words 49–51 | any writer, by CAS from even to odd | readers |
 * | slot 49–51     | in-flight, latency µs, at (wrapped ms, 0 = none) | the owner's prober (a probe's answer), any thread's HTTP dispatcher (a response's `poise-load` header) | picks, under the seqlock |
 * | slot 52        | uses | picks that chose the backend on that answer; 0 again with the next answer | every thread's pick (`Atomics.add`), the writer of an answer | picks |
 *
 * A writer that finds the seqlock held drops its report (another report of
 * the same backend is being written at that instant: only the latest
 * matters). A reader retries a few times, then treats the backend as
 * unprobed for that pick (the policy falls back for it). Allocates nothing.
 */
import { elapsedMs } from '../core/time.js';
import {
  type Layout,
  P_ANSWERS,
  P_COLD_RIF,
  P_HEADER_REPORTS,
  P_MAX_AGE_MS,
  P_MAX_USES,
  P_ON,
  P_QUANTILE_PPM,
  P_SAMPLE,
  P_SENT,
  S_PROBE_AT,
  S_PROBE_LATENCY,
  S_PROBE_RIF,
  S_PROBE_SEQ,
  S_PROBE_USES,
} from './layout.js';

/** Largest figure a word holds: stays a V8 small integer. */
const MAX_FIGURE = 0x3fffffff;
/** How many times a reader retries an answer being written. */
const READ_TRIES = 4;

/** One backend's probe answer as a pick reads it (a reused object). */
export interface ProbeReading {
  /** Requests in flight the backend reported. */
  inflight: number;
  /** Its latency estimate, µs. */
  latencyUs: number;
  /** Age of the answer, ms. */
  ageMs: number;
  /** Picks made on it so far (this process). */
  uses: number;
}

/** The process-wide limits of the probe pool, as the owner configured them. */
export interface ProbeSettings {
  /** Answers older than this (ms) are not used. */
  maxAgeMs: number;
  /** An answer is used at most this many times. */
  maxUses: number;
  /** The hot-cold quantile in (0, 1]. */
  quantile: number;
  /** Probed members one pick samples. */
  sample: number;
}

/** The probe pool's words of one table. */
export class ProbeRegion {
  private readonly i32: Int32Array;
  private readonly layout: Layout;
  private readonly base: number;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
    this.base = layout.probeBase;
  }

  /** Owner: the pool's limits (before `on` is set, so a reader that sees it on sees them). */
  configure(s: Readonly<ProbeSettings>): void {
    const b = this.base;
    Atomics.store(this.i32, b + P_MAX_AGE_MS, s.maxAgeMs);
    Atomics.store(this.i32, b + P_MAX_USES, s.maxUses);
    Atomics.store(this.i32, b + P_QUANTILE_PPM, Math.round(s.quantile * 1e6));
    Atomics.store(this.i32, b + P_SAMPLE, s.sample);
    Atomics.store(this.i32, b + P_ON, 1);
  }

  /** Owner: no pool any more (picks fall back to `p2c:latency`). */
  disable(): void {
    Atomics.store(this.i32, this.base + P_ON, 0);
    Atomics.store(this.i32, this.base + P_COLD_RIF, 0);
    // No answer is usable any more (an answer's uses are checked against this): picks fall back at once.
    Atomics.store(this.i32, this.base + P_MAX_USES, 0);
  }

  /** Whether a pool is configured. */
  get on(): boolean {
    return this.i32[this.base + P_ON] === 1;
  }
  /** Answers older than this, ms, are not used. */
  get maxAgeMs(): number {
    return this.i32[this.base + P_MAX_AGE_MS]!;
  }
  /** An answer is used at most this many times. */
  get maxUses(): number {
    return this.i32[this.base + P_MAX_USES]!;
  }
  /** The hot-cold quantile. */
  get quantile(): number {
    return this.i32[this.base + P_QUANTILE_PPM]! / 1e6;
  }
  /** Probed members a pick samples. */
  get sample(): number {
    return this.i32[this.base + P_SAMPLE]!;
  }
  /** The owner's cold threshold (in-flight at or below it is cold); −1 when not known. */
  get coldInflight(): number {
    return this.i32[this.base + P_COLD_RIF]! - 1;
  }

  /** Owner: the cold threshold of this round (−1: unknown). */
  setColdInflight(rif: number): void {
    Atomics.store(this.i32, this.base + P_COLD_RIF, rif < 0 ? 0 : Math.min(MAX_FIGURE, rif) + 1);
  }

  /** Owner: `n` probes sent. */
  countSent(n: number): void {
    Atomics.add(this.i32, this.base + P_SENT, n);
  }

  /** Probes sent, answers recorded from probes, reports recorded from response headers. */
  counts(): { sent: number; answers: number; headerReports: number } {
    const b = this.base;
    return {
      sent: Atomics.load(this.i32, b + P_SENT) >>> 0,
      answers: Atomics.load(this.i32, b + P_ANSWERS) >>> 0,
      headerReports: Atomics.load(this.i32, b + P_HEADER_REPORTS) >>> 0,
    };
  }

  /**
   * Any thread: backend `slot` reports `inflight` requests in flight and a
   * latency estimate of `latencyUs`, at `nowMs` (wrapped). `fromProbe`
   * tells which counter it goes to. False when another writer held the
   * seqlock (the report is dropped). Resets the uses of the previous answer.
   */
  record(slot: number, inflight: number, latencyUs: number, nowMs: number, fromProbe: boolean): boolean {
    const i32 = this.i32;
    const o = this.layout.slot(slot);
    // A response header's report counts only while a pool runs (no pool: no `probe` pick reads it, and the
    // shared words would take every response's writes for nothing).
    if (!fromProbe && i32[this.base + P_ON] !== 1) return false;
    const seq = Atomics.load(i32, o + S_PROBE_SEQ);
    if ((seq & 1) !== 0 || Atomics.compareExchange(i32, o + S_PROBE_SEQ, seq, seq + 1) !== seq) return false;
    Atomics.store(i32, o + S_PROBE_RIF, clamp(inflight));
    Atomics.store(i32, o + S_PROBE_LATENCY, clamp(latencyUs));
    Atomics.store(i32, o + S_PROBE_AT, nowMs === 0 ? 1 : nowMs);
    Atomics.store(i32, o + S_PROBE_USES, 0);
    Atomics.store(i32, o + S_PROBE_SEQ, (seq + 2) & MAX_FIGURE);
    Atomics.add(i32, this.base + (fromProbe ? P_ANSWERS : P_HEADER_REPORTS), 1);
    return true;
  }

  /**
   * Any thread: reads slot `slot`'s answer into `out` at `nowMs`. False
   * when there is none (or writers kept it busy). The age is measured on
   * the shared clock; an answer "from the future" (a writer's clock a
   * millisecond ahead) is age 0.
   */
  read(slot: number, nowMs: number, out: ProbeReading): boolean {
    const i32 = this.i32;
    const o = this.layout.slot(slot);
    for (let k = 0; k < READ_TRIES; k++) {
      const seq = Atomics.load(i32, o + S_PROBE_SEQ);
      if ((seq & 1) !== 0) continue;
      const at = Atomics.load(i32, o + S_PROBE_AT);
      out.inflight = Atomics.load(i32, o + S_PROBE_RIF);
      out.latencyUs = Atomics.load(i32, o + S_PROBE_LATENCY);
      out.uses = Atomics.load(i32, o + S_PROBE_USES);
      if (Atomics.load(i32, o + S_PROBE_SEQ) !== seq) continue;
      if (at === 0) return false;
      const age = elapsedMs(nowMs, at);
      out.ageMs = Math.max(0, age);
      return true;
    }
    return false;
  }

  /** Any thread: a pick chose slot `slot` on its current answer. */
  use(slot: number): void {
    Atomics.add(this.i32, this.layout.slot(slot) + S_PROBE_USES, 1);
  }

  /** Owner: forgets slot `slot`'s answer (a new occupant). */
  clear(slot: number): void {
    const o = this.layout.slot(slot);
    for (let w = S_PROBE_RIF; w <= S_PROBE_USES; w++) Atomics.store(this.i32, o + w, 0);
    // A writer terminated inside record() left the seqlock odd: the new occupant starts with it even.
    const seq = Atomics.load(this.i32, o + S_PROBE_SEQ);
    if ((seq & 1) !== 0) Atomics.store(this.i32, o + S_PROBE_SEQ, (seq + 1) & MAX_FIGURE);
  }
}

function clamp(v: number): number {
  if (Number.isNaN(v) || v < 0) return 0;
  return v > MAX_FIGURE ? MAX_FIGURE : Math.round(v);
}
