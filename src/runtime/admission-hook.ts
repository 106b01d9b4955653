/**
 * The seam between a Router and an admission gate, and `acquireAsync`.
 *
 * The gate wraps the router from outside: it reads the pool through the
 * router's read-only {@link PoolGauge} (pool-gauge.ts: capacity, load, the
 * release and close signals) and takes its leases with `router.acquire`.
 * Admission sits above runtime, so runtime must not import it; what is left
 * of the router's side is this seam, one method wide: `router.acquireAsync`
 * is public API and, once a gate is built on the router, goes through the
 * gate — so the router must hold the gate as an {@link AdmissionHook}
 * (`AdmissionGate`, admission/admission.ts, implements it). A router without
 * a gate admits at once. Either way, a refusal for want of a database role
 * may wait for the first verdicts (publication-wait.ts).
 */
import { PoiseError, invalidConfig } from '../core/errors.js';
import type { FirstVerdicts } from '../load/verdicts.js';
import type { Epochs } from '../load/epochs.js';
import { readAsyncOptions, type AcquireAsyncOptions, type AcquireOptions } from './acquire-options.js';
import type { Lease } from './lease.js';
import { FirstVerdictWait, type VerdictWaitHost } from './publication-wait.js';
import type { SlotCandidate } from './slot-candidate.js';

/**
 * What a Router calls on its admission gate. Implemented by `AdmissionGate`;
 * applications use the gate, not this interface.
 */
export interface AdmissionHook {
  /** Admits (now or after queueing) and takes the lease, or rejects with a `PoiseError`. */
  acquireAsync(opts: AcquireAsyncOptions | undefined): Promise<Lease>;
}

/** What the seam needs of its router. */
export interface SeamRouter {
  /** Takes a lease now (`router.acquire`). */
  acquire(opts: AcquireOptions | undefined): Lease;
  /** True once the router is closed. */
  closed(): boolean;
  /** The members of the view in force, brought up to date first. */
  members(): readonly SlotCandidate[];
}

/** Without a gate, a band has nowhere to go. */
function noBand(rank: unknown): never {
  return invalidConfig('acquireAsync(options).band', 'needs an AdmissionGate attached to this router', rank);
}

/** A router's `acquireAsync`: through the attached gate, or at once. */
export class AdmissionSeam implements VerdictWaitHost {
  private gate: AdmissionHook | undefined;
  private readonly router: SeamRouter;
  private readonly verdicts: FirstVerdictWait;

  constructor(router: SeamRouter, epochs: Epochs, verdicts: FirstVerdicts) {
    this.router = router;
    this.verdicts = new FirstVerdictWait(epochs, verdicts, this);
  }

  /** Attaches a gate; `InvalidConfig` when one is already attached. */
  attach(hook: AdmissionHook): void {
    if (this.gate !== undefined) invalidConfig('router', 'already has an admission gate attached');
    this.gate = hook;
  }

  /** See `Router.acquireAsync`. */
  acquireAsync(opts: AcquireAsyncOptions | undefined): Promise<Lease> {
    // With an intent, a refusal for want of a role waits for the first role verdicts (publication-wait.ts).
    if (typeof opts !== 'object' || opts === null || opts.intent === undefined) return this.admit(opts);
    const attempted = this.verdicts.epoch();
    return this.admit(opts).catch((err: unknown) => this.verdicts.after(err, opts, performance.now(), attempted));
  }

  get closed(): boolean {
    return this.router.closed();
  }

  members(): readonly SlotCandidate[] {
    return this.router.members();
  }

  /** One admission: through the gate when one is attached, else the acquire now. */
  admit(opts: AcquireAsyncOptions | undefined): Promise<Lease> {
    if (this.gate !== undefined) return this.gate.acquireAsync(opts);
    try {
      const req = readAsyncOptions(opts, noBand);
      const signal = req.signal;
      if (signal?.aborted) throw new PoiseError('Cancelled', 'acquireAsync: the signal was aborted', { cause: signal.reason });
      return Promise.resolve(this.router.acquire(req.acquire));
    } catch (err) {
      return Promise.reject(err);
    }
  }
}
