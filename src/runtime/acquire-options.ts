/**
 * The options of an acquire, in a module of their own: the Router, the
 * admission seam (admission-hook.ts) and the gate all name them, and none of
 * them has to import another for it.
 */
import { invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';

/** Lease kind names. */
export type LeaseKindName = 'request' | 'connection';

/** Options of `Router.acquire`. */
export interface AcquireOptions {
  /** Affinity key for `rendezvous` / `maglev` / `ring-hash`. */
  key?: string | number;
  /** Only backends of this failover priority. */
  priority?: number;
  /** Backend ids to avoid (retries). */
  exclude?: ReadonlySet<string> | readonly string[];
  /** Overrides the router's lease kind for this lease. */
  kind?: LeaseKindName;
  /**
   * Database routing by role (the spec's `role`, or what a `roles` health
   * check read): `'write'` picks among primaries; `'read'` among replicas
   * within `maxLagMs` (and at `minLsn`), else the primary (or `ReplicaLag`
   * with the router's `readFallback: 'refuse'`). Not with `priority`.
   */
  intent?: 'read' | 'write';
  /** A read's lag bound, ms; default the router's `maxLagMs` (10 000). */
  maxLagMs?: number;
  /**
   * Read-your-writes: only a replica whose replay LSN has reached this one
   * (PostgreSQL's text form `'16/B374D848'`, or a bigint), else the primary.
   * The string form costs no allocation per acquire.
   */
  minLsn?: string | bigint;
}

/** Options of `Router.acquireAsync`. */
export interface AcquireAsyncOptions extends AcquireOptions {
  /**
   * The admission band: its rank, one of the gate's `bands` (larger = more
   * important). Default: the gate's `defaultBand`. Needs an `AdmissionGate`
   * on the router. Not a failover tier: that is `priority`.
   */
  band?: number;
  /** Aborting it rejects a queued request with `Cancelled`. */
  signal?: AbortSignal;
  /** Longest wait in the admission queue, ms (default: the gate's, 60 000); then `QueueTimeout`. */
  timeoutMs?: number;
}

/**
 * Checks `acquireAsync(options).priority`: the failover tier only. The
 * pre-1.0 object form `{ admission, failover }` is refused with its
 * replacement named (the admission band is `band`). @internal
 */
export function checkAsyncPriority(priority: unknown): number | undefined {
  if (typeof priority === 'object' && priority !== null) {
    invalidConfig(
      'acquireAsync(options).priority',
      'is the failover tier, an integer >= 0; the admission band is its own option now: acquireAsync({ band, priority })',
      priority,
    );
  }
  return priority === undefined ? undefined : integerIn(priority, 'acquireAsync(options).priority', 0);
}
