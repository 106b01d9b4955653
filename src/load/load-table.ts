/**
 * LoadTable: the one SharedArrayBuffer every thread balances over.
 *
 * The buffer's layout lives in layout.ts (every offset, nothing else); each
 * region's protocol lives in a module of its own over that layout:
 *
 * | region                      | module            | written by |
 * |-----------------------------|-------------------|------------|
 * | epochs                      | epochs.ts         | the owner (membership), any router (an ejection) |
 * | slot tags                   | slot-tags.ts      | the owner |
 * | lease counters, row cells and totals, row owners, picks | leases.ts | every router (its own row), the owner (reclaim) |
 * | PeakEWMA pairs and seqlocks | ewma-region.ts    | every router |
 * | passive health              | passive-health.ts | every router (failures, ejections, outcomes), the owner (health word) |
 * | spec blob                   | spec-region.ts    | the owner |
 * | admission waiters and tickets | admission-region.ts | the admission gates (their own rows), every release (a wake-up when gates wait) |
 * | retry budget                | retry-region.ts   | the owner (configuration), every thread (requests, retries) |
 * | slow start                  | slow-start.ts     | the owner (configuration, ramp starts) |
 * | backend-reported load       | backend-load.ts   | the owner (agent check, ORCA weights) |
 * | database role, lag, LSN     | db-state.ts       | the owner (database health checks, a spec's role) |
 * | connection budget           | connection-budget.ts | the owner (shares), every router (refusals at the share) |
 * | first verdicts              | verdicts.ts       | the owner (the Balancer for a new occupant, each health source for its own bit) |
 * | latency histograms          | latency-histogram.ts | every router (a `success` release with a latency), the owner (reset for a new occupant) |
 *
 * This class creates or attaches the buffer and holds one instance of each
 * region; the Balancer, the Router and the feedback module use the regions
 * directly, and the methods below keep the table's read API (statistics,
 * tests, {@link LoadTableView}) in one place.
 *
 * A read costs the same with 1 thread or 64: a slot's lease count is one
 * word, read on the pick path with a plain load, and a scan of the backends
 * is O(backends) — leases.ts argues why that is exact where it must be.
 */
import { PoiseError, invalidConfig } from '../core/errors.js';
import { integerIn, numberIn } from '../core/validate.js';
import { AdmissionRegion } from './admission-region.js';
import { Epochs } from './epochs.js';
import { EwmaRegion, EwmaSeries, type EwmaSeriesCode } from './ewma-region.js';
import { ApertureRegion } from './aperture-region.js';
import { H_INITIAL_US, H_TAU_MS, Layout, S_EWMA } from './layout.js';
import { LeaseKind, Leases, type LeaseKindCode } from './leases.js';
import { PassiveHealth } from './passive-health.js';
import { ProbeRegion } from './probe-region.js';
import { RetryRegion } from './retry-region.js';
import { SlowStart } from './slow-start.js';
import { BackendLoad } from './backend-load.js';
import { DbState, type DbRoleCode } from './db-state.js';
import { FirstVerdicts } from './verdicts.js';
import { LatencyHistogram } from './latency-histogram.js';
import { ConnectionBudget } from './connection-budget.js';
import { SlotTags, tagGeneration, tagState, type SlotStateCode } from './slot-tags.js';
import { SpecRegion } from './spec-region.js';

export { LAYOUT_VERSION, SLOT_WORDS } from './layout.js';
export { EwmaSeries, type EwmaSeriesCode } from './ewma-region.js';
export { LeaseKind, type LeaseKindCode } from './leases.js';
export { HealthFlag } from './passive-health.js';
export { DbRole, type DbRoleCode } from './db-state.js';
export { SlotState, type SlotStateCode } from './slot-tags.js';

const MAX_US = 0x7fffffff;

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
   * slot owns its cache lines. `'unaligned'` shifts it by 32 bytes so every
   * slot straddles lines shared with its neighbours — only for the benchmark
   * that shows what the alignment is worth.
   */
  layout?: 'padded' | 'unaligned';
}

/** A consistent-enough snapshot of one slot, for tests, stats and the owner (each word read atomically, not all at one instant). */
export interface SlotStats {
  generation: number;
  state: SlotStateCode;
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
  /** Leases granted on this slot (wraps at 2^32; routers add in batches, flushed at least once a second). */
  picks: number;
  /** Database role (db-state.ts): 0 unknown / none, 1 primary, 2 replica. */
  dbRole: DbRoleCode;
  /** A replica's replay lag as last checked, ms (0 on a primary). */
  lagMs: number;
}

