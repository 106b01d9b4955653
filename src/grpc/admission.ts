/**
 * Admission bands for gRPC calls: a call's band comes from its metadata
 * (the `bandMetadata` key), and the channel's AdmissionGate (built from the
 * cluster's `admission` options on the channel's router) admits it — with
 * the same rule, queues and codes as `router.acquireAsync` for HTTP
 * (docs/admission.md): admitted at once while its band's ceiling allows,
 * else it waits in its band's FIFO queue (across every thread of the
 * table), and is refused when its band's queue is full (`QueueFull`) or it
 * waited `admissionTimeoutMs` (`QueueTimeout`).
 *
 * A grpc-js pick is synchronous, so a call that has to wait is answered
 * QUEUE: grpc-js parks it and picks it again when the balancer publishes a
 * picker. Its wait is a ticket (the gate's `acquireAsync`); when the ticket
 * settles, the balancer publishes its picker again and the call's next pick
 * claims the lease — or the refusal, which ends the call with
 * `RESOURCE_EXHAUSTED` (a DROP: grpc-js's retry policy does not retry it).
 *
 * A call is known again at its re-pick by its metadata's options object,
 * which grpc-js shares between the metadata clones of one call's picks
 * (`Metadata.clone`). Calls that share one Metadata object share a ticket:
 * they queue one after another, and every lease is still claimed once. A
 * granted lease nobody claims within `startGraceMs` (its call was cancelled
 * while it waited) is given back as `cancelled`.
 * @internal
 */
import type { Metadata } from '@grpc/grpc-js';
import type { AdmissionGate, AdmissionStats } from '../admission/admission.js';
import type { AcquireOptions } from '../runtime/acquire-options.js';
import type { Lease } from '../runtime/lease.js';

/** One waiting call's ticket. */
interface Ticket {
  readonly key: object;
  /** The lease once granted. */
  lease: Lease | undefined;
  /** The refusal once refused. */
  error: unknown;
  settled: boolean;
  settledAt: number;
}

/** Counts of a channel's admission. @internal */
export interface CallAdmissionCounts {
  /** Calls that waited in a band's queue (answered QUEUE at least once). */
  waited: number;
  /** Calls refused (QueueFull, QueueTimeout, Closed, ...): ended with RESOURCE_EXHAUSTED. */
  refused: number;
  /** Granted leases no re-pick claimed (the call went away while it waited). */
  unclaimed: number;
}

/** Waits for admission of one channel's calls (see the file comment). @internal */
export class CallAdmission {
  readonly counts: CallAdmissionCounts = { waited: 0, refused: 0, unclaimed: 0 };
  private readonly gate: AdmissionGate;
  private readonly tickets = new WeakMap<object, Ticket>();
  /** Settled tickets not yet claimed. */
  private settled: Ticket[] = [];
  private readonly onSettled: () => void;
  private readonly now: () => number;
  private readonly graceMs: () => number;
  private repickArmed = false;
  private sweepArmed = false;

  /**
   * `onSettled` publishes the balancer's picker again (grpc-js then re-picks
   * its queued calls); called once per turn however many tickets settled.
   */
  constructor(gate: AdmissionGate, onSettled: () => void, now: () => number, graceMs: () => number) {
    this.gate = gate;
    this.onSettled = onSettled;
    this.now = now;
    this.graceMs = graceMs;
  }

  /**
   * Admits the call whose pick carries `md`: its lease, or undefined while
   * it waits (answer QUEUE), or throws the refusal (a `PoiseError`).
   * `opts` is the pick's reused acquire options: copied when the call has to wait.
   */
  admit(md: Metadata, band: number | undefined, opts: AcquireOptions, timeoutMs: number | undefined): Lease | undefined {
    const key = md.getOptions();
    const t = this.tickets.get(key);
    if (t !== undefined) {
      if (!t.settled) return undefined;
      this.tickets.delete(key);
      t.settled = false; // claimed: the sweep skips it
      if (t.lease !== undefined) return t.lease;
      throw t.error;
    }
    const now = this.gate.admitNow(band, opts);
    if (now !== undefined) return now;
    this.wait(key, band, opts, timeoutMs);
    return undefined;
  }

  /** The gate's figures (waiters, admitted, rejected by reason). */
  stats(): AdmissionStats {
    return this.gate.admissionStats();
  }

  /** Gives back every granted lease nobody claimed (the balancer is destroyed). */
  close(): void {
    for (const t of this.settled) this.drop(t);
    this.settled = [];
  }

  private wait(key: object, band: number | undefined, opts: AcquireOptions, timeoutMs: number | undefined): void {
    const t: Ticket = { key, lease: undefined, error: undefined, settled: false, settledAt: 0 };
    this.tickets.set(key, t);
    this.counts.waited++;
    const acquire = { kind: opts.kind, key: opts.key, priority: opts.priority, exclude: opts.exclude };
    this.gate.acquireAsync({ ...acquire, ...(band === undefined ? {} : { band }), ...(timeoutMs === undefined ? {} : { timeoutMs }) }).then(
      (lease) => {
        t.lease = lease;
        this.settle(t);
      },
      (err: unknown) => {
        t.error = err;
        this.counts.refused++;
        this.settle(t);
      },
    );
  }

  private settle(t: Ticket): void {
    t.settled = true;
    t.settledAt = this.now();
    this.settled.push(t);
    if (!this.repickArmed) {
      this.repickArmed = true;
      queueMicrotask(() => {
        this.repickArmed = false;
        this.onSettled();
      });
    }
    if (!this.sweepArmed) {
      this.sweepArmed = true;
      setTimeout(this.sweep, this.graceMs()).unref();
    }
  }

  /** Settled tickets older than the grace nobody claimed: their leases back as `cancelled`. */
  private readonly sweep = (): void => {
    const now = this.now();
    const grace = this.graceMs();
    const keep: Ticket[] = [];
    for (const t of this.settled) {
      if (!t.settled) continue;
      if (now - t.settledAt >= grace) this.drop(t);
      else keep.push(t);
    }
    this.settled = keep;
    this.sweepArmed = keep.length > 0;
    if (this.sweepArmed) setTimeout(this.sweep, grace).unref();
  };

  private drop(t: Ticket): void {
    if (!t.settled) return;
    t.settled = false;
    if (this.tickets.get(t.key) === t) this.tickets.delete(t.key);
    if (t.lease !== undefined) {
      t.lease.release('cancelled');
      this.counts.unclaimed++;
    }
  }
}
