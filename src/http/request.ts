/**
 * RoutedRequest: one request through the dispatcher, from the caller's
 * handler to the end of its last attempt.
 *
 * Each attempt takes a request lease from the router and goes out on the
 * chosen backend's pool with its own handler ({@link Attempt}), so a late
 * event of an attempt that was given up is recognised and dropped. The
 * caller sees one request: its handler starts once, gets this object as its
 * controller for the whole request (pause, resume and abort reach whichever
 * attempt is live, as undici's retry handler does with its controller), and
 * gets exactly one final event. Every lease is released exactly once, when
 * its attempt ends, before the caller hears of it: `success` with the
 * latency to response headers, `failure` (feeds passive health), or
 * `cancelled` (the caller's abort or error, or this host's).
 */
import type { Duplex } from 'node:stream';
import { PoiseError, describe } from '../core/errors.js';
import { RetryRun, isExhausted } from '../outbound/retry-run.js';
import type { AcquireOptions, Router } from '../runtime/router.js';
import type { Lease, ReleaseOptions } from '../runtime/lease.js';
import { type HttpCounters, outcomeCode } from './counters.js';
import { type AttemptOutcome, errorOutcome } from './outcome.js';
import type { ResponseLoadReports } from './load-reports.js';
import type { BackendPools } from './pools.js';
import type { RetryBudget } from '../runtime/retry-budget.js';
import type { DispatchController, Headers, Sink } from './sink.js';

/**
 * What a request asks of its live attempt's controller: undici's controller
 * (new API), or the {@link LegacyAttempt} itself. @internal
 */
export interface AttemptControl {
  abort(reason?: Error): void;
  pause(): void;
  resume(): void;
  readonly rawHeaders?: unknown;
  readonly rawTrailers?: unknown;
}

/** What every request of one dispatcher shares. @internal */
export interface DispatchCore {
  readonly router: Router;
  readonly pools: BackendPools;
  readonly budget: RetryBudget;
  readonly counters: HttpCounters | undefined;
  readonly attempts: number;
  readonly statusOutcome: (statusCode: number) => AttemptOutcome;
  readonly clock: () => number;
  /** The release options object, reused (releases are synchronous, one thread). */
  readonly release: ReleaseOptions;
  /** The pools run undici's older handler API natively (undici 7's own `Pool`). */
  readonly legacyPools: boolean;
  /** The router's membership version the pools were last swept at. */
  seenVersion: number;
  /** Records the backends' `endpoint-load-metrics` response headers. */
  readonly loadReports: ResponseLoadReports;
}

/** What a request asks of the router (from its `poise` options or the dispatcher's `route`). @internal */
export interface RouteHints {
  key: string | number | undefined;
  priority: number | undefined;
  admission: { band: number; timeoutMs: number | undefined } | undefined;
}

/** The undici dispatch options the dispatcher reads (it passes them on to the pool as they are). @internal */
export interface DispatchOptionsLike {
  method?: unknown;
  body?: unknown;
  upgrade?: unknown;
  idempotent?: unknown;
}

/** The acquire options of a first attempt without key or priority: one shared object. */
const PLAIN: AcquireOptions = Object.freeze({ kind: 'request' });

const OUTCOMES: ReadonlySet<unknown> = new Set(['success', 'failure', 'overload', 'cancelled']);

/** One request (see the file comment). The caller's handler gets it as its controller. @internal */
export class RoutedRequest implements DispatchController {
  private readonly core: DispatchCore;
  private readonly opts: DispatchOptionsLike;
  private readonly sink: Sink;
  private readonly hints: RouteHints | undefined;
  /** May it be sent again after a failure before any response byte? (body replayable; idempotent or nothing sent). */
  private readonly replayable: boolean;
  private readonly idempotent: boolean;
  /** Attempts speak the older handler API (the caller does, and the pools run it natively). */
  private readonly legacy: boolean;
  private attempt: AttemptBase | undefined;
  /** The request's retry run (outbound/retry-run.ts: the attempts, the budget, the backends tried), made at its first failure. */
  private run: RetryRun | undefined;
  /** The live attempt's controller, once it started. */
  private target: AttemptControl | null = null;
  /** Aborts a wait for admission. */
  private waiting: AbortController | undefined;
  private isAborted = false;
  private abortReason: Error | null = null;
  private isPaused = false;
  /** The response headers went to the caller: no retry from here on. */
  private delivered = false;
  /** The caller got its final event. */
  private done = false;

