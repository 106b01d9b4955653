/**
 * HttpCounters: per-backend request counters and a latency histogram for the
 * HTTP dispatcher, in one SharedArrayBuffer, so that a scrape in the owner
 * thread sees the requests of every thread's dispatcher (like the LoadTable,
 * and unlike prom-client's own metrics, which live in the thread that
 * observes).
 *
 * One row per LoadTable slot. A row holds the counts of one slot generation
 * (one backend): its first word names that generation. Every count is
 * written while the writer holds a lease on (slot, generation), and the
 * owner reuses a slot only once its lease counts read zero, so by the time a
 * new generation exists, every write of the older ones has happened. The
 * first writer of a new generation takes the old counts out: it reads them,
 * moves the row's generation word from the old value to the new one with a
 * compare-and-swap, and, if it won, subtracts what it read. No writer of the
 * new generation can have added before the swap (they add only once the
 * word names their generation), so exactly the old counts are removed, and
 * writers never wait for one another.
 *
 * Counters are 64-bit as two 32-bit words (low, high): an add (or subtract)
 * on the low word returns the old value, and the operation that carried (or
 * borrowed) across 2^32 adjusts the high word. Additions commute, so the
 * pair is exact once the operations are done; a reader takes high, low,
 * high again and retries while the high word moved.
 *
 * Row layout (words), padded to 48 (three 64-byte lines):
 *
 * | words          | field |
 * |----------------|-------|
 * | 0              | generation of the counts (bit 30: being reset) |
 * | 1              | reserved |
 * | 2 + 2k, 3 + 2k | counter k: outcomes (success, failure, overload, cancelled), retries, refused retries, latency sum (µs), then one per latency bucket, the last `+Inf`, then load reports read from responses and load reports malformed |
 */
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
}

