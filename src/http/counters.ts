/**
 * HttpCounters: per-backend request counters and a latency histogram for the
 * HTTP dispatcher, in one SharedArrayBuffer, so that a scrape in the owner
 * thread sees the requests of every thread's dispatcher (like the LoadTable,
 * and unlike prom-client's own metrics, which live in the thread that
 * observes).
 *
 * One row per LoadTable slot, keyed by (slot, generation): a
 * {@link GenerationRows} table (src/core/slot-rows.ts says how a reused
 * slot starts from zero and why readers never see an older backend's
 * counts), of 64-bit counters (src/core/counter64.ts says why their
 * Atomics are enough).
 *
 * Row layout (words), padded to 64 (four 64-byte lines):
 *
 * | words          | field |
 * |----------------|-------|
 * | 0              | generation of the counts (bit 30: being reset) |
 * | 1              | reserved |
 * | 2 + 2k, 3 + 2k | counter k: outcomes (success, failure, overload, cancelled), retries, refused retries, latency sum (µs), then one per latency bucket, the last `+Inf`, then load reports read from responses and load reports malformed, then hedges sent (on the slow attempt's backend), won (on the hedge's), cancelled (on the loser's), refused by the budget (on the slow attempt's) |
 */
import { TWO_32 } from '../core/counter64.js';
import { HEADER_WORDS, openStamped, stampedBuffer } from '../core/shared-header.js';
import { GenerationRows } from '../core/slot-rows.js';
import { invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';

/** Upper bounds (seconds) of the latency-to-headers buckets; a `+Inf` bucket follows. */
export const LATENCY_BUCKETS_SECONDS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Outcome codes, in counter order (the `outcome` label values). */
export const HTTP_OUTCOMES = ['success', 'failure', 'overload', 'cancelled'] as const;
/** A lease outcome, as counted. */
export type HttpOutcome = (typeof HTTP_OUTCOMES)[number];

/** What one backend's row holds (one generation of one slot). */
export interface HttpBackendFigures {
  /** Attempts by how their lease ended, in {@link HTTP_OUTCOMES} order. */
  outcomes: [success: number, failure: number, overload: number, cancelled: number];
  /** Retries of requests that failed on this backend. */
  retries: number;
  /** Retries the retry budget refused after a failure on this backend. */
  retriesRefused: number;
  /** Sum of the latencies to response headers, seconds. */
  latencySumSeconds: number;
  /** Latency bucket counts, not cumulative; the last is `+Inf`. */
  buckets: number[];
  /** `endpoint-load-metrics` response headers read (ORCA load reports). */
  loadReports: number;
  /** `endpoint-load-metrics` response headers ignored: not a report in the documented form. */
  loadReportsMalformed: number;
  /** Hedges, in {@link HEDGE_RESULTS} order: sent because an attempt on this backend was slow, won by an attempt on it, its attempts cancelled by another's response, refused by the budget after a slow attempt on it. */
  hedges: [sent: number, won: number, cancelled: number, refused: number];
}

/** What happened to a hedge (the `result` label values). */
export const HEDGE_RESULTS = ['sent', 'won', 'cancelled', 'refused'] as const;
/** A hedge's result, as counted. */
export type HedgeResult = (typeof HEDGE_RESULTS)[number];

const MAGIC = 0x48430003;
const ROW_WORDS = 64;
const C_RETRIES = 4;
const C_REFUSED = 5;
const C_SUM_US = 6;
const C_BUCKETS = 7;
const BUCKET_US = LATENCY_BUCKETS_SECONDS.map((s) => Math.round(s * 1e6));
const C_REPORTS = C_BUCKETS + BUCKET_US.length + 1;
const C_BAD_REPORTS = C_REPORTS + 1;
const C_HEDGES = C_BAD_REPORTS + 1;
const COUNTERS = C_HEDGES + HEDGE_RESULTS.length;
// Every counter pair fits the row: 2 head words + 2 × COUNTERS <= ROW_WORDS (2 + 54 = 56 of 64); GenerationRows checks it.

/** Outcome name → counter index (0..3). @internal */
export function outcomeCode(outcome: HttpOutcome): number {
  return outcome === 'success' ? 0 : outcome === 'failure' ? 1 : outcome === 'overload' ? 2 : 3;
}

/**
 * The dispatcher's shared counters. Create them in the owner thread with the
 * balancer's table capacity, hand `buffer` to worker threads, and pass the
 * object to every `PoiseDispatcher` (`counters`) and to `collectMetrics`
 * (`http`).
 *
 * @example
 * const counters = HttpCounters.create({ capacity: balancer.table.capacity });
 * const dispatcher = new PoiseDispatcher({ router, origin: 'http://api', counters });
 * collectMetrics(balancer, { registry, http: counters });
 * // in a worker: HttpCounters.attach(workerData.httpCounters)
 */
export class HttpCounters {
  /** The shared memory. */
  readonly buffer: SharedArrayBuffer;
  /** Rows: the LoadTable's slot capacity. */
  readonly capacity: number;
  private readonly rows: GenerationRows;

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    // Header words: capacity, bucket count (src/core/shared-header.ts).
    const i32 = openStamped(buffer, 'HttpCounters.attach(buffer)', 'an HttpCounters', MAGIC, [undefined, BUCKET_US.length]);
    this.capacity = Atomics.load(i32, 1);
    this.rows = new GenerationRows(i32, HEADER_WORDS, this.capacity, ROW_WORDS, COUNTERS);
  }

  /** Allocates counters for a table of `capacity` slots (`balancer.table.capacity`). Throws `InvalidConfig` naming the option. */
  static create(opts: { capacity: number }): HttpCounters {
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    const capacity = integerIn(opts.capacity, 'options.capacity', 1, 1 << 20, 'balancer.table.capacity');
    return new HttpCounters(stampedBuffer(MAGIC, [capacity, BUCKET_US.length], capacity * ROW_WORDS));
  }

  /** Attaches to counters created in another thread (shared, not copied). */
  static attach(buffer: SharedArrayBuffer): HttpCounters {
    return new HttpCounters(buffer);
  }

  // --- writers (a thread holding a lease on (slot, generation)) ---------------

  /**
   * Counts one attempt's outcome and, when `latencyMs >= 0`, its latency to
   * response headers. The caller still holds the lease. @internal
   */
  record(slot: number, generation: number, outcome: number, latencyMs: number): void {
    const rows = this.rows;
    const row = rows.writable(slot, generation);
    if (row < 0) return;
    rows.add(row, outcome, 1);
    if (latencyMs < 0) return;
    const us = Math.round(latencyMs * 1000);
    // One observation adds below 2^32 µs (71 minutes); a longer one counts in full in its bucket.
    rows.add(row, C_SUM_US, us < TWO_32 ? us : TWO_32 - 1);
    let k = 0;
    while (k < BUCKET_US.length && us > BUCKET_US[k]!) k++;
    rows.add(row, C_BUCKETS + k, 1);
  }

  /** Counts a retry of a request that failed on this backend (`refused`: the budget said no). @internal */
  retry(slot: number, generation: number, refused: boolean): void {
    const row = this.rows.writable(slot, generation);
    if (row >= 0) this.rows.add(row, refused ? C_REFUSED : C_RETRIES, 1);
  }

  /** Counts a load report read from a response header (`malformed`: ignored, not in the documented form). @internal */
  loadReport(slot: number, generation: number, malformed: boolean): void {
    const row = this.rows.writable(slot, generation);
    if (row >= 0) this.rows.add(row, malformed ? C_BAD_REPORTS : C_REPORTS, 1);
  }

  /** Counts a hedge's `result` on backend (slot, generation), whose lease the caller holds. @internal */
  hedge(slot: number, generation: number, result: HedgeResult): void {
    const row = this.rows.writable(slot, generation);
    if (row < 0) return;
    const k = result === 'sent' ? 0 : result === 'won' ? 1 : result === 'cancelled' ? 2 : 3;
    this.rows.add(row, C_HEDGES + k, 1);
  }

  // --- readers (any thread) ---------------------------------------------------

  /**
   * The figures of backend (slot, generation): zeros while its row still
   * holds an older generation's counts (nothing was counted for this one
   * yet) or is being reset.
   */
  figures(slot: number, generation: number): HttpBackendFigures {
    const out: HttpBackendFigures = {
      outcomes: [0, 0, 0, 0],
      retries: 0,
      retriesRefused: 0,
      latencySumSeconds: 0,
      buckets: new Array<number>(BUCKET_US.length + 1).fill(0),
      loadReports: 0,
      loadReportsMalformed: 0,
      hedges: [0, 0, 0, 0],
    };
    const row = this.rows.readable(slot, generation);
    if (row < 0) return out;
    const c = (k: number): number => this.rows.read(row, k);
    out.outcomes = [c(0), c(1), c(2), c(3)];
    out.retries = c(C_RETRIES);
    out.retriesRefused = c(C_REFUSED);
    out.latencySumSeconds = c(C_SUM_US) / 1e6;
    for (let k = 0; k <= BUCKET_US.length; k++) out.buckets[k] = c(C_BUCKETS + k);
    out.loadReports = c(C_REPORTS);
    out.loadReportsMalformed = c(C_BAD_REPORTS);
    out.hedges = [c(C_HEDGES), c(C_HEDGES + 1), c(C_HEDGES + 2), c(C_HEDGES + 3)];
    return out;
  }
}