  constructor(
    core: DispatchCore,
    opts: DispatchOptionsLike,
    sink: Sink,
    hints: RouteHints | undefined,
    replayable: boolean,
    idempotent: boolean,
  ) {
    this.core = core;
    this.opts = opts;
    this.sink = sink;
    this.hints = hints;
    this.replayable = replayable;
    this.idempotent = idempotent;
    this.legacy = sink.legacy && core.legacyPools;
  }

  // --- the caller's controller ----------------------------------------------

  get aborted(): boolean {
    return this.isAborted;
  }
  get paused(): boolean {
    return this.isPaused;
  }
  get reason(): Error | null {
    return this.abortReason;
  }
  get rawHeaders(): unknown {
    return this.target?.rawHeaders;
  }
  get rawTrailers(): unknown {
    return this.target?.rawTrailers;
  }
  pause(): void {
    this.isPaused = true;
    this.target?.pause();
  }
  resume(): void {
    if (!this.isPaused) return;
    this.isPaused = false;
    this.target?.resume();
  }
  abort(reason?: Error): void {
    if (this.isAborted || this.done) return;
    this.isAborted = true;
    this.abortReason = reason ?? null;
    // A started attempt: undici ends it with the reason (then onError below
    // releases its lease as cancelled and tells the caller).
    if (this.target !== null) this.target.abort(reason);
    // Waiting for admission: the wait rejects, and the caller hears of it then.
    else if (this.waiting !== undefined) this.waiting.abort(reason);
    // Queued in a pool (no controller before its start): tell the caller now;
    // the attempt is aborted when it starts, and its lease released then.
    else if (this.attempt !== undefined) this.finish(this.abortError());
    // Else the caller aborted inside its own start: start() sees it.
  }

  // --- the request ----------------------------------------------------------

  /** Starts the caller's handler and the first attempt; returns what the pool's dispatch returned (false when refused). */
  start(): boolean {
    try {
      this.sink.start(this);
    } catch (err) {
      this.finish(err);
      return false;
    }
    if (this.isAborted) {
      this.finish(this.abortError());
      return false;
    }
    const hints = this.hints;
    if (hints?.admission !== undefined) {
      this.admit(hints, hints.admission);
      return true;
    }
    let lease: Lease;
    try {
      lease = this.core.router.acquire(hints === undefined ? PLAIN : { kind: 'request', key: hints.key, priority: hints.priority });
    } catch (err) {
      // Refused before anything was counted (no backend, bad hints).
      this.finish(err);
      return false;
    }
    // One request to the retry budget; its run is made only if an attempt fails (newRun).
    this.core.budget.onRequest();
    return this.send(lease);
  }

  /** The first lease through the router's admission gate (`acquireAsync`): it may wait, and the caller may abort meanwhile. */
  private admit(hints: RouteHints, admission: { band: number; timeoutMs: number | undefined }): void {
    const waiting = new AbortController();
    this.waiting = waiting;
    this.core.router
      .acquireAsync({
        kind: 'request',
        key: hints.key,
        band: admission.band,
        priority: hints.priority,
        signal: waiting.signal,
        timeoutMs: admission.timeoutMs,
      })
      .then(
        (lease) => {
          this.waiting = undefined;
          if (this.isAborted) {
            lease.release('cancelled');
            this.finish(this.abortError());
            return;
          }
          this.core.budget.onRequest();
          this.send(lease);
        },
        (err: unknown) => {
          this.waiting = undefined;
          this.finish(this.isAborted ? this.abortError() : err);
        },
      );
  }