const MAGIC = 0x48430002;
const HEADER_WORDS = 16;
const ROW_WORDS = 48;
const HEAD = 2;
const C_RETRIES = 4;
const C_REFUSED = 5;
const C_SUM_US = 6;
const C_BUCKETS = 7;
const BUSY = 1 << 30;
const GEN_MASK = BUSY - 1;
const TWO_32 = 4294967296;
const BUCKET_US = LATENCY_BUCKETS_SECONDS.map((s) => Math.round(s * 1e6));
const C_REPORTS = C_BUCKETS + BUCKET_US.length + 1;
const C_BAD_REPORTS = C_REPORTS + 1;
const COUNTERS = C_BAD_REPORTS + 1;
// Every counter pair fits the row: HEAD + 2 × COUNTERS <= ROW_WORDS (2 + 46 = 48).

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
  private readonly i32: Int32Array;

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    this.i32 = new Int32Array(buffer);
    // Written once before the buffer is shared; loaded through Atomics like every shared word.
    if (Atomics.load(this.i32, 0) !== MAGIC || Atomics.load(this.i32, 2) !== BUCKET_US.length) {
      invalidConfig('buffer', 'is not an HttpCounters buffer of this poise-lb version');
    }
    this.capacity = Atomics.load(this.i32, 1);
  }

  /** Allocates counters for a table of `capacity` slots (`balancer.table.capacity`). Throws `InvalidConfig` naming the option. */
  static create(opts: { capacity: number }): HttpCounters {
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    const capacity = integerIn(opts.capacity, 'options.capacity', 1, 1 << 20, 'balancer.table.capacity');
    const buffer = new SharedArrayBuffer((HEADER_WORDS + capacity * ROW_WORDS) * 4);
    const i32 = new Int32Array(buffer);
    Atomics.store(i32, 1, capacity);
    Atomics.store(i32, 2, BUCKET_US.length);
    Atomics.store(i32, 0, MAGIC);
    return new HttpCounters(buffer);
  }

  /** Attaches to counters created in another thread (shared, not copied). */
  static attach(buffer: SharedArrayBuffer): HttpCounters {
    if (!(buffer instanceof SharedArrayBuffer)) invalidConfig('HttpCounters.attach(buffer)', 'must be a SharedArrayBuffer', buffer);
    return new HttpCounters(buffer);
  }

  // --- writers (a thread holding a lease on (slot, generation)) ---------------

  /**
   * Counts one attempt's outcome and, when `latencyMs >= 0`, its latency to
   * response headers. The caller still holds the lease. @internal
   */
  record(slot: number, generation: number, outcome: number, latencyMs: number): void {
    const row = this.row(slot, generation);
    if (row < 0) return;
    this.add(row + HEAD + 2 * outcome, 1);
    if (latencyMs < 0) return;
    const us = Math.round(latencyMs * 1000);
    // One observation adds below 2^32 µs (71 minutes); a longer one counts in full in its bucket.
    this.add(row + HEAD + 2 * C_SUM_US, us < TWO_32 ? us : TWO_32 - 1);
    let k = 0;
    while (k < BUCKET_US.length && us > BUCKET_US[k]!) k++;
    this.add(row + HEAD + 2 * (C_BUCKETS + k), 1);
  }

  /** Counts a retry of a request that failed on this backend (`refused`: the budget said no). @internal */
  retry(slot: number, generation: number, refused: boolean): void {
    const row = this.row(slot, generation);
    if (row >= 0) this.add(row + HEAD + 2 * (refused ? C_REFUSED : C_RETRIES), 1);
  }

  /** Counts a load report read from a response header (`malformed`: ignored, not in the documented form). @internal */
  loadReport(slot: number, generation: number, malformed: boolean): void {
    const row = this.row(slot, generation);
    if (row >= 0) this.add(row + HEAD + 2 * (malformed ? C_BAD_REPORTS : C_REPORTS), 1);
  }

  /** The row of (slot, generation), its older counts taken out first if it held another generation; -1 out of range. */
  private row(slot: number, generation: number): number {
    if (slot < 0 || slot >= this.capacity) return -1;
    const row = HEADER_WORDS + slot * ROW_WORDS;
    const gen = generation & GEN_MASK;
    // SC load: pairs with the compare-and-swap below, so a writer that sees
    // its generation here adds after the reset took the old counts out.
    const held = Atomics.load(this.i32, row);
    if (held !== gen && held !== (gen | BUSY)) this.reset(row, held, gen);
    return row;
  }

  /**
   * Takes an older generation's counts out of a row (see the file comment):
   * they are final (no lease of that generation is open), so they are read
   * first; the swap names the new generation, and only its winner subtracts.
   * Writers that see the new word meanwhile add at once: additions commute.
   */
  private reset(row: number, held: number, gen: number): void {
    const old = new Float64Array(COUNTERS);
    for (let k = 0; k < COUNTERS; k++) old[k] = this.read(row + HEAD + 2 * k);
    // Only one writer moves the word from `held`; a loser's snapshot is discarded.
    if (Atomics.compareExchange(this.i32, row, held, gen | BUSY) !== held) return;
    for (let k = 0; k < COUNTERS; k++) if (old[k]! > 0) this.sub(row + HEAD + 2 * k, old[k]!);
    // Readers skip a row marked BUSY; the store publishes the finished reset.
    Atomics.store(this.i32, row, gen);
  }

  /** Adds `n` (an integer in [0, 2^32)) to the pair at `p`. */
  private add(p: number, n: number): void {
    // The add returns the old low word: exactly the operation that crossed
    // 2^32 sees old + n >= 2^32, and it alone carries into the high word.
    const before = Atomics.add(this.i32, p, n) >>> 0;
    if (before + n >= TWO_32) Atomics.add(this.i32, p + 1, 1);
  }

  /** Subtracts `v` (a 64-bit count below 2^53) from the pair at `p`. */
  private sub(p: number, v: number): void {
    const lo = v % TWO_32;
    const hi = Math.floor(v / TWO_32);
    // As in add(): the subtraction that went below 0 borrows from the high word.
    const before = Atomics.sub(this.i32, p, lo | 0) >>> 0;
    if (before < lo) Atomics.sub(this.i32, p + 1, 1);
    if (hi > 0) Atomics.sub(this.i32, p + 1, hi | 0);
  }

  // --- readers (any thread) ---------------------------------------------------

  /** A pair read without a torn carry. */
  private read(p: number): number {
    for (;;) {
      const hi = Atomics.load(this.i32, p + 1);
      const lo = Atomics.load(this.i32, p) >>> 0;
      if (Atomics.load(this.i32, p + 1) === hi) return (hi >>> 0) * TWO_32 + lo;
    }
  }

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
    };
    if (slot < 0 || slot >= this.capacity) return out;
    const row = HEADER_WORDS + slot * ROW_WORDS;
    if (Atomics.load(this.i32, row) !== (generation & GEN_MASK)) return out;
    const c = (k: number): number => this.read(row + HEAD + 2 * k);
    out.outcomes = [c(0), c(1), c(2), c(3)];
    out.retries = c(C_RETRIES);
    out.retriesRefused = c(C_REFUSED);
    out.latencySumSeconds = c(C_SUM_US) / 1e6;
    for (let k = 0; k <= BUCKET_US.length; k++) out.buckets[k] = c(C_BUCKETS + k);
    out.loadReports = c(C_REPORTS);
    out.loadReportsMalformed = c(C_BAD_REPORTS);
    return out;
  }
}
