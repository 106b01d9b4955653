/**
 * The one retry rule of Poise: the retry-across-backends policy of one
 * outbound operation, shared by `connect()` (so `TcpProxy`),
 * `routedStream()` and the HTTP dispatcher. `connect()` drives it from an
 * async loop, a RoutedSocket and the proxy's dialer from socket events, a
 * RoutedRequest from undici's handler events; each keeps only its own
 * preconditions (the dispatcher: was anything sent, may it be resent).
 *
 * One run is one request to the retry budget (`onRequest` when it starts).
 * The budget is the router's `retryBudget` — the Balancer's, in the
 * LoadTable, shared by every thread (and, with a fleet budget, its floor by
 * every process) — for every consumer alike; a Balancer without one allows
 * every retry within `attempts` and still counts it (docs/resilience.md says
 * why this is the one default). The HTTP dispatcher alone may be given a
 * budget of its own (`retryBudget`). After a failed attempt the run
 * decides, in this order ({@link RetryRun.grant}):
 * 1. after `attempts` tries the run ends (the budget is not asked);
 * 2. when the retry budget refuses, the run ends;
 * 3. otherwise the next lease ({@link RetryRun.next}), on a backend not yet
 *    tried; when none is left, the run ends.
 *
 * A connection's failed connect ({@link RetryRun.failed}) adds what a
 * connect error means: a local resource error (EMFILE, ... —
 * {@link isLocalError}) blames no backend and ends the run at once (another
 * backend would fail the same way); any other releases the lease as a
 * failure (passive health) before the rule above. The run ends with the
 * error a caller without retries would get (`NoEligibleCandidates` carrying
 * the connect error, `CapacityExhausted` for a local one), and
 * {@link RetryRun.reason} says why as a code (`LocalResource`,
 * `ConnectTimeout`, `NoEligibleCandidates`, or the router's refusal).
 */
import { PoiseError, type PoiseErrorCode } from '../core/errors.js';
import type { Lease } from '../runtime/lease.js';
import type { LeaseKindName } from '../runtime/acquire-options.js';
import type { RetryBudget } from '../runtime/retry-budget.js';
import type { Router } from '../runtime/router.js';

/**
 * Connect errors that are this host's, not the backend's: out of file
 * descriptors (EMFILE, ENFILE), socket buffers or memory (ENOBUFS, ENOMEM),
 * ephemeral ports (EADDRNOTAVAIL). They never count against a backend.
 */
export const LOCAL_ERROR_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM', 'EADDRNOTAVAIL']);

/** True when `err` is a local resource error ({@link LOCAL_ERROR_CODES}). */
export function isLocalError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && LOCAL_ERROR_CODES.has(code);
}

/** The `ConnectTimeout` error of one connect attempt that did not complete within `timeoutMs`. @internal */
export function connectTimeout(host: string, port: number, timeoutMs: number): PoiseError {
  return new PoiseError('ConnectTimeout', `connect ${host}:${port} timed out after ${timeoutMs} ms`);
}

/** Where a run routes: the router and what every acquire of the run passes. */
export interface RunTarget {
  router: Router;
  key: string | number | undefined;
  priority: number | undefined;
  /** Backends to try at most (the first included). */
  attempts: number;
  /** The lease kind; default `'connection'`. */
  kind?: LeaseKindName | undefined;
  /** Database intent and read bounds (`router.acquire`'s options of those names); routedStream only. */
  intent?: 'read' | 'write' | undefined;
  maxLagMs?: number | undefined;
  minLsn?: string | bigint | undefined;
  /** The budget to draw on; default the router's `retryBudget` (see the module comment). */
  budget?: RetryBudget | undefined;
}

/** What {@link RetryRun.grant} decides after a failed attempt: retry, or why not. */
export type RetryGrant = 'granted' | 'attempts' | 'budget';

/** One operation's tries across backends (see the module comment). */
export class RetryRun {
  /** Backends tried and failed; made on the first failure, so a run whose first backend answers allocates none. */
  private exclude: Set<string> | undefined;
  private readonly what: string;
  private readonly target: RunTarget;
  private readonly budget: RetryBudget;
  /** Attempts started. */
  tries = 0;
  private lastError: unknown;
  /** Why the run ended, as a code (undefined while it has not). */
  reason: PoiseErrorCode | undefined;