  /** The request's retry run, at its first failure: the request was counted in the budget with its first lease, and one attempt started. */
  private newRun(): RetryRun {
    const core = this.core;
    const hints = this.hints;
    return new RetryRun(
      'request',
      {
        router: core.router,
        key: hints?.key,
        priority: hints?.priority,
        attempts: core.attempts,
        kind: 'request',
        budget: core.budget,
      },
      1,
    );
  }

  /** Sends one attempt on `lease`'s backend. */
  private send(lease: Lease): boolean {
    const core = this.core;
    const a = this.legacy ? new LegacyAttempt(this, core, lease, core.clock()) : new Attempt(this, core, lease, core.clock());
    this.attempt = a;
    // The first attempt is counted when the run is made (newRun); later ones by the run.
    this.run?.started();
    // The view moved since the pools were last checked: retire those of backends that left.
    if (core.router.version !== core.seenVersion) {
      core.seenVersion = core.router.version;
      core.pools.sweep(core.router);
    }
    try {
      const pool = core.pools.get(lease.id, lease.address, lease.host, lease.port, lease.spec);
      return pool.dispatch(this.opts, a);
    } catch (err) {
      this.onError(a, err as Error);
      return false;
    }
  }

  /** Tells the caller the request failed (once). */
  private finish(err: unknown): void {
    if (this.done) return;
    this.done = true;
    this.target = null;
    this.sink.error(this, err instanceof Error ? err : new Error(String(err)));
  }

  private abortError(): Error {
    return this.abortReason ?? new PoiseError('Cancelled', 'request aborted');
  }

  private live(a: AttemptBase): boolean {
    return a === this.attempt && !this.done;
  }

  // --- events of an attempt ---------------------------------------------------

  /** @internal */
  onStart(a: AttemptBase, controller: AttemptControl): void {
    if (!this.live(a)) {
      // Given up while it waited in its pool: the caller already heard.
      controller.abort(this.abortError());
      return;
    }
    this.target = controller;
    if (this.isPaused) controller.pause();
  }

  /** @internal */
  onHeaders(a: AttemptBase, statusCode: number, headers: Headers, statusMessage: string | undefined): void {
    if (!this.live(a)) return;
    if (statusCode >= 200) {
      a.latencyMs = Math.max(0, this.core.clock() - a.startedAt);
      let outcome: unknown;
      try {
        outcome = this.core.statusOutcome(statusCode);
      } catch (err) {
        outcome = err;
      }
      if (!OUTCOMES.has(outcome)) {
        // The caller's rule failed: the request ends with that, counted as cancelled (not the backend's doing).
        this.target?.abort(badStatusOutcome(statusCode, outcome));
        return;
      }
      a.outcome = outcome as AttemptOutcome;
      this.delivered = true;
      // The backend's own load report, if it sent one (recorded while the lease pins the slot).
      if (a instanceof LegacyAttempt) this.core.loadReports.fromRaw(a.lease, a.rawHeaders);
      else this.core.loadReports.fromHeaders(a.lease, headers);
    }
    this.sink.headers(this, statusCode, headers, statusMessage);
  }

  /** @internal */
  onData(a: AttemptBase, chunk: Buffer): void {
    if (this.live(a)) this.sink.data(this, chunk);
  }

  /** @internal */
  onEnd(a: AttemptBase, trailers: Headers): void {
    // Load back first: whatever the caller does next sees the backend's count without this request.
    a.end(a.outcome);
    if (!this.live(a)) return;
    this.done = true;
    // The target stays until the caller has read its raw trailers through this controller.
    this.sink.end(this, trailers);
    this.target = null;
  }

  /** @internal */
  onUpgrade(a: AttemptBase, statusCode: number, headers: Headers, socket: Duplex): void {
    a.latencyMs = Math.max(0, this.core.clock() - a.startedAt);
    a.end('success');
    if (!this.live(a)) {
      // Nobody waits for this socket any more.
      socket.destroy();
      return;
    }
    this.done = true;
    this.sink.upgrade(this, statusCode, headers, socket);
    this.target = null;
  }

