/**
 * LoadTable: the one SharedArrayBuffer every thread balances over — and the
 * only file that knows its offsets.
 *
 * Layout (all words are 32-bit, accessed only through `Atomics` on an
 * `Int32Array` view; nothing is ever read as a plain `Float64`):
 *
 * | region       | words                              | contents |
 * |--------------|------------------------------------|----------|
 * | header       | 32 (two 64-byte lines)             | layout version, capacity, thread rows, change / membership / health epochs, spec seqlock + length, PeakEWMA τ and initial value, rows in use; the spec blob's changed ranges |
 * | row owners   | `maxThreads`, rounded up to 16     | thread id + 1 of the thread that claimed attribution row r (0 = free) |
 * | row totals   | 16 per row (one 64-byte line each) | row r: word 0 the request leases, word 1 the connection leases thread r holds over all slots |
 * | slots        | 32 per slot (128 bytes, line-aligned)| see the slot table below |
 * | lease cells  | `capacity × cellStride`            | slot s, row r: the connection and request leases thread r holds on s (slot-major, each slot's cells line-aligned) |
 * | spec blob    | `specBytes / 4`                    | the owner's UTF-8 spec text for every live slot, under a seqlock |
 *
 * Lease counts are not kept in one shared word per slot: a slot's count of a
 * kind is the sum of its cells over the rows in use, and each cell is written
 * only by the thread that owns the row. Taking or returning a lease is
 * therefore exactly one atomic read-modify-write, on the caller's own cell —
 * there is no second word that a worker terminated at the wrong instant could
 * leave unwritten, so counts stay exact wherever V8 stops a thread (it stops
 * only between operations, and a single `Atomics.add` either happened or did
 * not: the memory is the truth). When a thread has exited, the owner zeroes
 * its row's cells (`reclaimRow`), which is exact because no other thread
 * writes them and the dead one never will again. Cells never go negative: a
 * lease is released by the router (so the thread) that took it.
 *
 * Each row also keeps its totals over all slots (the row-totals region), so
 * the pool-wide figure an admission gate or a bounded-load hash needs is a
 * sum over rows in use, not a scan of every backend. A lease is then two
 * single-writer adds (cell, then the row total). A thread terminated between
 * the two leaves its own total one off its cells only until the owner
 * reclaims the row, which zeroes both: exactness after reclaim is unchanged,
 * and while the thread lives its own next operation finishes the pair.
 *
 * The price is on the read side: a count is `rows in use` loads instead of
 * one. Rows are claimed lowest-first and a slot's first 8 rows share one
 * 64-byte line, so with up to 8 threads attached a count reads one line —
 * the line every writer of that slot touches anyway, as a shared counter's
 * line would be.
 *
 * Slot words (two 64-byte cache lines per backend, so two threads hammering
 * two backends never share a line; the hot path touches only the first — the
 * second holds the owner's health word, read when a view is rebuilt):
 *
 * | word | field          | unit / encoding |
 * |------|----------------|-----------------|
 * | 0    | tag            | `generation << 3 | state` (state: 0 free, 1 ready, 2 unavailable, 3 draining, 4 removed, 5 closing) |
 * | 1    | weight         | uint32 bits |
 * | 2    | priority       | uint32 bits |
 * | 3    | locality       | interned index (the Balancer's table of locality strings) |
 * | 4    | locality weight| uint32 bits |
 * | 5    | ejections      | consecutive ejections (the backoff exponent) |
 * | 6    | interval ok    | successes released since the owner's outlier detector last read it (Atomics.add by routers, Atomics.exchange to 0 by the owner) |
 * | 7    | interval fail  | failures released since the owner last read it (same protocol) |
 * | 8    | ewma lock      | seqlock word: `version << 8 | (writer row + 1)`; low byte 0 = unlocked |
 * | 9    | connect est    | PeakEWMA connect time, integer microseconds |
 * | 10   | connect at     | its last update, shared-clock milliseconds mod 2^30 |
 * | 11   | latency est    | PeakEWMA request latency, integer microseconds |
 * | 12   | latency at     | its last update, shared-clock milliseconds mod 2^30 |
 * | 13   | failures       | consecutive failures (bits 0–29); bit 30 set by an ejection until a success clears it, so a success reads one word to learn whether anything needs clearing |
 * | 14   | ejected until  | shared-clock milliseconds mod 2^30; 0 = not ejected |
 * | 15   | picks          | leases granted on this slot (wraps at 2^32; each router adds in batches of 64) |
 * | 16   | health         | owner-written flags: bit 0 active check unhealthy, bit 1 active check degraded, bit 2 membership degraded |
 * | 17   | ejections total| every ejection of this occupant (never reset by a success; wraps at 2^32) — the metrics counter |
 * | 18–31| reserved       | 0 |
 *
 * Times are whole milliseconds of one shared monotonic clock (see
 * `runtime/clock.ts`), kept modulo 2^30 (small integers: docs/internals.md) and compared by wrapping difference, so they stay correct
 * for intervals below 2^29 ms (6.2 days).
 */

import { PoiseError, invalidConfig } from '../core/errors.js';
import { elapsedMs, wrapMs } from '../core/time.js';
import { integerIn, numberIn } from '../core/validate.js';

/** Slot states (the low 3 bits of the tag word). */
export const SlotState = {
  Free: 0,
  Ready: 1,
  Unavailable: 2,
  Draining: 3,
  Removed: 4,
  Closing: 5,
} as const;
/** A slot state code. */
export type SlotStateCode = (typeof SlotState)[keyof typeof SlotState];

/** Lease kinds: which counter a lease holds. */
export const LeaseKind = { Request: 0, Connection: 1 } as const;
/** A lease kind code. */
export type LeaseKindCode = (typeof LeaseKind)[keyof typeof LeaseKind];

/** PeakEWMA series kept per slot. */
export const EwmaSeries = { ConnectTime: 0, Latency: 1 } as const;
/** A PeakEWMA series code. */
export type EwmaSeriesCode = (typeof EwmaSeries)[keyof typeof EwmaSeries];

