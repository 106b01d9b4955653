/**
 * PoolGauge: what an admission gate reads of a router's pool, and nothing
 * more — the pool's capacity, its load by lease kind, and a signal when a
 * lease of this router comes back. Read-only: admission decides whether to
 * acquire; it never reaches into the router's view, policy or table.
 */
import type { AdmissionRegion } from '../load/admission-region.js';
import { LeaseKind, type Leases } from '../load/leases.js';
import type { LeaseKindName } from './acquire-options.js';

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
  private readonly capacityOf: () => number;
  private listener: (() => void) | undefined;

  /** @internal Built by the Router. */
  constructor(leases: Leases, capacity: () => number, kind: LeaseKindName, queue: RowAdmission) {
    this.leases = leases;
    this.queue = queue;
    this.capacityOf = capacity;
    this.kind = kind;
  }

  /**
   * Σ `maxInflight` of the members eligible in the router's current view
   * (brought up to date first when the table moved), `Infinity` when an
   * eligible member is unlimited, 0 when none is eligible. Computed when the
   * view is rebuilt, not per call.
   */
  capacity(): number {
    return this.capacityOf();
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

  /** Calls `listener` after every lease (or request count) of this router is returned; one listener, replaced by the next call. */
  onRelease(listener: (() => void) | undefined): void {
    this.listener = listener;
  }

  /** @internal The feedback module: a lease of this router was returned (capacity may have freed in this thread). */
  released(): void {
    this.listener?.();
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