  /** @internal */
  onError(a: AttemptBase, err: Error): void {
    if (!this.live(a)) {
      a.end('cancelled');
      return;
    }
    this.target = null;
    if (this.isAborted) {
      a.end('cancelled');
      this.finish(err);
      return;
    }
    if (!a.started && isRefusal(err)) {
      // undici refused the request's own options before sending anything:
      // the caller's error, counted nowhere.
      a.end('cancelled', false);
      this.finish(err);
      return;
    }
    const outcome = errorOutcome(err);
    // The HTTP preconditions of a retry (a failure before any response byte
    // reached the caller, and a request that may be sent again); the rest is
    // the run's rule (attempts, then the budget), as for every retry loop.
    if (outcome === 'failure' && !this.delivered && this.mayResend(a)) {
      this.run ??= this.newRun();
      const run = this.run;
      const grant = run.grant();
      if (grant !== 'attempts') {
        const lease = a.lease;
        // Counted before the lease goes back (the counts of a slot's generation are written under its lease).
        this.core.counters?.retry(lease.slot, lease.generation, grant === 'budget');
        if (grant === 'granted') {
          a.end('failure');
          const next = run.next(lease);
          // Nothing left to try (the budget's retry is spent all the same): the caller gets the attempt's error.
          if (next instanceof Error) this.finish(isExhausted(next) ? err : next);
          else this.send(next);
          return;
        }
      }
    }
    a.end(outcome);
    this.finish(err);
  }

  /** @internal */
  onResponseStarted(a: AttemptBase): void {
    if (this.live(a)) this.sink.responseStarted();
  }

  /** @internal */
  onBodySent(a: AttemptBase, chunk: unknown): void {
    if (this.live(a)) this.sink.bodySent(chunk);
  }

  /** @internal */
  onRequestSent(a: AttemptBase): void {
    if (this.live(a)) this.sink.requestSent();
  }

  /** A replayable body, and nothing sent yet or an idempotent method (an upgrade only before anything was sent). */
  private mayResend(a: AttemptBase): boolean {
    if (!this.replayable) return false;
    if (!a.started) return true;
    return this.idempotent && (this.opts.upgrade === undefined || this.opts.upgrade === null || this.opts.upgrade === false);
  }
}

function badStatusOutcome(statusCode: number, got: unknown): PoiseError {
  const what = got instanceof Error ? `threw ${got.message}` : `returned ${describe(got)}`;
  return new PoiseError(
    'InvalidConfig',
    `options.statusOutcome: must return "success", "failure", "overload" or "cancelled"; for ${statusCode} it ${what}`,
    {
      field: 'options.statusOutcome',
      cause: got instanceof Error ? got : undefined,
    },
  );
}

/** undici refusing a request's options (not the backend's doing). */
function isRefusal(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'UND_ERR_INVALID_ARG' || code === 'UND_ERR_NOT_SUPPORTED';
}

/**
 * One attempt: the handler the backend's pool drives, holding the attempt's
 * lease until {@link AttemptBase.end}. Two shapes, by the API the pool and
 * the caller speak: {@link Attempt} (undici's new API, any pool) and
 * {@link LegacyAttempt} (the older API, which undici 7's pools run
 * natively: no header object is built for a caller that wants raw headers).
 * @internal
 */
export abstract class AttemptBase {
  readonly lease: Lease;
  /** Clock reading when the attempt was sent. */
  readonly startedAt: number;
  /** Latency to response headers, ms; -1 until they came. */
  latencyMs = -1;
  /** The outcome of the response (by its status); a `success` until one came. */
  outcome: AttemptOutcome = 'success';
  /** The pool started sending it (`onRequestStart` / `onConnect`): bytes may have left. */
  started = false;
  protected readonly req: RoutedRequest;
  private readonly core: DispatchCore;
  private ended = false;

  constructor(req: RoutedRequest, core: DispatchCore, lease: Lease, startedAt: number) {
    this.req = req;
    this.core = core;
    this.lease = lease;
    this.startedAt = startedAt;
  }