/** The layout version in header word 0; an attachment with another version is refused. @internal */
export const LAYOUT_VERSION = 0x504f0005;

// Header words.
const H_VERSION = 0;
const H_CAPACITY = 1;
const H_THREADS = 2;
const H_CHANGE_EPOCH = 3;
const H_MEMBER_EPOCH = 4;
const H_HEALTH_EPOCH = 5;
const H_SPEC_SEQ = 6;
const H_SPEC_LEN = 7;
const H_TAU_MS = 8;
const H_INITIAL_US = 9;
/** Rows in use: one more than the highest row ever claimed (raised by claimRow, never lowered). */
const H_ROWS = 10;
const H_SLOT_BASE = 12;
const H_SPEC_WORDS = 13;
/**
 * The two word ranges (from, to) of the spec blob that the last publication
 * changed, relative to the one before it (seq − 2): a reader holding that
 * one copies only these. Under the seqlock, like the blob.
 */
const H_SPEC_RANGES = 16;
const HEADER_WORDS = 32;
/** Words of one row's totals: a whole line, so rows never share one. */
const TOTAL_WORDS = 16;

// Slot words.
const S_TAG = 0;
const S_WEIGHT = 1;
const S_PRIORITY = 2;
const S_LOCALITY = 3;
const S_LOCALITY_WEIGHT = 4;
const S_EJECTIONS = 5;
const S_INTERVAL_OK = 6;
const S_INTERVAL_FAIL = 7;
const S_EWMA_LOCK = 8;
const S_CONNECT_EST = 9;
const S_CONNECT_AT = 10;
const S_LATENCY_EST = 11;
const S_LATENCY_AT = 12;
const S_FAILURES = 13;
const S_EJECTED_UNTIL = 14;
const S_PICKS = 15;
const S_HEALTH = 16;
const S_EJECTIONS_TOTAL = 17;
/** Words per slot: 32 × 4 bytes = two 64-byte cache lines. @internal */
export const SLOT_WORDS = 32;

/** Bits of the slot health word (owner-written; routers read them when they rebuild a view). */
export const HealthFlag = {
  /** The active check has failed `fall` times in a row (cleared after `rise` passes). */
  Unhealthy: 1,
  /** The active check reported degraded (a header, a slow reply, a custom verdict). */
  CheckDegraded: 2,
  /** The membership marks the backend `degraded`. */
  MemberDegraded: 4,
} as const;

const MAX_US = 0x7fffffff;
/** Failures word: bit 30 = "ejections to clear" (set by eject, cleared by a success). */
const EJECTED_FLAG = 0x40000000;
const FAILURE_MASK = EJECTED_FLAG - 1;

/** Options of {@link LoadTable.create}. @internal */
export interface LoadTableOptions {
  /** Slots (live backends plus draining tombstones); default 1024, at most 65536. */
  capacity?: number;
  /** Attribution rows: threads that may attach routers at once; default 64, at most 255. */
  maxThreads?: number;
  /** Bytes reserved for the spec blob (ids, addresses); default `capacity × 1024`. */
  specBytes?: number;
  /** PeakEWMA decay constant τ in ms, shared by every router; default 1000 (Sōzu). */
  tauMs?: number;
  /** PeakEWMA value of a never-measured backend, in ms; default 50 (Sōzu). */
  initialMs?: number;
  /**
   * `'padded'` (default) starts the slot array on a 64-byte boundary so each
   * slot owns one cache line. `'unaligned'` shifts it by 32 bytes so every slot
   * straddles two lines shared with its neighbours — only for the benchmark
   * that shows what the alignment is worth.
   */
  layout?: 'padded' | 'unaligned';
}

/** The per-slot fields the owner writes when it assigns or updates a slot. @internal */
export interface SlotFields {
  weight: number;
  priority: number;
  locality: number;
  localityWeight: number;
}

/** A consistent-enough snapshot of one slot, for tests, stats and the owner. */
export interface SlotStats {
  generation: number;
  state: SlotStateCode;
  weight: number;
  priority: number;
  locality: number;
  localityWeight: number;
  connections: number;
  requests: number;
  connectEstimateUs: number;
  connectAtMs: number;
  latencyEstimateUs: number;
  latencyAtMs: number;
  failures: number;
  ejections: number;
  /** Every ejection of this occupant (a success does not reset it). */
  ejectionsTotal: number;
  /** The health word ({@link HealthFlag} bits). */
  health: number;
  /** Successes and failures counted since the owner last took the interval. */
  intervalSuccesses: number;
  intervalFailures: number;
  ejectedUntilMs: number;
  picks: number;
}

/** Words of lease cells per slot: two per row, rounded up to whole 64-byte lines. */
function cellStride(maxThreads: number): number {
  return roundUp(maxThreads * 2, 16);
}

/**
 * The shared table of per-backend load. The Balancer creates it in the owner
 * thread; other threads {@link LoadTable.attach} to the attachment's buffer.
 *
 * Its public members only read. The writers (slot tags and fields, lease
 * cells, samples, failures, epochs, the spec blob) are internal: the
 * Balancer and the routers call them, and a stray call from anywhere else
 * corrupts counters every thread relies on. `balancer.table` is a
 * {@link LoadTableView}, which has no writers at all.
 *
 * @example
 * // in a worker, given balancer.attachment() in workerData
 * const table = LoadTable.attach(workerData.attachment.buffer);
 * const inFlight = table.requests(0);
 */
