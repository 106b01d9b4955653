/**
 * The retry-across-backends policy of one outbound connection, the one that
 * `connect()` (so `TcpProxy`) and `routedStream()` share: `connect()` drives
 * it from an async loop, a RoutedSocket from its socket events.
 *
 * One run is one request to the retry budget (`onRequest` when it starts);
 * after a failed connect it decides, in this order:
 * 1. a local resource error (EMFILE, ... — {@link isLocalError}) blames no
 *    backend and ends the run (`CapacityExhausted`): another backend would
 *    fail the same way;
 * 2. otherwise the lease is released as a failure (passive health) and its
 *    backend excluded;
 * 3. after `attempts` tries, or when the retry budget refuses, the run ends
 *    with the error a caller without retries would get
 *    (`NoEligibleCandidates` carrying the connect error);
 * 4. otherwise the next lease, on a backend not yet tried; when none is
 *    left, the run ends with that same error.
 */
import { PoiseError } from '../core/errors.js';
import type { Lease } from '../runtime/lease.js';
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

/** Where a run routes: the router and what every acquire of the run passes. */
export interface RunTarget {
  router: Router;
  key: string | number | undefined;
  priority: number | undefined;
  /** Backends to try at most (the first included). */
  attempts: number;
  /** Database intent and read bounds (`router.acquire`'s options of those names); routedStream only. */
  intent?: 'read' | 'write' | undefined;
  maxLagMs?: number | undefined;
  minLsn?: string | bigint | undefined;
}

/** One connection's tries across backends (see the module comment). */
export class RetryRun {
  /** Backends tried and failed; made on the first failure, so a run whose first backend connects allocates none. */
  private exclude: Set<string> | undefined;
  private readonly what: string;
  private readonly target: RunTarget;
  private readonly budget: RetryBudget;
  /** Attempts started. */
  tries = 0;
  private lastError: unknown;

  /** Starts a run: counts one request in the router's retry budget. */
  constructor(what: string, target: RunTarget) {
    this.what = what;
    this.target = target;
    this.budget = target.router.retryBudget;
    this.budget.onRequest();
  }

  /** A lease on a backend not tried yet, or the error to end the run with. */
  acquire(): Lease | Error {
    const { router, key, priority, intent, maxLagMs, minLsn } = this.target;
    try {
      return router.acquire({ key, priority, exclude: this.exclude, kind: 'connection', intent, maxLagMs, minLsn });
    } catch (err) {
      // Nothing left to try after a failed connect: report that connect's error.
      return this.lastError !== undefined && isExhausted(err)
        ? noBackendAccepted(this.what, this.exclude?.size ?? 0, this.lastError)
        : (err as Error);
    }
  }

  /** Counts an attempt on `lease` starting. */
  started(): void {
    this.tries++;
  }

  /** The attempt on `lease` failed with `err` (not the caller's own abort): the next lease, or the error to end with. */
  failed(lease: Lease, err: unknown): Lease | Error {
    if (isLocalError(err)) {
      // Our own descriptors, buffers or ports ran out: the backend did
      // nothing wrong (no failure, no sample).
      lease.release('cancelled');
      return localExhausted(this.what, err);
    }
    lease.release('failure');
    if (this.exclude === undefined) this.exclude = new Set();
    const exclude = this.exclude;
    exclude.add(lease.id);
    this.lastError = err;
    if (this.tries >= this.target.attempts) return noBackendAccepted(this.what, exclude.size, err);
    if (!this.budget.tryRetry()) return noBackendAccepted(this.what, exclude.size, err, '; retry budget spent');
    return this.acquire();
  }
}

/**
 * Whether an acquire refusal after at least one failed connect means "nothing
 * left to try" (then the connect error is the one to report). @internal
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
