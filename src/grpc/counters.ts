/**
 * GrpcCounters: per-backend gRPC call counters in one SharedArrayBuffer, so
 * that a scrape in the owner thread sees the calls of every thread's
 * channels (as HttpCounters does for the HTTP dispatcher, http/counters.ts).
 * This file loads no package: `collectMetrics` reads it without loading
 * grpc-js.
 *
 * One row per LoadTable slot, keyed by (slot, generation) (a
 * `GenerationRows` table: core/slot-rows.ts), of 64-bit counters: calls
 * started, calls ended by status class ({@link GRPC_STATUS_CLASSES}),
 * retries granted and refused by the retry budget, ORCA trailers read and
 * malformed. Row: 2 head words + 2 × 11 counters = 24 words, padded to 32.
 */
import { invalidConfig } from '../core/errors.js';
import { HEADER_WORDS, openStamped, stampedBuffer } from '../core/shared-header.js';
import { GenerationRows } from '../core/slot-rows.js';
import { integerIn } from '../core/validate.js';

/** Status classes of ended calls, in counter order (the `status_class` label values). */
export const GRPC_STATUS_CLASSES = ['ok', 'cancelled', 'deadline_exceeded', 'resource_exhausted', 'unavailable', 'error'] as const;

/** What one backend's row holds (one generation of one slot). */
export interface GrpcBackendFigures {
  /** Calls started on the backend (grpc-js's `onCallStarted`). */
  started: number;
  /** Calls ended, by status class, in {@link GRPC_STATUS_CLASSES} order. */
  ended: number[];
  /** Retries (grpc-js's retry policy) the retry budget let through to this backend. */
  retries: number;
  /** Retries the retry budget refused (dropped with UNAVAILABLE) when this backend was picked. */
  retriesRefused: number;
  /** `endpoint-load-metrics-bin` trailers read. */
  loadReports: number;
  /** `endpoint-load-metrics-bin` trailers ignored: not a report. */
  loadReportsMalformed: number;
}

const MAGIC = 0x47430001;
const ROW_WORDS = 32;
const C_STARTED = 0;
const C_ENDED = 1;
const C_RETRIES = C_ENDED + GRPC_STATUS_CLASSES.length;
const C_REFUSED = C_RETRIES + 1;
const C_REPORTS = C_REFUSED + 1;
const C_BAD_REPORTS = C_REPORTS + 1;
const COUNTERS = C_BAD_REPORTS + 1;

/** A status code's class (index into {@link GRPC_STATUS_CLASSES}). @internal */
export function statusClass(code: number): number {
  switch (code) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 4:
      return 2;
    case 8:
      return 3;
    case 14:
      return 4;
    default:
      return 5;
  }
}

/**
 * The `poise` channels' shared counters. Create them in the owner thread
 * with the balancer's table capacity, hand `buffer` to worker threads
 * (`GrpcCounters.attach`), pass them to every thread's
 * `registerPoiseCluster(name, target, { counters })` and to
 * `collectMetrics` (`grpc`).
 *
 * @example
 * const counters = GrpcCounters.create({ capacity: balancer.table.capacity });
 * registerPoiseCluster('orders', balancer, { counters });
 * collectMetrics(balancer, { registry, grpc: counters });
 */
export class GrpcCounters {
  /** The shared memory. */
  readonly buffer: SharedArrayBuffer;
  /** Rows: the LoadTable's slot capacity. */
  readonly capacity: number;
  private readonly rows: GenerationRows;

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    const i32 = openStamped(buffer, 'GrpcCounters.attach(buffer)', 'a GrpcCounters', MAGIC, [undefined, COUNTERS]);
    this.capacity = Atomics.load(i32, 1);
    this.rows = new GenerationRows(i32, HEADER_WORDS, this.capacity, ROW_WORDS, COUNTERS);
  }

  /** Allocates counters for a table of `capacity` slots (`balancer.table.capacity`). Throws `InvalidConfig` naming the option. */
  static create(opts: { capacity: number }): GrpcCounters {
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    const capacity = integerIn(opts.capacity, 'options.capacity', 1, 1 << 20, 'balancer.table.capacity');
    return new GrpcCounters(stampedBuffer(MAGIC, [capacity, COUNTERS], capacity * ROW_WORDS));
  }

  /** Attaches to counters created in another thread (shared, not copied). */
  static attach(buffer: SharedArrayBuffer): GrpcCounters {
    return new GrpcCounters(buffer);
  }

  /** Adds one to counter `k` of backend (slot, generation): a thread holding a lease on it. */
  private bump(slot: number, generation: number, k: number): void {
    const row = this.rows.writable(slot, generation);
    if (row >= 0) this.rows.add(row, k, 1);
  }

  /** A call started on the backend. @internal */
  started(slot: number, generation: number): void {
    this.bump(slot, generation, C_STARTED);
  }

  /** A call ended with status `code`; `report`: its ORCA trailer (0 none, 1 read, 2 malformed). @internal */
  ended(slot: number, generation: number, code: number, report: 0 | 1 | 2): void {
    this.bump(slot, generation, C_ENDED + statusClass(code));
    if (report !== 0) this.bump(slot, generation, report === 1 ? C_REPORTS : C_BAD_REPORTS);
  }

  /** A retry picked this backend (`refused`: the retry budget said no). @internal */
  retry(slot: number, generation: number, refused: boolean): void {
    this.bump(slot, generation, refused ? C_REFUSED : C_RETRIES);
  }

  /** The figures of backend (slot, generation): zeros while its row holds an older generation's counts. */
  figures(slot: number, generation: number): GrpcBackendFigures {
    const out: GrpcBackendFigures = {
      started: 0,
      ended: GRPC_STATUS_CLASSES.map(() => 0),
      retries: 0,
      retriesRefused: 0,
      loadReports: 0,
      loadReportsMalformed: 0,
    };
    const row = this.rows.readable(slot, generation);
    if (row < 0) return out;
    const c = (k: number): number => this.rows.read(row, k);
    out.started = c(C_STARTED);
    for (let k = 0; k < GRPC_STATUS_CLASSES.length; k++) out.ended[k] = c(C_ENDED + k);
    out.retries = c(C_RETRIES);
    out.retriesRefused = c(C_REFUSED);
    out.loadReports = c(C_REPORTS);
    out.loadReportsMalformed = c(C_BAD_REPORTS);
    return out;
  }
}