  /**
   * Starts a run: counts one request in its retry budget. With `started`,
   * takes over an operation that already counted its request and started
   * that many attempts (the HTTP dispatcher makes its run at the first
   * failure, so a request that never retries makes none).
   */
  constructor(what: string, target: RunTarget, started?: number) {
    this.what = what;
    this.target = target;
    this.budget = target.budget ?? target.router.retryBudget;
    if (started === undefined) this.budget.onRequest();
    else this.tries = started;
  }

  /** A lease on a backend not tried yet, or the error to end the run with. */
  acquire(): Lease | Error {
    const { router, key, priority, intent, maxLagMs, minLsn } = this.target;
    try {
      return router.acquire({ key, priority, exclude: this.exclude, kind: this.target.kind ?? 'connection', intent, maxLagMs, minLsn });
    } catch (err) {
      // Nothing left to try after a failed connect: report that connect's error.
      if (this.lastError !== undefined && isExhausted(err))
        return this.end(noBackendAccepted(this.what, this.exclude?.size ?? 0, this.lastError));
      this.reason = err instanceof PoiseError ? err.code : 'NoEligibleCandidates';
      return err as Error;
    }
  }

  /** Counts an attempt starting. */
  started(): void {
    this.tries++;
  }

  /**
   * After a failed attempt that may be retried: `'granted'` (one retry of
   * the budget spent), or why not — the attempts are used up (the budget
   * is not asked), or the budget refused.
   */
  grant(): RetryGrant {
    if (this.tries >= this.target.attempts) return 'attempts';
    return this.budget.tryRetry() ? 'granted' : 'budget';
  }

  /** The next lease after a failed attempt on `lease` (already released by the caller): its backend is excluded. */
  next(lease: Lease): Lease | Error {
    this.skip(lease);
    return this.acquire();
  }

  /** Tries no more of `lease`'s backend in this run (a hedge goes beside it: the HTTP dispatcher's, http/hedge.ts). */
  skip(lease: Lease): void {
    if (this.exclude === undefined) this.exclude = new Set();
    this.exclude.add(lease.id);
  }

  /** A connection's connect on `lease` failed with `err` (not the caller's own abort): the next lease, or the error to end with. */
  failed(lease: Lease, err: unknown): Lease | Error {
    if (isLocalError(err)) {
      // Our own descriptors, buffers or ports ran out: the backend did
      // nothing wrong (no failure, no sample).
      lease.release('cancelled');
      this.reason = 'LocalResource';
      return localExhausted(this.what, err);
    }
    lease.release('failure');
    this.lastError = err;
    if (this.exclude === undefined) this.exclude = new Set();
    const exclude = this.exclude;
    exclude.add(lease.id);
    const grant = this.grant();
    if (grant === 'granted') return this.acquire();
    return this.end(noBackendAccepted(this.what, exclude.size, err, grant === 'budget' ? '; retry budget spent' : ''));
  }

  /** Ends with `err` (NoEligibleCandidates after failed connects): its reason is `ConnectTimeout` when the last connect timed out ({@link isConnectTimeout}), else `err`'s code. */
  private end(err: PoiseError): PoiseError {
    this.reason = isConnectTimeout(this.lastError) ? 'ConnectTimeout' : err.code;
    return err;
  }
}

/**
 * Whether a connect error is a timeout: our own `ConnectTimeout` PoiseError
 * (connectTimeoutMs), or the kernel's `ETIMEDOUT` (its SYN retries ran out
 * first). @internal
 */
export function isConnectTimeout(err: unknown): boolean {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return code === 'ConnectTimeout' || code === 'ETIMEDOUT';
}

/**
 * Whether an acquire refusal after at least one failed attempt means "nothing
 * left to try" (then the attempt's error is the one to report). @internal
 */
export function isExhausted(err: unknown): boolean {
  return err instanceof PoiseError && (err.code === 'NoEligibleCandidates' || err.code === 'Empty');
}

/** The `CapacityExhausted` error for a local resource error ({@link isLocalError}); no backend is blamed. @internal */
export function localExhausted(what: string, err: unknown): PoiseError {
  return new PoiseError(
    'CapacityExhausted',
    `${what}: local resource exhausted (${(err as { code: string }).code}); no backend was blamed: ${errorText(err)}`,
    {
      cause: err,
    },
  );
}

/** The `NoEligibleCandidates` error after `tried` backends refused, carrying the last connect error. @internal */
export function noBackendAccepted(what: string, tried: number, lastError: unknown, note = ''): PoiseError {
  return new PoiseError(
    'NoEligibleCandidates',
    `${what}: no backend accepted a connection (${tried} tried${note}): ${errorText(lastError)}`,
    {
      cause: lastError,
    },
  );
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
