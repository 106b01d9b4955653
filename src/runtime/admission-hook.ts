/**
 * The seam between a Router and an admission gate.
 *
 * Admission sits above runtime (it reads the router's pool capacity and the
 * table's totals), so runtime must not import it. Instead the Router accepts
 * any object of this shape — `AdmissionGate` (admission/admission.ts)
 * implements it and attaches itself — and `router.acquireAsync` is a thin
 * delegate to it. A router without a gate admits at once (acquire, wrapped
 * in a promise).
 */
import type { AcquireOptions } from './router.js';
import type { Lease } from './lease.js';

/** Priorities of an asynchronous acquire: the admission band and, optionally, the failover tier. */
export interface AcquirePriority {
  /** The admission band (one of the gate's configured priorities; higher = more important). Default: the gate's `defaultPriority`. */
  admission?: number;
  /** Only backends of this failover priority (as `acquire({ priority })`). */
  failover?: number;
}

/** Options of {@link Router.acquireAsync}. */
export interface AcquireAsyncOptions extends Omit<AcquireOptions, 'priority'> {
  /** A number is the failover tier (as `acquire`); an object names the admission band and the tier. */
  priority?: number | AcquirePriority;
  /** Aborting it rejects a queued request with `Cancelled`. */
  signal?: AbortSignal;
  /** Longest wait in the admission queue, ms (default: the gate's, 60 000); then `QueueTimeout`. */
  timeoutMs?: number;
}

/**
 * What a Router calls on its admission gate. Implemented by `AdmissionGate`;
 * applications use the gate, not this interface.
 */
export interface AdmissionHook {
  /** Admits (now or after queueing) and takes the lease, or rejects with a `PoiseError`. */
  acquireAsync(opts: AcquireAsyncOptions | undefined): Promise<Lease>;
  /** A lease of this router was released: capacity may have freed in this thread. Must not throw. */
  released(): void;
  /** The router was closed: reject every waiter with `Closed`. */
  routerClosed(): void;
}
