/**
 * ProxyCounters: the proxy's own counters (accepted, refused, active, bytes,
 * connection durations) in one SharedArrayBuffer, one row per proxy worker,
 * so a scrape in any thread sees every worker without messages between them.
 *
 * Each row is written by one worker only (the thread serving that row's
 * listener) and read by anyone. Counters are 64-bit as two 32-bit words
 * (src/core/counter64.ts: why its Atomics give exact counts and tear-free
 * reads). The active and held gauges are one word each (add/sub).
 *
 * These are the proxy's only counters: `TcpProxy.stats`, `collectStats()`,
 * `/metrics` and `poise top` all read them ({@link ProxyCounters.stats}),
 * so no thread is asked by message and nothing is counted twice.
 *
 * Layout of a row (words):
 *
 * | words            | field |
 * |------------------|-------|
 * | 0                | active (spliced) connections (gauge) |
 * | 1                | held connections (gauge: accepted, unread, waiting for a `maxConnections` slot) |
 * | 2 + 2k, 3 + 2k   | counter k of {@link ProxyCounter} (low, high) |
 * | after those      | one counter pair per duration bucket, the last one `+Inf` |
 *
 * Rows are padded to whole 64-byte lines, so two workers never write one line.
 *
 * Every accepted connection ends in exactly one counted outcome: refused
 * (with a reason, whatever phase it ended in — held, PROXY header,
 * connecting), closed (spliced, then finished), or lost with its worker
 * thread; until then it is open. Open is therefore not a word of its own
 * but `accepted − refused − closed − lost`: each event is one counter's
 * increment, so no worker can die between two words that had to move
 * together (a terminated thread can stop between any two `Atomics` calls,
 * even in one function — measured: 37 of 300 terminations of a loop of
 * paired adds left the pair apart).
 */
import { TWO_32, add64, read64 } from '../core/counter64.js';
import { HEADER_WORDS, openStamped, stampedBuffer } from '../core/shared-header.js';
import { integerIn } from '../core/validate.js';

/** Counter indices of a row. */
export const ProxyCounter = {
  /** Client connections accepted by the listener. */
  Accepted: 0,
  /** Refused: the connection limit was reached (admission's queue for the client's band was full). */
  RefusedMaxConnections: 1,
  /** Refused: no backend accepted (refused, unreachable, none eligible). */
  RefusedNoBackend: 2,
  /** Refused: the connect to every backend tried timed out, admission's wait timed out, or no PROXY header came in time. */
  RefusedTimeout: 3,
  /** Refused: a local resource ran out (EMFILE, ENOBUFS...), no backend blamed. */
  RefusedLocalError: 4,
  /** Refused: a malformed PROXY header. */
  RefusedBadHeader: 5,
  /** Client → backend bytes. */
  BytesIn: 6,
  /** Backend → client bytes. */
  BytesOut: 7,
  /** Spliced connections closed by an idle (client or server) timeout. */
  IdleTimeouts: 8,
  /** Sum of spliced-connection durations, microseconds. */
  DurationSumUs: 9,
  /** Accepted connections not yet finished (held, connecting, spliced) when their proxy worker thread died (counted by the owner, {@link ProxyCounters.reclaim}). */
  WorkerLost: 10,
  /** Refused: the client closed or reset before a backend was spliced (held, in its PROXY header, or while connecting). */
  RefusedClientAbort: 11,
  /** Refused: an internal error on the connection's path (closed alone, logged once per kind and window). */
  RefusedInternalError: 12,
  /** Refused: closed by the proxy's own shutdown before a backend was spliced. */
  RefusedShutdown: 13,
  /** Of `RefusedTimeout`: no complete PROXY header in time. */
  HeaderTimeouts: 14,
} as const;
/** A counter index. */
export type ProxyCounterCode = (typeof ProxyCounter)[keyof typeof ProxyCounter];

/** Why a connection was refused: the `reason` label of `poise_proxy_refused_total`. */
export type RefusalReason =
  | 'max_connections'
  | 'no_backend'
  | 'timeout'
  | 'local_error'
  | 'bad_header'
  | 'client_abort'
  | 'internal_error'
  | 'shutdown';