export class LoadTable {
  /** The shared memory. */
  readonly buffer: SharedArrayBuffer;
  /** Slots. */
  readonly capacity: number;
  /** Attribution rows. */
  readonly maxThreads: number;
  /** PeakEWMA decay constant, ms. */
  readonly tauMs: number;
  /** PeakEWMA value of an unmeasured backend, ms. */
  readonly initialMs: number;
  private readonly i32: Int32Array;
  private readonly ownerBase: number;
  private readonly totalsBase: number;
  private readonly slotBase: number;
  private readonly attrBase: number;
  /** Words of lease cells per slot. */
  private readonly stride: number;
  private readonly specBase: number;
  private readonly specWords: number;
  /**
   * `decay[k] = Math.exp(-k / tauMs)` for k in [0, DECAY_STEPS): elapsed
   * times are whole milliseconds, so reads look the factor up instead of
   * calling Math.exp. Same expression, so the same doubles bit for bit;
   * longer intervals fall back to Math.exp.
   */
  private readonly decay: Float64Array;
  /** Owner: the words of the spec blob as last published by this instance (the single writer), to store only what changed. */
  private published = new Int32Array(0);
  /** Reader: the last blob copy this instance returned (its first `heldWords` words), and the sequence number it was read at. */
  private held: Int32Array | undefined;
  private heldWords = 0;
  private heldSeq = 0;
  /** Reader: the buffer the next copy goes into (the one before `held`): two buffers alternate, so a copy allocates nothing. */
  private spare: Int32Array | undefined;

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    this.i32 = new Int32Array(buffer);
    // Header words are written once before the buffer is shared; the load
    // still goes through Atomics so every access to shared memory does.
    if (Atomics.load(this.i32, H_VERSION) !== LAYOUT_VERSION) {
      invalidConfig(
        'buffer',
        `is not a LoadTable of layout version ${LAYOUT_VERSION.toString(16)} (same poise-lb version in every thread)`,
      );
    }
    this.capacity = Atomics.load(this.i32, H_CAPACITY);
    this.maxThreads = Atomics.load(this.i32, H_THREADS);
    this.tauMs = Atomics.load(this.i32, H_TAU_MS);
    this.initialMs = Atomics.load(this.i32, H_INITIAL_US) / 1000;
    this.decay = new Float64Array(DECAY_STEPS);
    for (let k = 0; k < DECAY_STEPS; k++) this.decay[k] = Math.exp(-k / this.tauMs);
    this.ownerBase = HEADER_WORDS;
    this.totalsBase = HEADER_WORDS + roundUp(this.maxThreads, 16);
    this.slotBase = Atomics.load(this.i32, H_SLOT_BASE);
    this.attrBase = roundUp(this.slotBase + this.capacity * SLOT_WORDS, 16);
    this.stride = cellStride(this.maxThreads);
    this.specBase = this.attrBase + this.capacity * this.stride;
    this.specWords = Atomics.load(this.i32, H_SPEC_WORDS);
  }

  /** Allocates and initialises a table (owner thread). Throws `PoiseError` `InvalidConfig` naming a bad option. @internal */
  static create(opts: LoadTableOptions = {}): LoadTable {
    const capacity = integerIn(opts.capacity ?? 1024, 'options.capacity', 1, 65536);
    const maxThreads = integerIn(opts.maxThreads ?? 64, 'options.maxThreads', 1, 255);
    const specBytes = integerIn(opts.specBytes ?? capacity * 1024, 'options.specBytes', 1024, 1 << 30);
    const tauMs = integerIn(opts.tauMs ?? 1000, 'options.tauMs', 1, 86_400_000);
    const initialMs = numberIn(opts.initialMs ?? 50, 'options.initialMs', 0, MAX_US / 1000);
    const layout = opts.layout ?? 'padded';
    if (layout !== 'padded' && layout !== 'unaligned') invalidConfig('options.layout', 'must be "padded" or "unaligned"', layout);
    const slotBase = HEADER_WORDS + roundUp(maxThreads, 16) + maxThreads * TOTAL_WORDS + (layout === 'unaligned' ? 8 : 0);
    const attrBase = roundUp(slotBase + capacity * SLOT_WORDS, 16);
    const specWords = Math.ceil(specBytes / 4);
    const words = attrBase + capacity * cellStride(maxThreads) + specWords;
    const buffer = new SharedArrayBuffer(words * 4);
    const i32 = new Int32Array(buffer);
    // Initialisation happens before any other thread can see the buffer;
    // Atomics.store is used anyway so that no access to shared memory is plain.
    Atomics.store(i32, H_CAPACITY, capacity);
    Atomics.store(i32, H_THREADS, maxThreads);
    Atomics.store(i32, H_TAU_MS, tauMs);
    Atomics.store(i32, H_INITIAL_US, Math.round(initialMs * 1000));
    Atomics.store(i32, H_SLOT_BASE, slotBase);
    Atomics.store(i32, H_SPEC_WORDS, specWords);
    Atomics.store(i32, H_VERSION, LAYOUT_VERSION);
    return new LoadTable(buffer);
  }

  /** Attaches to a table created in another thread (the buffer is shared, not copied). */
  static attach(buffer: SharedArrayBuffer): LoadTable {
    if (!(buffer instanceof SharedArrayBuffer)) invalidConfig('LoadTable.attach(buffer)', 'must be a SharedArrayBuffer', buffer);
    return new LoadTable(buffer);
  }

  // --- epochs ---------------------------------------------------------------

  /** The epoch that moves on every membership or health change: one load per acquire. @internal */
  changeEpoch(): number {
    // A sequentially consistent load: everything the writer stored before its
    // Atomics.add on this word (slot tags, the spec blob) is visible after it.
    return Atomics.load(this.i32, H_CHANGE_EPOCH);
  }

  /** The membership epoch (moves when slots or specs change). */
  membershipEpoch(): number {
    return Atomics.load(this.i32, H_MEMBER_EPOCH);
  }

  /** The health epoch (moves when a backend is ejected). */
  healthEpoch(): number {
    return Atomics.load(this.i32, H_HEALTH_EPOCH);
  }

  /** Publishes a membership change: bumps the membership epoch, then the change epoch. @internal */
  bumpMembershipEpoch(): number {
    // add (not store): several writers may bump; SC ordering makes the
    // membership epoch visible before the change epoch that announces it.
    const e = Atomics.add(this.i32, H_MEMBER_EPOCH, 1) + 1;
    Atomics.add(this.i32, H_CHANGE_EPOCH, 1);
    this.wakeChangeWaiters();
    return e;
  }

  /** Publishes a health change (an ejection): bumps the health epoch, then the change epoch. @internal */
  bumpHealthEpoch(): number {
    // Any router may eject; add keeps concurrent bumps from being lost.
    const e = Atomics.add(this.i32, H_HEALTH_EPOCH, 1) + 1;
    Atomics.add(this.i32, H_CHANGE_EPOCH, 1);
    this.wakeChangeWaiters();
    return e;
  }

  /**
   * Wakes every thread blocked in {@link waitForChange}; returns how many
   * were woken. The epoch bumps call it after their add. @internal
   */
  wakeChangeWaiters(): number {
    return Atomics.notify(this.i32, H_CHANGE_EPOCH);
  }

  /**
   * Blocks this thread until the change epoch differs from `seen`, for at
   * most `timeoutMs`; returns whether it moved. For a router whose lease was
   * refused because a slot's tag changed while the epoch that announces the
   * change has not moved yet: the owner is between its tag stores and its
   * epoch bump, which is microseconds of straight-line code.
   * @internal
   */
  waitForChange(seen: number, timeoutMs: number): boolean {
    const i = this.i32;
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      // Atomics.wait compares and sleeps atomically: a bump that lands
      // before it returns 'not-equal' at once; one that lands after it is
      // followed by the bumper's notify, so no wake-up is lost. A wake-up
      // without a bump (another notifier) re-checks and sleeps for the rest.
      const left = deadline - performance.now();
      if (Atomics.load(i, H_CHANGE_EPOCH) !== seen) return true;
      if (left <= 0) return false;
      Atomics.wait(i, H_CHANGE_EPOCH, seen, left);
    }
  }

  // --- slot identity (written by the owner only) ----------------------------

  /** The tag word `generation << 3 | state`. @internal */
  tag(slot: number): number {
    // Tags are written only by the owner with Atomics.store; a load sees either
    // the old or the new tag, never a mix.
    return Atomics.load(this.i32, this.slotBase + slot * SLOT_WORDS + S_TAG);
  }

  /** Owner: sets the tag (generation and state) of a slot. @internal */
  setTag(slot: number, generation: number, state: SlotStateCode): void {
    // Single writer (the owner thread); store publishes it to every reader.
    Atomics.store(this.i32, this.slotBase + slot * SLOT_WORDS + S_TAG, ((generation & 0x0fffffff) << 3) | state);
  }

  /** Owner: writes the descriptive fields of a slot. @internal */
  writeFields(slot: number, f: SlotFields): void {
    const o = this.slotBase + slot * SLOT_WORDS;
    // Single writer; readers of these words use them only as statistics (the
    // routers take weights from the spec blob), so per-word atomicity suffices.
    Atomics.store(this.i32, o + S_WEIGHT, f.weight | 0);
    Atomics.store(this.i32, o + S_PRIORITY, f.priority | 0);
    Atomics.store(this.i32, o + S_LOCALITY, f.locality | 0);
    Atomics.store(this.i32, o + S_LOCALITY_WEIGHT, f.localityWeight | 0);
  }

  /**
   * Owner: resets the health and PeakEWMA state of a slot for a new occupant
   * (the counters are never reset: they only move by add/sub pairs).
   * @internal
   */
  resetHealth(slot: number, nowMs: number): void {
    const o = this.slotBase + slot * SLOT_WORDS;
    const at = wrapMs(nowMs);
    const init = Atomics.load(this.i32, H_INITIAL_US);
    // The slot is Free or Closing here, so no router takes new samples on it;
    // stores make the fresh values visible before the tag that admits it.
    Atomics.store(this.i32, o + S_CONNECT_EST, init);
    Atomics.store(this.i32, o + S_CONNECT_AT, at);
    Atomics.store(this.i32, o + S_LATENCY_EST, init);
    Atomics.store(this.i32, o + S_LATENCY_AT, at);
    Atomics.store(this.i32, o + S_FAILURES, 0);
    Atomics.store(this.i32, o + S_EJECTIONS, 0);
    Atomics.store(this.i32, o + S_EJECTIONS_TOTAL, 0);
    Atomics.store(this.i32, o + S_EJECTED_UNTIL, 0);
    Atomics.store(this.i32, o + S_INTERVAL_OK, 0);
    Atomics.store(this.i32, o + S_INTERVAL_FAIL, 0);
    Atomics.store(this.i32, o + S_HEALTH, 0);
  }

  // --- leases (any thread) ---------------------------------------------------

  /**
   * Takes one lease of `kind` on `slot` for row `row` (the caller's own row):
   * one `Atomics.add` on the caller's cell, nothing else (see the file
   * comment for why that makes counts exact under termination).
   * @internal
   */
  leaseUp(slot: number, kind: LeaseKindCode, row: number): void {
    // add, not a plain store: this thread is the cell's only writer, but the
    // owner reads it (reclaim, tombstone checks) and other threads sum it;
    // the SC read-modify-write orders it before this thread's next SC load
    // (the router's tag check), which the tombstone handshake relies on.
    Atomics.add(this.i32, this.attrBase + slot * this.stride + row * 2 + kind, 1);
    // The row's total, also written only by this thread (see the file comment
    // for why the pair stays exact under termination).
    Atomics.add(this.i32, this.totalsBase + row * TOTAL_WORDS + kind, 1);
  }

  /** Returns one lease of `kind` on `slot` held by row `row` (the caller's own row). @internal */
  leaseDown(slot: number, kind: LeaseKindCode, row: number): void {
    // Mirror of leaseUp: one SC read-modify-write on the caller's own cell.
    Atomics.sub(this.i32, this.attrBase + slot * this.stride + row * 2 + kind, 1);
    Atomics.sub(this.i32, this.totalsBase + row * TOTAL_WORDS + kind, 1);
  }

  /** Adds `n` granted leases to the slot's pick counter (routers batch them). @internal */
  countPicks(slot: number, n: number): void {
    // Statistics only; add so concurrent batches on one slot are never lost.
    Atomics.add(this.i32, this.slotBase + slot * SLOT_WORDS + S_PICKS, n);
  }

  /** Leases of `kind` on `slot`: the sum of its cells over the rows in use. @internal */
  count(slot: number, kind: LeaseKindCode): number {
    const i = this.i32;
    // The rows-in-use word first (SC): a thread raises it before it takes
    // its first lease, so every row that holds one is summed. Each cell load
    // is SC and only ever sees whole values; the sum is not one instant's
    // total when other threads move concurrently, which is all a comparison
    // between backends needs — and exact whenever they are quiescent.
    const end = this.attrBase + slot * this.stride + Atomics.load(i, H_ROWS) * 2;
    let n = 0;
    for (let p = this.attrBase + slot * this.stride + kind; p < end; p += 2) n += Atomics.load(i, p);
    return n;
  }

  /** Active connection leases on a slot. */
  connections(slot: number): number {
    return this.count(slot, LeaseKind.Connection);
  }

  /** In-flight request leases on a slot. */
  requests(slot: number): number {
    return this.count(slot, LeaseKind.Request);
  }

  /** Connection leases plus request leases on a slot (the `p2c` / least-loaded metric). */
  outstanding(slot: number): number {
    const i = this.i32;
    // As count(), over both kinds: the slot's cells are contiguous.
    const base = this.attrBase + slot * this.stride;
    const end = base + Atomics.load(i, H_ROWS) * 2;
    let n = 0;
    for (let p = base; p < end; p++) n += Atomics.load(i, p);
    return n;
  }

  /**
   * Leases of `kind` held on all slots by all threads: a sum over the rows in
   * use (at most `maxThreads` loads, never a scan of the backends). Like
   * count(), not one instant's total while threads move, and exact whenever
   * they are quiescent.
   */
  totalLeases(kind: LeaseKindCode): number {
    const i = this.i32;
    const rows = Atomics.load(i, H_ROWS);
    let n = 0;
    for (let r = 0; r < rows; r++) n += Atomics.load(i, this.totalsBase + r * TOTAL_WORDS + kind);
    return n;
  }

  /** Connection plus request leases on all slots (the pool-wide `outstanding`). */
  totalOutstanding(): number {
    const i = this.i32;
    const rows = Atomics.load(i, H_ROWS);
    let n = 0;
    for (let r = 0; r < rows; r++) {
      const p = this.totalsBase + r * TOTAL_WORDS;
      n += Atomics.load(i, p) + Atomics.load(i, p + 1);
    }
    return n;
  }

  /** Rows in use (one more than the highest row ever claimed). */
  rowsInUse(): number {
    return Atomics.load(this.i32, H_ROWS);
  }

  // --- PeakEWMA (seqlock) ----------------------------------------------------

  /**
   * The PeakEWMA estimate of `series` on `slot`, decayed to `nowMs`, in
   * integer microseconds (a small integer: no allocation).
   *
   * Tear-free: the estimate and its timestamp are two words under the slot's
   * seqlock. The reader retries while a writer holds the lock or the version
   * moved; after 4 attempts (a writer that died mid-update, until the owner
   * unlocks its row) it uses the last pair read, each word of which is atomic.
   */
  estimateUs(slot: number, series: EwmaSeriesCode, nowMs: number): number {
    const i = this.i32;
    const o = this.slotBase + slot * SLOT_WORDS;
    const e = o + S_CONNECT_EST + series * 2;
    let est = 0;
    let at = 0;
    for (let attempt = 0; attempt < 4; attempt++) {
      // Seqlock read: lock word, the pair, the lock word again (all SC loads,
      // so the pair cannot be reordered outside the two lock reads).
      const v1 = Atomics.load(i, o + S_EWMA_LOCK);
      est = Atomics.load(i, e);
      at = Atomics.load(i, e + 1);
      if ((v1 & 0xff) === 0 && Atomics.load(i, o + S_EWMA_LOCK) === v1) break;
    }
    const dt = elapsedMs(wrapMs(nowMs), at);
    if (dt <= 0) return est;
    // The factor is looked up inline (a helper returning a double, if not
    // inlined, would box it); | 0 keeps the result a small integer.
    if (dt < DECAY_STEPS) return Math.round(est * this.decay[dt]!) | 0;
    return Math.round(est * Math.exp(-dt / this.tauMs)) | 0;
  }

  /** e^(−dt/τ) for an elapsed time dt >= 1 ms (integer): the table, or Math.exp past it. */
  private decayFactor(dt: number): number {
    return dt < DECAY_STEPS ? this.decay[dt]! : Math.exp(-dt / this.tauMs);
  }

  /**
   * Records a sample of `series` on `slot` (peak rule, else EWMA with
   * w = e^(−Δt/τ)). `row` is the writer's attribution row (owner of the lock
   * while writing). Returns false when another writer held the lock: the
   * sample is then dropped — two simultaneous samples on one backend, one of
   * them is enough for an estimate.
   * @internal
   */
  observe(slot: number, series: EwmaSeriesCode, sampleMs: number, nowMs: number, row: number): boolean {
    const i = this.i32;
    const o = this.slotBase + slot * SLOT_WORDS;
    const lock = o + S_EWMA_LOCK;
    const e = o + S_CONNECT_EST + series * 2;
    const now = wrapMs(nowMs);
    // Fast path, no write at all: within the same millisecond as the last
    // update (dt = 0, so w = 1) a sample at or below the estimate leaves both
    // words exactly as they are. Under load almost every sample lands here,
    // which keeps the slot's cache line shared instead of bouncing. The two
    // words are read without the seqlock (two SC loads, each a whole value):
    // a pair torn by a concurrent writer can at worst drop this one sample,
    // which is what happens anyway when a writer holds the lock (below).
    if (now === Atomics.load(i, e + 1) && sampleMs * 1000 <= Atomics.load(i, e)) return true;
    // SC load of the seqlock word: a held lock means another writer is
    // updating this slot — drop the sample rather than wait.
    const v = Atomics.load(i, lock);
    if ((v & 0xff) !== 0) return false;
    // CAS acquires the lock and records which row holds it, so the owner can
    // release a lock left behind by a thread that died inside this section.
    if (Atomics.compareExchange(i, lock, v, v | (row + 1)) !== v) return false;
    const est = Atomics.load(i, e) / 1000;
    const dt = elapsedMs(now, Atomics.load(i, e + 1));
    const w = dt > 0 ? this.decayFactor(dt) : 1;
    const next = sampleMs > est * w ? sampleMs : est * w + sampleMs * (1 - w);
    const us = Math.round(next * 1000);
    // Stores inside the lock; the unlocking store (new version, low byte 0)
    // is SC, so a reader that sees it also sees both words.
    // biome-ignore lint/complexity/useMathMinMax: hot path; a compare keeps the value a small integer (docs/internals.md, numbers that do not allocate)
    Atomics.store(i, e, us > MAX_US ? MAX_US : us);
    if (dt > 0) Atomics.store(i, e + 1, now);
    Atomics.store(i, lock, (v + 0x100) & ~0xff);
    return true;
  }

  // --- passive health --------------------------------------------------------

  /** Adds one consecutive failure; returns the new count. @internal */
  addFailure(slot: number): number {
    // add: concurrent failures from several threads all count (the add
    // leaves the ejection flag in bit 30 as it is).
    return (Atomics.add(this.i32, this.slotBase + slot * SLOT_WORDS + S_FAILURES, 1) + 1) & FAILURE_MASK;
  }

  /** A success: clears consecutive failures and the ejection exponent (writes only when non-zero). @internal */
  clearFailures(slot: number): void {
    const o = this.slotBase + slot * SLOT_WORDS;
    // One SC load first so the common all-clear case writes nothing (no
    // cache-line ping-pong) and reads one word: an ejection sets bit 30 of
    // the failures word, so a zero word means both failures and ejections
    // are clear. A failure or ejection racing these stores may be forgotten,
    // which is the meaning of "a success resets".
    const w = Atomics.load(this.i32, o + S_FAILURES);
    if (w === 0) return;
    // Clear the ejection count before the flag that advertises it, so a
    // reader that sees the flag gone sees the count gone too.
    if ((w & EJECTED_FLAG) !== 0) Atomics.store(this.i32, o + S_EJECTIONS, 0);
    Atomics.store(this.i32, o + S_FAILURES, 0);
  }

  /** Consecutive ejections so far (the backoff exponent). */
  ejections(slot: number): number {
    return Atomics.load(this.i32, this.slotBase + slot * SLOT_WORDS + S_EJECTIONS);
  }

  /** Ejects a slot until `untilMs` (never stored as 0), resets failures, counts the ejection. @internal */
  eject(slot: number, untilMs: number): void {
    const o = this.slotBase + slot * SLOT_WORDS;
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

  /** Ejections of the slot's occupant since it took the slot (unlike {@link ejections}, a success does not reset it; wraps at 2^32). */
  ejectionsTotal(slot: number): number {
    return Atomics.load(this.i32, this.slotBase + slot * SLOT_WORDS + S_EJECTIONS_TOTAL) >>> 0;
  }

  /**
   * Owner: ends a slot's ejection now (an active check passed). The ejection
   * count stays, so the next ejection still lasts longer; the caller bumps
   * the health epoch, which publishes the store to routers that refresh on it.
   * @internal
   */
  uneject(slot: number): void {
    Atomics.store(this.i32, this.slotBase + slot * SLOT_WORDS + S_EJECTED_UNTIL, 0);
  }

  /** Milliseconds of ejection left at `nowMs` (0 when not ejected). */
  ejectedForMs(slot: number, nowMs: number): number {
    const until = Atomics.load(this.i32, this.slotBase + slot * SLOT_WORDS + S_EJECTED_UNTIL);
    if (until === 0) return 0;
    const left = elapsedMs(until, wrapMs(nowMs));
    // biome-ignore lint/complexity/useMathMinMax: read on every pick's view check; same reason as observe()
    return left > 0 ? left : 0;
  }

  // --- outlier-detection intervals and the health word ----------------------

  /** Counts one released outcome in the slot's interval counters (any router; one Atomics.add). @internal */
  countOutcome(slot: number, success: boolean): void {
    // add: routers in every thread count into the same word and none may be
    // lost; the owner's exchange below takes whatever has been added so far.
    Atomics.add(this.i32, this.slotBase + slot * SLOT_WORDS + (success ? S_INTERVAL_OK : S_INTERVAL_FAIL), 1);
  }

  /**
   * Owner: reads and zeroes the slot's interval counters, storing successes
   * in `out[0]` and failures in `out[1]` (no allocation). Each exchange is one
   * atomic step, so an outcome counted concurrently lands in exactly one
   * interval — this one or the next. @internal
   */
  takeInterval(slot: number, out: Int32Array): void {
    const o = this.slotBase + slot * SLOT_WORDS;
    out[0] = Atomics.exchange(this.i32, o + S_INTERVAL_OK, 0) >>> 0;
    out[1] = Atomics.exchange(this.i32, o + S_INTERVAL_FAIL, 0) >>> 0;
  }

  /** The slot's health word ({@link HealthFlag} bits). */
  health(slot: number): number {
    // Owner-written with one store; a load sees a whole word.
    return Atomics.load(this.i32, this.slotBase + slot * SLOT_WORDS + S_HEALTH);
  }

  /**
   * Owner: replaces the bits of `mask` in the health word with those of
   * `bits`; returns whether the word changed. The caller bumps the health
   * epoch after its writes so routers rebuild their views. @internal
   */
  setHealth(slot: number, mask: number, bits: number): boolean {
    const p = this.slotBase + slot * SLOT_WORDS + S_HEALTH;
    // Single writer (the owner): load + store cannot lose a concurrent update.
    const old = Atomics.load(this.i32, p);
    const next = (old & ~mask) | (bits & mask);
    if (next === old) return false;
    Atomics.store(this.i32, p, next);
    return true;
  }

  // --- attribution rows --------------------------------------------------------

  /**
   * Claims (or finds) the attribution row of thread `threadId`, lowest free
   * first; throws `PoiseError` `CapacityExhausted` when all rows are taken.
   * @internal
   */
  claimRow(threadId: number): number {
    const i = this.i32;
    const me = threadId + 1;
    for (let r = 0; r < this.maxThreads; r++) if (Atomics.load(i, this.ownerBase + r) === me) return r;
    for (let r = 0; r < this.maxThreads; r++) {
      // CAS from 0: two threads racing for one free row cannot both win.
      if (Atomics.compareExchange(i, this.ownerBase + r, 0, me) === 0) {
        // Raise rows-in-use to cover r before the caller can take a lease on
        // it (CAS loop: concurrent claims only ever raise it).
        for (;;) {
          const n = Atomics.load(i, H_ROWS);
          if (n > r || Atomics.compareExchange(i, H_ROWS, n, r + 1) === n) break;
        }
        return r;
      }
    }
    throw new PoiseError('CapacityExhausted', `LoadTable: all ${this.maxThreads} thread rows are taken (raise options.maxThreads)`, {
      field: 'options.maxThreads',
    });
  }

  /** The row claimed by `threadId`, or -1. */
  rowOf(threadId: number): number {
    for (let r = 0; r < this.maxThreads; r++) if (Atomics.load(this.i32, this.ownerBase + r) === threadId + 1) return r;
    return -1;
  }

  /**
   * Owner, after thread `threadId` has exited: subtracts every lease it still
   * held from the shared counters, releases a PeakEWMA lock it died holding,
   * and frees its row. Returns the number of leases reclaimed.
   * @internal
   */
  reclaimRow(threadId: number): number {
    const row = this.rowOf(threadId);
    if (row < 0) return 0;
    const i = this.i32;
    let reclaimed = 0;
    for (let s = 0; s < this.capacity; s++) {
      const o = this.slotBase + s * SLOT_WORDS;
      const cell = this.attrBase + s * this.stride + row * 2;
      // exchange: read-and-zero the dead thread's cells in one step each;
      // nobody else writes them, so the slot's count drops by exactly what
      // the thread held, and they are zero for the row's next owner.
      reclaimed += Atomics.exchange(i, cell, 0) + Atomics.exchange(i, cell + 1, 0);
      const v = Atomics.load(i, o + S_EWMA_LOCK);
      // Only the dead row's id in the low byte is released; a CAS so a live
      // writer's lock is never touched.
      if ((v & 0xff) === row + 1) Atomics.compareExchange(i, o + S_EWMA_LOCK, v, (v + 0x100) & ~0xff);
    }
    // Its totals are exactly what the cells held (or one off, if it died
    // between the two adds of a lease): zero them with the cells.
    Atomics.store(i, this.totalsBase + row * TOTAL_WORDS, 0);
    Atomics.store(i, this.totalsBase + row * TOTAL_WORDS + 1, 0);
    // Free the row last, once its cells are zero.
    Atomics.store(i, this.ownerBase + row, 0);
    return reclaimed;
  }

  /** Leases of `kind` that row `row` holds on `slot`. */
  rowLeases(row: number, slot: number, kind: LeaseKindCode): number {
    return Atomics.load(this.i32, this.attrBase + slot * this.stride + row * 2 + kind);
  }

  // --- spec blob (single writer: the owner) ---------------------------------

  /** Bytes available for the spec blob. @internal */
  get specCapacityBytes(): number {
    return this.specWords * 4;
  }

  /**
   * Owner: publishes the spec blob under the seqlock (odd while writing) and
   * wakes readers that waited on it. Throws `PoiseError` `CapacityExhausted` when it does not fit.
   * @internal
   */
  publishSpecs(bytes: Uint8Array): void {
    const words = Math.ceil(bytes.length / 4);
    if (words > this.specWords) {
      throw new PoiseError('CapacityExhausted', `spec blob of ${bytes.length} bytes exceeds options.specBytes (${this.specWords * 4})`, {
        field: 'options.specBytes',
      });
    }
    const i = this.i32;
    const padded = new Uint8Array(words * 4);
    padded.set(bytes);
    const src = new Int32Array(padded.buffer);
    // Only the words that differ from the last publication are stored (one
    // membership change touches the version line and one backend's line),
    // in at most two ranges that readers holding that publication patch.
    const [a0, a1, b0, b1] = changedRanges(this.published, src);
    const seq = Atomics.load(i, H_SPEC_SEQ);
    // Odd = writing. SC stores: a reader that sees the final even value sees
    // every word stored before it.
    Atomics.store(i, H_SPEC_SEQ, (seq + 1) | 0);
    const base = this.specBase;
    for (let w = a0; w < a1; w++) Atomics.store(i, base + w, src[w]!);
    for (let w = b0; w < b1; w++) Atomics.store(i, base + w, src[w]!);
    Atomics.store(i, H_SPEC_RANGES, a0);
    Atomics.store(i, H_SPEC_RANGES + 1, a1);
    Atomics.store(i, H_SPEC_RANGES + 2, b0);
    Atomics.store(i, H_SPEC_RANGES + 3, b1);
    Atomics.store(i, H_SPEC_LEN, bytes.length);
    Atomics.store(i, H_SPEC_SEQ, (seq + 2) | 0);
    this.published = src;
    Atomics.notify(i, H_SPEC_SEQ);
  }

  /** The spec blob sequence number (even when stable). @internal */
  specSeq(): number {
    return Atomics.load(this.i32, H_SPEC_SEQ);
  }

  /**
   * A private copy of the current spec blob (empty before the first publish).
   * Waits with `Atomics.wait` while the owner is writing (never spins), and
   * retries when the sequence moved during the copy. When this instance's
   * last copy is of the publication just before (sequence − 2), it copies
   * that one and loads only the ranges the owner changed; otherwise every
   * word. Either way every shared word is read with `Atomics.load` inside
   * the seqlock. Two buffers of this instance alternate: the result must not
   * be modified, and it holds its bytes until the next call but one (decode
   * it at once).
   * @internal
   */
  readSpecs(): Uint8Array {
    const i = this.i32;
    const base = this.specBase;
    for (;;) {
      const seq = Atomics.load(i, H_SPEC_SEQ);
      if ((seq & 1) === 1) {
        // The owner is mid-write; it notifies when done. The timeout only
        // bounds the wait if a notify is missed between load and wait.
        Atomics.wait(i, H_SPEC_SEQ, seq, 10);
        continue;
      }
      const len = Atomics.load(i, H_SPEC_LEN);
      const words = Math.ceil(len / 4);
      const held = this.held;
      if (held !== undefined && seq === this.heldSeq && this.heldWords === words) return new Uint8Array(held.buffer, 0, len);
      let out = this.spare;
      // Room for some growth, so a membership that grows by a few backends reuses the buffers.
      if (out === undefined || out.length < words) out = new Int32Array(Math.min(this.specWords, words + (words >> 2) + 16));
      if (held !== undefined && seq === ((this.heldSeq + 2) | 0)) {
        out.set(held.subarray(0, Math.min(this.heldWords, words)));
        // Ranges are clamped to the copy: a torn read of them (the sequence moved) is retried below anyway.
        const a1 = Math.min(Atomics.load(i, H_SPEC_RANGES + 1), words);
        for (let w = Atomics.load(i, H_SPEC_RANGES); w < a1; w++) out[w] = Atomics.load(i, base + w);
        const b1 = Math.min(Atomics.load(i, H_SPEC_RANGES + 3), words);
        for (let w = Atomics.load(i, H_SPEC_RANGES + 2); w < b1; w++) out[w] = Atomics.load(i, base + w);
      } else {
        for (let w = 0; w < words; w++) out[w] = Atomics.load(i, base + w);
      }
      if (Atomics.load(i, H_SPEC_SEQ) === seq) {
        this.spare = held;
        this.held = out;
        this.heldWords = words;
        this.heldSeq = seq;
        return new Uint8Array(out.buffer, 0, len);
      }
      this.spare = out;
    }
  }

  // --- inspection ------------------------------------------------------------

  /** A snapshot of one slot (each word read atomically). */
  stats(slot: number): SlotStats {
    const i = this.i32;
    const o = this.slotBase + slot * SLOT_WORDS;
    const tag = Atomics.load(i, o + S_TAG);
    return {
      generation: tag >>> 3,
      state: (tag & 7) as SlotStateCode,
      weight: Atomics.load(i, o + S_WEIGHT) >>> 0,
      priority: Atomics.load(i, o + S_PRIORITY) >>> 0,
      locality: Atomics.load(i, o + S_LOCALITY),
      localityWeight: Atomics.load(i, o + S_LOCALITY_WEIGHT) >>> 0,
      connections: this.count(slot, LeaseKind.Connection),
      requests: this.count(slot, LeaseKind.Request),
      connectEstimateUs: Atomics.load(i, o + S_CONNECT_EST),
      connectAtMs: Atomics.load(i, o + S_CONNECT_AT),
      latencyEstimateUs: Atomics.load(i, o + S_LATENCY_EST),
      latencyAtMs: Atomics.load(i, o + S_LATENCY_AT),
      failures: Atomics.load(i, o + S_FAILURES) & FAILURE_MASK,
      ejections: Atomics.load(i, o + S_EJECTIONS),
      ejectionsTotal: Atomics.load(i, o + S_EJECTIONS_TOTAL) >>> 0,
      health: Atomics.load(i, o + S_HEALTH),
      intervalSuccesses: Atomics.load(i, o + S_INTERVAL_OK),
      intervalFailures: Atomics.load(i, o + S_INTERVAL_FAIL),
      ejectedUntilMs: Atomics.load(i, o + S_EJECTED_UNTIL),
      picks: Atomics.load(i, o + S_PICKS) >>> 0,
    };
  }
}

