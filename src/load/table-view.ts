/**
 * LoadTableView: the read side of a LoadTable — what a user may inspect.
 *
 * `balancer.table` is one of these, not the LoadTable itself: the object has
 * no method that writes, so no caller can move a shared counter, a tag or an
 * epoch through it by mistake (a cast does not help: the writers are not
 * there at run time). Writes belong to the Balancer (slots, specs, epochs)
 * and to the routers (their own lease cells, samples, failures).
 *
 * It is a guard against accidents, not a security boundary: code in the
 * process can reach the same memory through the attachment's
 * `SharedArrayBuffer`, as every worker must.
 */
import { ReportFlag } from './backend-load.js';
import type { EwmaSeriesCode, LeaseKindCode, LoadTable, SlotStats } from './load-table.js';
import { rampFactor } from './slow-start.js';

/**
 * Read-only access to the shared per-backend load. Every read is an
 * `Atomics.load` (see {@link LoadTable}); counts are exact whenever the
 * threads that move them are quiescent.
 *
 * @example
 * const balancer = new Balancer();
 * balancer.update([{ id: 'a', address: '127.0.0.1:7001' }]);
 * const { connections, requests } = balancer.table.stats(0);
 * const latencyUs = balancer.table.estimateUs(0, EwmaSeries.Latency); // decayed to now
 */
export interface LoadTableView {
  /** Slots (live backends plus draining tombstones). */
  readonly capacity: number;
  /** Attribution rows: threads that may attach routers at once. */
  readonly maxThreads: number;
  /** PeakEWMA decay constant τ, ms. */
  readonly tauMs: number;
  /** PeakEWMA value of a never-measured backend, ms. */
  readonly initialMs: number;
  /** A snapshot of one slot (each word read atomically, the words not all at one instant). */
  stats(slot: number): SlotStats;
  /** Active connection leases on a slot, summed over every thread. */
  connections(slot: number): number;
  /** In-flight request leases on a slot, summed over every thread. */
  requests(slot: number): number;
  /** Connection plus request leases on a slot (the load `p2c` and least-loaded compare). */
  outstanding(slot: number): number;
  /**
   * The PeakEWMA estimate of `series` (`EwmaSeries`) on `slot`, in integer
   * microseconds, decayed to `nowMs` — by default now on the Balancer's clock
   * (the shared process clock unless one was injected).
   */
  estimateUs(slot: number, series: EwmaSeriesCode, nowMs?: number): number;
  /** Milliseconds of passive-health ejection left on a slot at `nowMs` (default: now on the Balancer's clock); 0 when not ejected. */
  ejectedForMs(slot: number, nowMs?: number): number;
  /** Leases of `kind` (`LeaseKind`) on all slots, summed over every thread (a sum over thread rows, not backends). */
  totalLeases(kind: LeaseKindCode): number;
  /** Connection plus request leases on all slots, summed over every thread. */
  totalOutstanding(): number;
  /** Attribution rows in use (one more than the highest row ever claimed). */
  rowsInUse(): number;
  /** The attribution row of thread `threadId`, or -1 when it has none (never attached, or reclaimed). */
  rowOf(threadId: number): number;
  /** Leases of `kind` (`LeaseKind`) that attribution row `row` holds on `slot`. */
  rowLeases(row: number, slot: number, kind: LeaseKindCode): number;
  /** The membership epoch (moves when slots or specs change). */
  membershipEpoch(): number;
  /** The health epoch (moves when a backend is ejected). */
  healthEpoch(): number;
  /**
   * Slow start's factor for `slot` at `nowMs` (default: now on the
   * Balancer's clock): Envoy's ramp, 1 when slow start is off or the slot
   * is not ramping (before the routers make it relative to the others).
   */
  rampFactor(slot: number, nowMs?: number): number;
  /**
   * What the backend reports about itself: the multiplier its reports put on
   * its weight (1 without a report), as routers combine them
   * (runtime/effective-weight.ts), each reporter's own (`agent`, `orca`: 1
   * when that one reports none), and drain / maint (agent check).
   */
  reportedLoad(slot: number): { multiplier: number; agent: number; orca: number; drain: boolean; maint: boolean };
}

/**
 * The view itself: every member forwards to a LoadTable kept in a `#private`
 * field, so the table (and its writers) cannot be reached from the view.
 */
class ReadOnlyLoadTable implements LoadTableView {
  readonly #table: LoadTable;
  readonly #clock: () => number;
  readonly #combine: CombineReported;
  readonly capacity: number;
  readonly maxThreads: number;
  readonly tauMs: number;
  readonly initialMs: number;

  constructor(table: LoadTable, clock: () => number, combine: CombineReported) {
    this.#table = table;
    this.#clock = clock;
    this.#combine = combine;
    this.capacity = table.capacity;
    this.maxThreads = table.maxThreads;
    this.tauMs = table.tauMs;
    this.initialMs = table.initialMs;
  }

  stats(slot: number): SlotStats {
    return this.#table.stats(slot);
  }

  connections(slot: number): number {
    return this.#table.connections(slot);
  }

  requests(slot: number): number {
    return this.#table.requests(slot);
  }

  outstanding(slot: number): number {
    return this.#table.outstanding(slot);
  }

  estimateUs(slot: number, series: EwmaSeriesCode, nowMs: number = this.#clock()): number {
    return this.#table.estimateUs(slot, series, nowMs);
  }

  ejectedForMs(slot: number, nowMs: number = this.#clock()): number {
    return this.#table.ejectedForMs(slot, nowMs);
  }

  totalLeases(kind: LeaseKindCode): number {
    return this.#table.totalLeases(kind);
  }

  totalOutstanding(): number {
    return this.#table.totalOutstanding();
  }

  rowsInUse(): number {
    return this.#table.rowsInUse();
  }

  rowOf(threadId: number): number {
    return this.#table.rowOf(threadId);
  }

  rowLeases(row: number, slot: number, kind: LeaseKindCode): number {
    return this.#table.rowLeases(row, slot, kind);
  }

  membershipEpoch(): number {
    return this.#table.membershipEpoch();
  }

  healthEpoch(): number {
    return this.#table.healthEpoch();
  }

  rampFactor(slot: number, nowMs: number = this.#clock()): number {
    const config = this.#table.slowStart.config();
    if (config === undefined) return 1;
    const since = this.#table.slowStart.sinceEligible(slot, nowMs);
    return since >= 0 && since < config.windowMs ? rampFactor(since, config) : 1;
  }

  reportedLoad(slot: number): { multiplier: number; agent: number; orca: number; drain: boolean; maint: boolean } {
    const r = this.#table.reported;
    const flags = r.flags(slot);
    const agent = r.agentWeight(slot);
    const orca = r.orcaWeight(slot);
    return {
      multiplier: this.#combine(agent, orca) ?? 1,
      agent: agent ?? 1,
      orca: orca ?? 1,
      drain: (flags & ReportFlag.Drain) !== 0,
      maint: (flags & ReportFlag.Maint) !== 0,
    };
  }
}

/** How the agent's and ORCA's weights combine (runtime/effective-weight.ts's `reportedWeight`: the table knows no rule of its own). */
export type CombineReported = (agent: number | undefined, orca: number | undefined) => number | undefined;

/**
 * A read-only view of `table` whose default time is `clock` and whose
 * combined reported weight is `combine`'s (the Balancer hands it out as
 * `balancer.table`). @internal
 */
export function readOnlyView(table: LoadTable, clock: () => number, combine: CombineReported): LoadTableView {
  return Object.freeze(new ReadOnlyLoadTable(table, clock, combine));
}