/** Reasons in counter order (the label values). */
export const REFUSAL_REASONS: readonly RefusalReason[] = [
  'max_connections',
  'no_backend',
  'timeout',
  'local_error',
  'bad_header',
  'client_abort',
  'internal_error',
  'shutdown',
];

const REFUSAL_COUNTER: Readonly<Record<RefusalReason, ProxyCounterCode>> = {
  max_connections: ProxyCounter.RefusedMaxConnections,
  no_backend: ProxyCounter.RefusedNoBackend,
  timeout: ProxyCounter.RefusedTimeout,
  local_error: ProxyCounter.RefusedLocalError,
  bad_header: ProxyCounter.RefusedBadHeader,
  client_abort: ProxyCounter.RefusedClientAbort,
  internal_error: ProxyCounter.RefusedInternalError,
  shutdown: ProxyCounter.RefusedShutdown,
};

/** Upper bounds (seconds) of the connection-duration buckets; a `+Inf` bucket follows. */
export const DURATION_BUCKETS_SECONDS: readonly number[] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600];

const COUNTERS = 15;
const HEAD_WORDS = 2;
const MAGIC = 0x50430004;
/** Bucket bounds in microseconds (integers, compared without a multiplication per close). */
const BUCKET_US = DURATION_BUCKETS_SECONDS.map((s) => Math.round(s * 1e6));

function rowWords(): number {
  const words = HEAD_WORDS + 2 * (COUNTERS + DURATION_BUCKETS_SECONDS.length + 1);
  return Math.ceil(words / 16) * 16;
}

/**
 * The proxy's shared counters. `TcpProxy` makes one (one row) unless given
 * one; a multi-worker proxy creates it once and hands `buffer` to every
 * worker with its row index.
 *
 * @example
 * const counters = ProxyCounters.create({ workers: 2 });
 * // in worker 1: ProxyCounters.attach(buffer) and new TcpProxy({ ..., counters, worker: 1 })
 * const accepted = counters.total(ProxyCounter.Accepted);
 */
