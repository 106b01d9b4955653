/**
 * PoolGauge: what an admission gate reads of a router's pool, and nothing
 * more — the pool's capacity, its load by lease kind, and signals when a
 * lease of this router comes back and when the router closes. Read-only:
 * admission decides whether to acquire; it never reaches into the router's
 * view, policy or table. The capacity is computed here, from the members of
 * each view the router builds ({@link poolCapacity}).
 */
import type { AdmissionRegion } from '../load/admission-region.js';
import type { ConnectionBudget } from '../load/connection-budget.js';
import { LeaseKind, type Leases } from '../load/leases.js';
import type { LeaseKindName } from './acquire-options.js';
import type { SlotCandidate } from './slot-candidate.js';

/**
 * Σ `maxInflight` of `members`' eligible ones (Infinity when one is
 * unlimited, 0 when none is eligible). A connection router's capacity is
 * also capped by the process's fleet budget share of each (the owner bumps
 * the health epoch when a share moves, so the view and this are rebuilt).
 */
export function poolCapacity(members: readonly SlotCandidate[], budget: ConnectionBudget, byConnections: boolean): number {
  let capacity = 0;
  for (const c of members) {
    if (!c.eligible) continue;
    const share = byConnections ? budget.share(c.slot) : undefined;
    const cap = c.maxInflight === 0 ? Number.POSITIVE_INFINITY : c.maxInflight;
    capacity += share === undefined ? cap : Math.min(cap, share);
  }
  return capacity;
}

/** The pool gauge of one router (its thread only). */
export class PoolGauge {
  /** The lease kind the router counts by default (what its gate measures unless told otherwise). */
  readonly kind: LeaseKindName;
  /**
   * The table's cross-thread admission queue, as this router's row sees it:
   * tickets, this row's oldest waiter per band, the wake-up (admission-region.ts).
   * @internal
   */
  readonly queue: RowAdmission;
  private readonly leases: Leases;
  private readonly budget: ConnectionBudget;
  private readonly refresh: () => void;
  private eligible = 0;
  private listener: (() => void) | undefined;
  private closeListener: (() => void) | undefined;

  /** @internal Built by the Router; `refresh` brings its view up to date when the table moved. */
  constructor(leases: Leases, budget: ConnectionBudget, refresh: () => void, kind: LeaseKindName, queue: RowAdmission) {
    this.leases = leases;
    this.budget = budget;
    this.queue = queue;
    this.refresh = refresh;
    this.kind = kind;
  }

  /** @internal The router built a view: its capacity ({@link poolCapacity}). */
  setCapacity(capacity: number): void {
    this.eligible = capacity;
  }

  /**
   * Σ `maxInflight` of the members eligible in the router's current view
   * (brought up to date first when the table moved), `Infinity` when an
   * eligible member is unlimited, 0 when none is eligible. Computed when the
   * view is rebuilt, not per call.
   */
  capacity(): number {
    this.refresh();
    return this.eligible;
  }

  /**
   * The pool's leases of `kind` (`'outstanding'`: both) over every thread: a
   * sum over the table's thread rows (O(threads), on the admission path
   * only, never a scan of the backends), never below a lease already granted.
   */
  load(kind: LeaseKindName | 'outstanding'): number {
    if (kind === 'outstanding') return this.leases.totalOutstanding();
    return this.leases.total(kind === 'connection' ? LeaseKind.Connection : LeaseKind.Request);
  }

  /**
   * The connection leases this process holds on backend `slot` above its
   * fleet connection budget share (0 without a budget, or within it): what
   * routed sockets idle on it hand back (outbound/hand-back.ts).
   * @internal
   */
  overShare(slot: number): number {
    const w = this.budget.word(slot);
    return w === 0 ? 0 : Math.max(0, this.leases.count(slot, LeaseKind.Connection) - Math.max(w, 0));
  }

  /** Calls `listener` after every lease (or request count) of this router is returned; one listener, replaced by the next call. */
  onRelease(listener: (() => void) | undefined): void {
    this.listener = listener;
  }

  /** @internal The feedback module: a lease of this router was returned (capacity may have freed in this thread). */
  released(): void {
    this.listener?.();
  }

  /** Calls `listener` when the router is closed (its gate then closes too); one listener, replaced by the next call. */
  onClose(listener: (() => void) | undefined): void {
    this.closeListener = listener;
  }

  /** @internal The router was closed. */
  closed(): void {
    this.closeListener?.();
  }
}

/** The admission region bound to one router's row: what a gate writes and reads there. @internal */
export class RowAdmission {
  /** Band indices ordered across threads (more bands are ordered per gate only). */
  readonly bands: number;
  private readonly region: AdmissionRegion;
  private readonly row: number;

  constructor(region: AdmissionRegion, row: number, bands: number) {
    this.region = region;
    this.row = row;
    this.bands = bands;
  }

  takeTicket(band: number): number {
    return band < this.bands ? this.region.takeTicket(band) : 0;
  }

  setOldest(band: number, ticket: number | undefined): void {
    if (band < this.bands) this.region.setOldest(this.row, band, ticket);
  }

  setCounted(counted: boolean): void {
    this.region.setCounted(this.row, counted);
  }

  mayAdmit(band: number, ticket: number): boolean {
    return band >= this.bands || this.region.mayAdmit(this.row, band, ticket);
  }

  nobodyWaitsFor(band: number): boolean {
    return this.region.nobodyWaitsFor(this.row, Math.min(band, this.bands - 1));
  }

  generation(): number {
    return this.region.generation();
  }

  waitForRelease(seen: number, timeoutMs: number): Promise<unknown> {
    return this.region.waitForRelease(seen, timeoutMs);
  }

  wake(): void {
    this.region.wake();
  }
}
