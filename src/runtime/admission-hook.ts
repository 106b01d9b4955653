/**
 * The seam between a Router and an admission gate.
 *
 * Admission sits above runtime, so runtime must not import it. The Router
 * accepts any object of this shape — `AdmissionGate` (admission/admission.ts)
 * implements it — and `router.acquireAsync` is a thin delegate to it. What
 * the gate reads of the pool goes through the router's read-only
 * {@link PoolGauge} (pool-gauge.ts), never through Router methods. A router
 * without a gate admits at once (acquire, wrapped in a promise).
 */
import type { AcquireAsyncOptions } from './acquire-options.js';
import type { Lease } from './lease.js';

/**
 * What a Router calls on its admission gate. Implemented by `AdmissionGate`;
 * applications use the gate, not this interface.
 */
export interface AdmissionHook {
  /** Admits (now or after queueing) and takes the lease, or rejects with a `PoiseError`. */
  acquireAsync(opts: AcquireAsyncOptions | undefined): Promise<Lease>;
  /** The router was closed: reject every waiter with `Closed`. */
  routerClosed(): void;
}