/**
 * The shared table of per-backend load. The Balancer creates it in the owner
 * thread; other threads {@link LoadTable.attach} to the attachment's buffer.
 *
 * The region objects (`leases`, `ewma`, `health`, `tags`, `epochs`,
 * `specs`) hold the writers; they are internal — the Balancer, the routers
 * and the feedback module call them, and a stray call from anywhere else
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
  /** Where every region starts. @internal */
  readonly layout: Layout;
  /** The one Int32Array over the buffer (the pick path's plain reads). @internal */
  readonly words: Int32Array;
  /** @internal */
  readonly epochs: Epochs;
  /** @internal */
  readonly tags: SlotTags;
  /** @internal */
  readonly leases: Leases;
  /** @internal */
  readonly ewma: EwmaRegion;
  /** @internal */
  readonly health: PassiveHealth;
  /** @internal */
  readonly specs: SpecRegion;
  /** @internal */
  readonly admission: AdmissionRegion;
  /** @internal */
  readonly retries: RetryRegion;
  /** @internal */
  readonly slowStart: SlowStart;
  /** @internal */
  readonly reported: BackendLoad;
  /** @internal */
  readonly db: DbState;
  /** @internal The health sources each occupant still awaits a first result from (verdicts.ts). */
  readonly verdicts: FirstVerdicts;
  readonly budget: ConnectionBudget;
  /** The aperture's width and this process's coordinate (aperture-region.ts). */
  readonly aperture: ApertureRegion;
  /** @internal Per-slot decaying histograms of the request latency to headers (latency-histogram.ts): the hedge delay's quantile. */
  readonly latencies: LatencyHistogram;
  /** The probe pool's answers and limits (the `probe` policy). */
  readonly probes: ProbeRegion;

  private constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    const i32 = new Int32Array(buffer);
    this.words = i32;
    this.layout = Layout.read(i32);
    this.capacity = this.layout.capacity;
    this.maxThreads = this.layout.maxThreads;
    // Header words are written once before the buffer is shared; loaded through Atomics like every shared header word.
    this.tauMs = Atomics.load(i32, H_TAU_MS);
    this.initialMs = Atomics.load(i32, H_INITIAL_US) / 1000;
    this.epochs = new Epochs(i32);
    this.tags = new SlotTags(i32, this.layout);
    this.leases = new Leases(i32, this.layout);
    this.ewma = new EwmaRegion(i32, this.layout, this.tauMs);
    this.health = new PassiveHealth(i32, this.layout);
    this.specs = new SpecRegion(i32, this.layout);
    this.admission = new AdmissionRegion(i32, this.layout);
    this.retries = new RetryRegion(i32, this.layout.retryBase);
    this.slowStart = new SlowStart(i32, this.layout);
    this.reported = new BackendLoad(i32, this.layout);
    this.db = new DbState(i32, this.layout);
    this.verdicts = new FirstVerdicts(i32, this.layout);
    this.budget = new ConnectionBudget(i32, this.layout);
    this.aperture = new ApertureRegion(i32);
    this.latencies = new LatencyHistogram(i32, this.layout);
    this.probes = new ProbeRegion(i32, this.layout);
  }

  /** Allocates and initialises a table (owner thread). Throws `PoiseError` `InvalidConfig` naming a bad option. @internal */
  static create(opts: LoadTableOptions = {}): LoadTable {
    const capacity = integerIn(opts.capacity ?? 1024, 'options.capacity', 1, 65536);
    const maxThreads = integerIn(opts.maxThreads ?? 64, 'options.maxThreads', 1, 255);
    const specBytes = integerIn(opts.specBytes ?? capacity * 1024, 'options.specBytes', 1024, 1 << 30);
    const tauMs = integerIn(opts.tauMs ?? 1000, 'options.tauMs', 1, 86_400_000);
    const initialMs = numberIn(opts.initialMs ?? 50, 'options.initialMs', 0, MAX_US / 1000);
    const mode = opts.layout ?? 'padded';
    if (mode !== 'padded' && mode !== 'unaligned') invalidConfig('options.layout', 'must be "padded" or "unaligned"', mode);
    const layout = Layout.plan(capacity, maxThreads, specBytes, mode === 'unaligned');
    const buffer = new SharedArrayBuffer(layout.words * 4);
    layout.writeHeader(new Int32Array(buffer), tauMs, Math.round(initialMs * 1000));
    return new LoadTable(buffer);
  }

  /** Attaches to a table created in another thread (the buffer is shared, not copied). */
  static attach(buffer: SharedArrayBuffer): LoadTable {
    if (!(buffer instanceof SharedArrayBuffer)) invalidConfig('LoadTable.attach(buffer)', 'must be a SharedArrayBuffer', buffer);
    return new LoadTable(buffer);
  }

  /** Refuses a slot index outside the table (a `NaN`, a fraction or `capacity` would read other words). */
  private checkSlot(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.capacity) {
      throw new PoiseError('InvalidConfig', `slot: must be an integer in [0, ${this.capacity - 1}], got ${String(slot)}`, {
        field: 'slot',
      });
    }
  }

  // --- reads (any thread) --------------------------------------------------------

  /** Active connection leases on a slot, all threads. */
  connections(slot: number): number {
    return this.leases.count(slot, LeaseKind.Connection);
  }

  /** In-flight request leases on a slot, all threads. */
  requests(slot: number): number {
    return this.leases.count(slot, LeaseKind.Request);
  }

  /** Connection plus request leases on a slot (the `p2c` / least-loaded metric). */
  outstanding(slot: number): number {
    return this.leases.outstanding(slot);
  }

  /** Leases of `kind` on all slots, all threads: a sum over the rows in use, never a scan of the backends. */
  totalLeases(kind: LeaseKindCode): number {
    return this.leases.total(kind);
  }

  /** Connection plus request leases on all slots. */
  totalOutstanding(): number {
    return this.leases.totalOutstanding();
  }

  /** Rows in use (one more than the highest row ever claimed). */
  rowsInUse(): number {
    return this.leases.rowsInUse();
  }

  /** The row claimed by `threadId`, or -1. */
  rowOf(threadId: number): number {
    return this.leases.rowOf(threadId);
  }

  /** Leases of `kind` that row `row` holds on `slot`. */
  rowLeases(row: number, slot: number, kind: LeaseKindCode): number {
    return this.leases.rowLeases(row, slot, kind);
  }

  /** The PeakEWMA estimate of `series` on `slot`, decayed to `nowMs`, in integer microseconds (the exact, seqlocked read). */
  estimateUs(slot: number, series: EwmaSeriesCode, nowMs: number): number {
    return this.ewma.estimateUs(slot, series, nowMs);
  }

  /** Milliseconds of ejection left at `nowMs` (0 when not ejected). */
  ejectedForMs(slot: number, nowMs: number): number {
    return this.health.ejectedForMs(slot, nowMs);
  }

  /** The membership epoch (moves when slots or specs change). */
  membershipEpoch(): number {
    return this.epochs.membership();
  }

  /** The health epoch (moves when a backend is ejected). */
  healthEpoch(): number {
    return this.epochs.health();
  }

  /** The tag word `generation << 3 | state` (SC load). */
  tag(slot: number): number {
    return this.tags.tag(slot);
  }

  /**
   * A snapshot of one slot (each word read atomically). Throws `PoiseError`
   * `InvalidConfig` for a slot outside the table.
   */
  stats(slot: number): SlotStats {
    this.checkSlot(slot);
    const tag = this.tags.tag(slot);
    const h = this.health;
    const [ok, fail] = h.interval(slot);
    const e = this.layout.slot(slot) + S_EWMA;
    const w = this.words;
    return {
      generation: tagGeneration(tag),
      state: tagState(tag),
      connections: this.connections(slot),
      requests: this.requests(slot),
      connectEstimateUs: Atomics.load(w, e + 2 * EwmaSeries.ConnectTime),
      connectAtMs: Atomics.load(w, e + 2 * EwmaSeries.ConnectTime + 1),
      latencyEstimateUs: Atomics.load(w, e + 2 * EwmaSeries.Latency),
      latencyAtMs: Atomics.load(w, e + 2 * EwmaSeries.Latency + 1),
      failures: h.failures(slot),
      ejections: h.ejections(slot),
      ejectionsTotal: h.ejectionsTotal(slot),
      health: h.health(slot),
      intervalSuccesses: ok,
      intervalFailures: fail,
      ejectedUntilMs: h.ejectedUntil(slot),
      picks: this.leases.picks(slot),
      dbRole: this.db.role(slot),
      lagMs: this.db.lagMs(slot),
    };
  }

  // --- owner-side compositions ---------------------------------------------------

  /**
   * Owner: resets the health and PeakEWMA state of a slot for a new occupant
   * (the lease counters are never reset: they only move by up/down pairs and
   * reclaims). @internal
   */
  resetHealth(slot: number, nowMs: number): void {
    this.ewma.reset(slot, nowMs);
    this.health.reset(slot);
    this.budget.reset(slot);
    this.latencies.reset(slot);
    this.probes.clear(slot);
  }

  /**
   * Owner, after thread `threadId` has exited: subtracts every lease it still
   * held from the slot counters, releases a PeakEWMA lock it died holding,
   * and frees its row. Returns the leases reclaimed and the counters it died
   * in the middle of (leases.ts, `reclaim`). @internal
   */
  reclaimRow(threadId: number): { leases: number; pending: number; uncertain: number } {
    const row = this.leases.rowOf(threadId);
    if (row < 0) return { leases: 0, pending: 0, uncertain: 0 };
    const reclaimed = this.leases.reclaim(row);
    this.ewma.unlockRow(row);
    this.admission.reclaimRow(row);
    this.leases.freeRow(row);
    return reclaimed;
  }
}
