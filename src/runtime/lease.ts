/**
 * Lease: one unit of load a Router took on a backend — an in-flight request
 * or an open connection — until `release(outcome)`.
 */
import type { ResolvedBackendSpec } from '../core/spec.js';
import type { SlotCandidate } from './slot-candidate.js';

/** How a lease ended. */
export type Outcome = 'success' | 'failure' | 'overload' | 'cancelled';

/** Options of {@link Lease.release}. */
export interface ReleaseOptions {
  /**
   * The lease's own sample, ms: request latency for a request lease, connect
   * time for a connection lease. Recorded in PeakEWMA on `'success'` only.
   */
  latencyMs?: number;
  /** A connect-time sample, ms, recorded in the connect-time PeakEWMA on `'success'` (any lease kind). */
  connectMs?: number;
}

/** Where a Lease records its outcome: the router's feedback module (feedback.ts), seen through this narrow shape. */
export interface LeaseOwner {
  release(handle: number, outcome: Outcome, latencyMs?: number, connectMs?: number): boolean;
  connected(handle: number, connectMs: number): void;
  answered(handle: number): void;
  requestUp(handle: number): boolean;
  requestDown(handle: number, latencyMs: number | undefined): void;
  reportLoad(handle: number, utilization: number, qps: number, eps: number): boolean;
  latencyQuantileMs(handle: number, q: number, minSamples: number): number;
  reportProbe(handle: number, inflight: number, latencyUs: number): boolean;
}

/**
 * A lease on one backend. Exactly-once: the first `release` returns the load
 * (Atomics.sub) and reports the outcome; every later call is a no-op.
 *
 * @example
 * const lease = router.acquire();
 * const t0 = performance.now();
 * try {
 *   await callBackend(lease.host, lease.port);
 *   lease.release('success', { latencyMs: performance.now() - t0 });
 * } catch {
 *   lease.release('failure');
 * }
 */
export class Lease {
  private readonly owner: LeaseOwner;
  private readonly handle: number;
  private readonly cand: SlotCandidate;
  private open = true;
  private request = false;

  /** @internal Created by Router.acquire, owned by its feedback module. */
  constructor(owner: LeaseOwner, handle: number, cand: SlotCandidate) {
    this.owner = owner;
    this.handle = handle;
    this.cand = cand;
  }

  /** Backend id. */
  get id(): string {
    return this.cand.id;
  }
  /** `host:port`. */
  get address(): string {
    return this.cand.spec.address;
  }
  /** Host (IPv6 without brackets). */
  get host(): string {
    return this.cand.host;
  }
  /** Port. */
  get port(): number {
    return this.cand.port;
  }
  /** The backend's spec as the router saw it at acquire time. */
  get spec(): Readonly<ResolvedBackendSpec> {
    return this.cand.spec;
  }
  /** True once released. */
  get released(): boolean {
    return !this.open;
  }
  /**
   * The LoadTable slot of the backend, and the slot generation this lease
   * pins while it is open (the owner reuses a slot only once its counts read
   * zero): keys for per-backend side tables in shared memory.
   * @internal
   */
  get slot(): number {
    return this.cand.slot;
  }
  /** See {@link slot}. @internal */
  get generation(): number {
    return this.cand.generation;
  }

  /**
   * Ends the lease. `'success'` records the samples and clears passive-health
   * failures; `'failure'` counts a consecutive failure (enough of them eject
   * the backend with backoff); `'overload'` and `'cancelled'` only return the
   * load. A second call does nothing. Throws `InvalidConfig` for an unknown
   * outcome or a negative / non-finite sample (the lease then stays open).
   */
  release(outcome: Outcome, opts?: ReleaseOptions): void {
    if (!this.open) return;
    if (this.request) this.endRequest();
    this.owner.release(this.handle, outcome, opts?.latencyMs, opts?.connectMs);
    this.open = false;
  }

  /**
   * Records a connect-time sample now (ms) while the lease stays open — for a
   * connection lease that lives as long as the connection. It does not clear
   * the backend's consecutive failures: a backend that accepts and then
   * resets before answering still counts as failing (see {@link answered}).
   * No-op after release.
   */
  connected(connectMs: number): void {
    if (this.open) this.owner.connected(this.handle, connectMs);
  }

  /**
   * The backend sent its first byte on this lease's connection: it answered,
   * so its consecutive failures are cleared (what a connect alone no longer
   * does). `connect()`, `routedStream()` and the proxy call it at the first
   * byte they read. No-op after release.
   */
  answered(): void {
    if (this.open) this.owner.answered(this.handle);
  }

  /**
   * Starts one request on this lease's backend while the lease stays open —
   * for a connection lease that carries request–reply turns (the proxy calls
   * it on a turn's first client byte): the backend counts one more in-flight
   * request (what `p2c:requests` and `p2c:latency` compare) until
   * {@link endRequest}. At most one request per lease is open; a second call
   * before `endRequest` does nothing, as does a call after release.
   */
  beginRequest(): void {
    if (this.open && !this.request) this.request = this.owner.requestUp(this.handle);
  }

  /**
   * Ends the request {@link beginRequest} started; with `latencyMs` (finite,
   * >= 0) records it as a request-latency PeakEWMA sample, which is what
   * `p2c:latency` reads. Without a sample (the turn was cut off) it only
   * returns the count. No-op when no request is open. Throws `InvalidConfig`
   * for a negative / non-finite sample (the request then stays open).
   */
  endRequest(latencyMs?: number): void {
    if (!this.request) return;
    this.owner.requestDown(this.handle, latencyMs);
    this.request = false;
  }

  /**
   * Records the backend's own load report (ORCA: utilization, queries/s,
   * errors/s; the HTTP dispatcher reads it from a response header) for the
   * owner's A58 weights, through the router's feedback module while this
   * lease pins the backend's slot. False when the lease is released, or when
   * another thread was recording the same backend's report at that instant
   * (load/backend-load.ts).
   * @internal
   */
  reportLoad(utilization: number, qps: number, eps: number): boolean {
    return this.open && this.owner.reportLoad(this.handle, utilization, qps, eps);
  }

  /**
   * The `q` quantile of this backend's request latency to response headers,
   * ms, as every thread sees it (the LoadTable's per-backend histogram,
   * fed by every `success` release with a latency); -1 once released or
   * while the backend has fewer than `minSamples` samples. The HTTP
   * dispatcher's adaptive hedge delay.
   * @internal
   */
  latencyQuantileMs(q: number, minSamples: number): number {
    return this.open ? this.owner.latencyQuantileMs(this.handle, q, minSamples) : -1;
  }

  /**
   * Records the backend's report of itself for the `probe` policy (its
   * requests in flight and latency estimate, µs; the HTTP dispatcher reads
   * it from a response's `poise-load` header) in the probe region, where
   * every thread's picks read it, while this lease pins the slot. False when
   * the lease is released or another thread was recording the same
   * backend's report at that instant.
   * @internal
   */
  reportProbe(inflight: number, latencyUs: number): boolean {
    return this.open && this.owner.reportProbe(this.handle, inflight, latencyUs);
  }
}