export class ProxyCounters {
  /** The shared memory. */
  readonly buffer: SharedArrayBuffer;
  /** Rows (proxy workers). */
  readonly workers: number;
  private readonly i32: Int32Array;
  private readonly stride: number;

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    // Header words: workers, row words, bucket count (src/core/shared-header.ts).
    this.i32 = openStamped(buffer, 'ProxyCounters.attach(buffer)', 'a ProxyCounters', MAGIC, [
      undefined,
      undefined,
      DURATION_BUCKETS_SECONDS.length,
    ]);
    this.workers = Atomics.load(this.i32, 1);
    this.stride = Atomics.load(this.i32, 2);
  }

  /** Allocates counters for `workers` rows (default 1, at most 1024). Throws `InvalidConfig` naming the option. */
  static create(opts: { workers?: number } = {}): ProxyCounters {
    const workers = integerIn(opts.workers ?? 1, 'options.workers', 1, 1024);
    const stride = rowWords();
    return new ProxyCounters(stampedBuffer(MAGIC, [workers, stride, DURATION_BUCKETS_SECONDS.length], workers * stride));
  }

  /** Attaches to counters created in another thread (shared, not copied). */
  static attach(buffer: SharedArrayBuffer): ProxyCounters {
    return new ProxyCounters(buffer);
  }

  /** Checks a row index; throws `InvalidConfig` naming `field`. @internal */
  checkWorker(worker: number, field: string): number {
    return integerIn(worker, field, 0, this.workers - 1);
  }

  private base(worker: number): number {
    return HEADER_WORDS + worker * this.stride;
  }

  // --- writers (the row's own worker) ---------------------------------------

  /** Adds `n` (a non-negative integer below 2^32) to the counter pair at `p` (src/core/counter64.ts). */
  private add(p: number, n: number): void {
    add64(this.i32, p, n);
  }

  /** Counts one accepted client connection on `worker`'s row; it is open until refused or closed. @internal */
  accepted(worker: number): void {
    this.add(this.base(worker) + HEAD_WORDS + 2 * ProxyCounter.Accepted, 1);
  }

  /** Counts one refused client connection (it is no longer open). @internal */
  refused(worker: number, reason: RefusalReason): void {
    this.add(this.base(worker) + HEAD_WORDS + 2 * REFUSAL_COUNTER[reason], 1);
  }

  /** Counts bytes of one direction. @internal */
  bytes(worker: number, counter: typeof ProxyCounter.BytesIn | typeof ProxyCounter.BytesOut, n: number): void {
    this.add(this.base(worker) + HEAD_WORDS + 2 * counter, n);
  }

  /** A client is held (`delta` 1) or leaves the hold (−1). @internal */
  held(worker: number, delta: 1 | -1): void {
    Atomics.add(this.i32, this.base(worker) + 1, delta);
  }

  /** Counts one refusal for a PROXY header that did not come in time (`timeout`, and its own counter). @internal */
  headerTimeout(worker: number): void {
    this.refused(worker, 'timeout');
    this.add(this.base(worker) + HEAD_WORDS + 2 * ProxyCounter.HeaderTimeouts, 1);
  }

  /** A spliced connection opened (active + 1). @internal */
  opened(worker: number): void {
    Atomics.add(this.i32, this.base(worker), 1);
  }

  /** A spliced connection closed after `durationMs` (active − 1, one histogram observation: the closed count). @internal */
  closed(worker: number, durationMs: number, idleTimeout: boolean): void {
    const b = this.base(worker);
    const us = durationMs <= 0 ? 0 : Math.round(durationMs * 1000);
    let k = 0;
    while (k < BUCKET_US.length && us > BUCKET_US[k]!) k++;
    this.add(b + HEAD_WORDS + 2 * (COUNTERS + k), 1);
    Atomics.sub(this.i32, b, 1);
    // Bounded below 2^32 per observation (71 minutes); longer ones count in full buckets and in the sum's cap.
    this.add(b + HEAD_WORDS + 2 * ProxyCounter.DurationSumUs, us < TWO_32 ? us : TWO_32 - 1);
    if (idleTimeout) this.add(b + HEAD_WORDS + 2 * ProxyCounter.IdleTimeouts, 1);
  }

  /**
   * The owner's bookkeeping after row `worker`'s thread died (its `'exit'`),
   * before a new thread takes the row: every connection that thread had
   * accepted and not yet finished (held, reading its header, connecting or
   * spliced) died with it. They count as `WorkerLost` — the row's open
   * connections — and `active` goes to 0. Every other counter stays, so
   * the row stays cumulative over restarts and keeps the law
   * `accepted = refused + closed + lost + open`. Exact: the dead thread was
   * the row's only writer. Returns the connections lost now.
   * @internal
   */
  reclaim(worker: number): number {
    const b = this.base(worker);
    Atomics.store(this.i32, b, 0);
    Atomics.store(this.i32, b + 1, 0);
    const lost = this.open(worker);
    if (lost > 0) this.add(b + HEAD_WORDS + 2 * ProxyCounter.WorkerLost, lost);
    return Math.max(0, lost);
  }

  /** Closed spliced connections of row `worker` (the duration histogram's count). */
  closedCount(worker: number): number {
    const b = this.base(worker) + HEAD_WORDS + 2 * COUNTERS;
    let n = 0;
    for (let k = 0; k <= BUCKET_US.length; k++) n += this.read(b + 2 * k);
    return n;
  }

  // --- readers (any thread) -------------------------------------------------

  /** A 64-bit counter pair read without a torn carry (src/core/counter64.ts). */
  private read(p: number): number {
    return read64(this.i32, p);
  }

  /** Counter `counter` of row `worker`. */
  value(worker: number, counter: ProxyCounterCode): number {
    return this.read(this.base(worker) + HEAD_WORDS + 2 * counter);
  }

  /** Counter `counter` summed over every row. */
  total(counter: ProxyCounterCode): number {
    let n = 0;
    for (let w = 0; w < this.workers; w++) n += this.value(w, counter);
    return n;
  }

  /** Refusals of `reason`, summed over every row. */
  refusals(reason: RefusalReason): number {
    return this.total(REFUSAL_COUNTER[reason]);
  }

  /** Active spliced connections of row `worker` (omit for all rows). */
  active(worker?: number): number {
    if (worker !== undefined) return Atomics.load(this.i32, this.base(worker));
    let n = 0;
    for (let w = 0; w < this.workers; w++) n += Atomics.load(this.i32, this.base(w));
    return n;
  }

  /** Open connections of row `worker` (omit for all rows): accepted − refused − closed − lost. */
  open(worker?: number): number {
    if (worker === undefined) {
      let n = 0;
      for (let w = 0; w < this.workers; w++) n += this.open(w);
      return n;
    }
    return (
      this.value(worker, ProxyCounter.Accepted) -
      this.refusedCount(worker) -
      this.closedCount(worker) -
      this.value(worker, ProxyCounter.WorkerLost)
    );
  }

  /** Refusals of every reason on row `worker`. */
  refusedCount(worker: number): number {
    let n = 0;
    for (const reason of REFUSAL_REASONS) n += this.value(worker, REFUSAL_COUNTER[reason]);
    return n;
  }

  /**
   * Duration-bucket counts summed over every row, not cumulative: entry k
   * counts connections with a duration in (bound k−1, bound k]; the last
   * entry is the `+Inf` bucket.
   */
  durationBuckets(): number[] {
    const out = new Array<number>(BUCKET_US.length + 1).fill(0);
    for (let w = 0; w < this.workers; w++) {
      const b = this.base(w) + HEAD_WORDS + 2 * COUNTERS;
      for (let k = 0; k <= BUCKET_US.length; k++) out[k] = out[k]! + this.read(b + 2 * k);
    }
    return out;
  }

  /**
   * The {@link TcpProxyStats} of rows `first` .. `first + rows − 1` summed
   * (default every row): the figures `TcpProxy.stats` and `collectStats()`
   * report, read from the shared words alone.
   */
  stats(first = 0, rows = this.workers - first): TcpProxyStats {
    const s = freshProxyStats();
    for (let w = first; w < first + rows; w++) {
      const b = this.base(w);
      s.accepted += this.value(w, ProxyCounter.Accepted);
      s.held += Atomics.load(this.i32, b + 1);
      s.active += Atomics.load(this.i32, b);
      const header = this.value(w, ProxyCounter.HeaderTimeouts);
      s.failed +=
        this.value(w, ProxyCounter.RefusedNoBackend) +
        this.value(w, ProxyCounter.RefusedLocalError) +
        this.value(w, ProxyCounter.RefusedMaxConnections) +
        this.value(w, ProxyCounter.RefusedTimeout) -
        header;
      s.localErrors += this.value(w, ProxyCounter.RefusedLocalError);
      s.timeouts += header + this.value(w, ProxyCounter.IdleTimeouts);
      s.badHeaders += this.value(w, ProxyCounter.RefusedBadHeader);
      s.bytesIn += this.value(w, ProxyCounter.BytesIn);
      s.bytesOut += this.value(w, ProxyCounter.BytesOut);
    }
    return s;
  }
}

/** A proxy's connection figures, read from its {@link ProxyCounters} (summed over the threads asked for). */
export interface TcpProxyStats {
  /** Client connections accepted (held ones included). */
  accepted: number;
  /** Accepted clients held now, unread, because `maxConnections` were in use. */
  held: number;
  /** Spliced pairs open now. */
  active: number;
  /** Inbound connections closed because no backend accepted or admission refused them (local errors included). */
  failed: number;
  /** Of `failed`: refused because of this host's resources (EMFILE, ENFILE, ENOBUFS, ...), never blamed on a backend. */
  localErrors: number;
  /** Connections closed by the client, server or PROXY-header timeout. */
  timeouts: number;
  /** Connections closed for a malformed PROXY header. */
  badHeaders: number;
  /** Client → backend bytes. */
  bytesIn: number;
  /** Backend → client bytes. */
  bytesOut: number;
}

/** All zeros. @internal */
export function freshProxyStats(): TcpProxyStats {
  return { accepted: 0, held: 0, active: 0, failed: 0, localErrors: 0, timeouts: 0, badHeaders: 0, bytesIn: 0, bytesOut: 0 };
}