  /** Releases the lease once, counting the outcome (and the latency, when headers came) unless `count` is false. */
  end(outcome: AttemptOutcome, count = true): void {
    if (this.ended) return;
    this.ended = true;
    const core = this.core;
    const lease = this.lease;
    if (count) core.counters?.record(lease.slot, lease.generation, outcomeCode(outcome), this.latencyMs);
    if (outcome === 'success' && this.latencyMs >= 0) {
      core.release.latencyMs = this.latencyMs;
      lease.release('success', core.release);
    } else {
      lease.release(outcome);
    }
  }
}

/** An attempt in undici's new handler API (any pool of undici 7 or 8). @internal */
export class Attempt extends AttemptBase {
  onRequestStart(controller: DispatchController, _context: unknown): void {
    this.started = true;
    this.req.onStart(this, controller);
  }
  onResponseStarted(): void {
    this.req.onResponseStarted(this);
  }
  onResponseStart(_controller: DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.req.onHeaders(this, statusCode, headers, statusMessage);
  }
  onResponseData(_controller: DispatchController, chunk: Buffer): void {
    this.req.onData(this, chunk);
  }
  onResponseEnd(_controller: DispatchController, trailers: Headers): void {
    this.req.onEnd(this, trailers);
  }
  onResponseError(_controller: DispatchController | null, err: Error): void {
    this.req.onError(this, err);
  }
  onRequestUpgrade(_controller: DispatchController, statusCode: number, headers: Headers, socket: Duplex): void {
    this.req.onUpgrade(this, statusCode, headers, socket);
  }
  onBodySent(chunk: unknown): void {
    this.req.onBodySent(this, chunk);
  }
  onRequestSent(): void {
    this.req.onRequestSent(this);
  }
}

/** No parsed headers: a legacy attempt hands its caller the raw ones (through `rawHeaders`). */
const RAW_ONLY: Headers = Object.freeze({}) as Headers;

/**
 * An attempt in undici's older handler API, for a caller that speaks it on a
 * pool that runs it natively (undici 7): the raw headers and trailers pass
 * through untouched. It is also the attempt's controller (the older API has
 * none): pause and resume work through onHeaders / onData return values and
 * the resume callback, abort through the function `onConnect` gave.
 * @internal
 */
export class LegacyAttempt extends AttemptBase implements AttemptControl {
  private abortFn: ((reason?: Error) => void) | undefined;
  private resumeFn: (() => void) | undefined;
  private isPaused = false;
  rawHeaders: unknown = null;
  rawTrailers: unknown = null;

  abort(reason?: Error): void {
    // undici's abort function ignores a request already aborted or complete.
    this.abortFn?.(reason);
  }
  pause(): void {
    this.isPaused = true;
  }
  resume(): void {
    if (!this.isPaused) return;
    this.isPaused = false;
    this.resumeFn?.();
  }

  onConnect(abort: (reason?: Error) => void, _context?: unknown): void {
    this.started = true;
    this.abortFn = abort;
    this.req.onStart(this, this);
  }
  onResponseStarted(): void {
    this.req.onResponseStarted(this);
  }
  onHeaders(statusCode: number, rawHeaders: unknown, resume: () => void, statusText?: string): boolean {
    this.resumeFn = resume;
    this.rawHeaders = rawHeaders;
    this.req.onHeaders(this, statusCode, RAW_ONLY, statusText);
    return !this.isPaused;
  }
  onData(chunk: Buffer): boolean {
    this.req.onData(this, chunk);
    return !this.isPaused;
  }
  onComplete(rawTrailers: unknown): void {
    this.rawTrailers = rawTrailers;
    this.req.onEnd(this, RAW_ONLY);
  }
  onError(err: Error): void {
    this.req.onError(this, err);
  }
  onUpgrade(statusCode: number, rawHeaders: unknown, socket: Duplex): void {
    this.rawHeaders = rawHeaders;
    this.req.onUpgrade(this, statusCode, RAW_ONLY, socket);
  }
  onBodySent(chunk: unknown): void {
    this.req.onBodySent(this, chunk);
  }
  onRequestSent(): void {
    this.req.onRequestSent(this);
  }
}