/** Equal words that end a changed range: closer changes are stored as one range. */
const RANGE_GAP = 16;

/**
 * The words of `next` that differ from `prev` (the same blob one
 * publication earlier), as at most two ranges `[a0, a1)` and `[b0, b1)`:
 * the first run of changes (gaps shorter than {@link RANGE_GAP} words
 * included), then everything from the next change to the last. Every word
 * of `next` outside them equals `prev`'s. @internal
 */
export function changedRanges(prev: Int32Array, next: Int32Array): [number, number, number, number] {
  const n = next.length;
  const common = Math.min(prev.length, n);
  let last = n - 1;
  if (prev.length === n) while (last >= 0 && next[last] === prev[last]) last--;
  let a0 = 0;
  while (a0 < common && next[a0] === prev[a0]) a0++;
  if (a0 > last) return [0, 0, 0, 0];
  let a1 = a0 + 1;
  for (let w = a1; w <= last && w - a1 < RANGE_GAP; w++) if (w >= common || next[w] !== prev[w]) a1 = w + 1;
  let b0 = a1;
  while (b0 <= last && b0 < common && next[b0] === prev[b0]) b0++;
  return b0 > last ? [a0, a1, 0, 0] : [a0, a1, b0, last + 1];
}

function roundUp(n: number, m: number): number {
  return Math.ceil(n / m) * m;
}

/** Entries of the PeakEWMA decay table (32 KiB per table: dt < 4.096 s is looked up). */
const DECAY_STEPS = 4096;
