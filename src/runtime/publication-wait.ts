/**
 * Waiting for the owner to publish, on the router's side. Two waits, both
 * off the steady-state pick path:
 *
 * - Within one acquire ({@link PublishWait}, synchronous, milliseconds): a
 *   drawn slot's tag changed but the change epoch announcing it has not
 *   moved yet — the owner (another thread) is between its tag stores and
 *   its epoch bump. Refusing then would fail the request on a change about
 *   to be announced, so the acquire sleeps on the epoch word
 *   (`Atomics.wait`; the owner notifies after bumping), at most
 *   `publishWaitMs` (5) in all, and rebuilds its view a bounded number of
 *   times; after that its draws refuse as they always did. Never spins:
 *   every round either sleeps or rebuilds.
 * - Across an `acquireAsync({ intent })` ({@link FirstVerdictWait},
 *   asynchronous, up to the request's `timeoutMs`): a refusal for want of a
 *   role while some member's first roles check is still out waits for the
 *   next change of the table (every first verdict bumps the change epoch;
 *   load/verdicts.ts) and tries again (docs/health.md, "Waiting for the
 *   first verdicts").
 */
import { PoiseError } from '../core/errors.js';
import type { Epochs } from '../load/epochs.js';
import { type FirstVerdicts, VerdictSource } from '../load/verdicts.js';
import type { AcquireAsyncOptions } from './acquire-options.js';
import type { Lease } from './lease.js';
import type { SlotCandidate } from './slot-candidate.js';

/** A draw's result besides a handle: the view went stale during the draw (rebuild and draw again). */
export const STALE = -1;
/** A draw's result: a drawn slot's tag changed but the epoch announcing it has not moved yet (wait, then draw again). */
export const TAG_MOVED = -2;

/** Retry modes of one draw: refuse as usual; return STALE when the epoch moved; also return TAG_MOVED. */
export const Retry = { No: 0, Stale: 1, Wait: 2 } as const;
/** A retry mode. */
export type RetryMode = (typeof Retry)[keyof typeof Retry];

/** Rebuilds of the view one acquire may do when membership moves under it (then it fails as usual). */
const MAX_STALE_ROUNDS = 16;
/** Longest one acquire waits, in all, for the owner to publish a change whose tags it already saw (ms; `publishWaitMs`). */
export const MAX_PUBLISH_WAIT_MS = 5;

/** The synchronous wait of one acquire for a publication in progress (one per router). */
export class PublishWait {
  private readonly epochs: Epochs;
  private readonly limitMs: number;
  private waitedMs = 0;

  constructor(epochs: Epochs, limitMs: number) {
    this.epochs = epochs;
    this.limitMs = limitMs;
  }

  /** A new acquire's retries begin: its wait budget is whole again. */
  begin(): void {
    this.waitedMs = 0;
  }

  /** Sleeps until the change epoch leaves `seen`, or the acquire's budget is spent. */
  sleep(seen: number): void {
    const t0 = performance.now();
    this.epochs.waitForChange(seen, this.limitMs - this.waitedMs);
    this.waitedMs += performance.now() - t0;
  }

  /** The retry mode of draw `round` (1, 2, …): wait while the budget lasts, then only rebuild, and refuse after the last round. */
  mode(round: number): RetryMode {
    return round >= MAX_STALE_ROUNDS ? Retry.No : this.waitedMs < this.limitMs ? Retry.Wait : Retry.Stale;
  }
}

/** What the first-verdict wait needs of its router. */
export interface VerdictWaitHost {
  /** True once the router is closed. */
  readonly closed: boolean;
  /** The members of the view in force, brought up to date first. */
  members(): readonly SlotCandidate[];
  /** One more admission of the request (through the gate when one is attached). */
  admit(opts: AcquireAsyncOptions): Promise<Lease>;
}

/** The asynchronous wait of `acquireAsync({ intent })` for the members' first role verdicts. */
export class FirstVerdictWait {
  private readonly epochs: Epochs;
  private readonly verdicts: FirstVerdicts;
  private readonly host: VerdictWaitHost;

  constructor(epochs: Epochs, verdicts: FirstVerdicts, host: VerdictWaitHost) {
    this.epochs = epochs;
    this.verdicts = verdicts;
    this.host = host;
  }

  /**
   * A refused `acquireAsync({ intent })` (`NoEligibleCandidates`: no known
   * primary; `ReplicaLag`: no replica and no primary) while some member's
   * active check has not delivered its first result — its role is not known
   * yet, right after start or after it joined: waits for the next change of
   * the table and tries again, until the request's `timeoutMs` (default
   * 60 000, the admission gate's) has passed since `start`, then rejects
   * with the last refusal, saying what it waited for. Nothing waits once
   * every member has its first verdict: a refusal then is the answer. Off
   * the pick path: the scan of the members runs only on a refusal. One
   * piece (about 60 lines): the loop's checks, its wait and its abort
   * handling share the state of one request. `attempted` is the change
   * epoch read before the refused attempt began.
   */
  async after(err: unknown, opts: AcquireAsyncOptions, start: number, attempted: number): Promise<Lease> {
    const limit = opts.timeoutMs ?? 60_000;
    const epochs = this.epochs;
    for (;;) {
      if (!(err instanceof PoiseError) || (err.code !== 'NoEligibleCandidates' && err.code !== 'ReplicaLag') || this.host.closed) throw err;
      // The epoch before the look: a verdict that lands after it moves the epoch, and the wait returns at once.
      const seen = epochs.change();
      if (seen !== attempted) {
        // The table changed since the refused attempt began (a role written, then its first verdict settled, while
        // it drew from the view before): its refusal may be stale, and with nothing pending no wait would follow.
        attempted = seen;
        try {
          return await this.host.admit(opts);
        } catch (e) {
          err = e;
          continue;
        }
      }
      if (!this.awaitingRoles()) throw err;
      const left = limit - (performance.now() - start);
      if (left <= 0) {
        throw new PoiseError(err.code, `${err.message} (a member's first role check was still pending after ${limit} ms)`, {
          field: 'timeoutMs',
          cause: err,
        });
      }
      if (opts.signal?.aborted) throw new PoiseError('Cancelled', 'acquireAsync: the signal was aborted', { cause: opts.signal.reason });
      // A pending waitAsync holds no handle: this timer keeps the thread alive while the request waits (a worker
      // whose only business is this request would otherwise exit under it).
      const hold = setTimeout(() => {}, left);
      const signal = opts.signal;
      let onAbort: (() => void) | undefined;
      try {
        const changed = epochs.changedAsync(seen, left);
        if (signal === undefined) await changed;
        else
          await Promise.race([
            changed,
            new Promise<void>((resolve) => {
              onAbort = resolve;
              signal.addEventListener('abort', onAbort, { once: true });
            }),
          ]);
      } finally {
        clearTimeout(hold);
        if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
      }
      if (signal?.aborted) throw new PoiseError('Cancelled', 'acquireAsync: the signal was aborted', { cause: signal.reason });
      attempted = epochs.change();
      try {
        return await this.host.admit(opts);
      } catch (e) {
        err = e;
      }
    }
  }

  /** The table's change epoch now: read before a first attempt, for {@link after}. */
  epoch(): number {
    return this.epochs.change();
  }

  /** Whether a member of the view in force still awaits its active check's first result (the role comes with it). */
  private awaitingRoles(): boolean {
    const v = this.verdicts;
    for (const c of this.host.members()) if ((v.pending(c.slot) & VerdictSource.Check) !== 0) return true;
    return false;
  }
}
