/**
 * The options of an acquire, in a module of their own: the Router, the
 * admission seam (admission-hook.ts) and the gate all name them, and none of
 * them has to import another for it.
 */

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
}

/** Priorities of an asynchronous acquire: the admission band and, optionally, the failover tier. */
export interface AcquirePriority {
  /** The admission band (one of the gate's configured priorities; higher = more important). Default: the gate's `defaultPriority`. */
  admission?: number;
  /** Only backends of this failover priority (as `acquire({ priority })`). */
  failover?: number;
}

/** Options of `Router.acquireAsync`. */
export interface AcquireAsyncOptions extends Omit<AcquireOptions, 'priority'> {
  /** A number is the failover tier (as `acquire`); an object names the admission band and the tier. */
  priority?: number | AcquirePriority;
  /** Aborting it rejects a queued request with `Cancelled`. */
  signal?: AbortSignal;
  /** Longest wait in the admission queue, ms (default: the gate's, 60 000); then `QueueTimeout`. */
  timeoutMs?: number;
}
