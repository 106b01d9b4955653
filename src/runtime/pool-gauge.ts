/**
 * PoolGauge: what an admission gate reads of a router's pool, and nothing
 * more — the pool's capacity, its load by lease kind, and a signal when a
 * lease of this router comes back. Read-only: admission decides whether to
 * acquire; it never reaches into the router's view, policy or table.
 */
import { LeaseKind, type Leases } from '../load/leases.js';
import type { LeaseKindName } from './acquire-options.js';

/** The pool gauge of one router (its thread only). */
export class PoolGauge {
  /** The lease kind the router counts by default (what its gate measures unless told otherwise). */
  readonly kind: LeaseKindName;
  private readonly leases: Leases;
  private readonly capacityOf: () => number;
  private listener: (() => void) | undefined;

  /** @internal Built by the Router. */
  constructor(leases: Leases, capacity: () => number, kind: LeaseKindName) {
    this.leases = leases;
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
