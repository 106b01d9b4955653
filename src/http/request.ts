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
import type { TimerSource } from '../core/timers.js';
import { RetryRun, isExhausted } from '../outbound/retry-run.js';
import type { AcquireOptions, Router } from '../runtime/router.js';
import type { Lease, ReleaseOptions } from '../runtime/lease.js';
import { type AttemptBase, Attempt, LegacyAttempt } from './attempt.js';
import type { HttpCounters } from './counters.js';
import { type HedgeConfig, type HedgeCounts, HedgeRace } from './hedge.js';
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
  /** Hedging (hedge.ts), when configured. */
  readonly hedge: HedgeConfig | undefined;
  /** What this dispatcher's hedging did. */
  readonly hedges: HedgeCounts;
  /** The timers hedge delays run on. */
  readonly timers: TimerSource;
}

/** What a request asks of the router (from its `poise` options or the dispatcher's `route`). @internal */
export interface RouteHints {
  key: string | number | undefined;
  priority: number | undefined;
  admission: { band: number; timeoutMs: number | undefined } | undefined;
  /** `route()`'s word on hedging this request (undefined: by its method). */
  hedge?: boolean | undefined;
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
  /** The live attempt: the last one sent, or the one whose response the caller gets. */
  private attempt: AttemptBase | undefined;
  /** The request's retry run (outbound/retry-run.ts: the attempts, the budget, the backends tried), made at its first failure or hedge. */
  private run: RetryRun | undefined;
  /** The race of a request that may be hedged (hedge.ts), made at its first send. */
  private race: HedgeRace | undefined;
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
    return this.attempt?.control?.rawHeaders;
  }
  get rawTrailers(): unknown {
    return this.attempt?.control?.rawTrailers;
  }
  pause(): void {
    this.isPaused = true;
    this.controls((c) => c.pause());
  }
  resume(): void {
    if (!this.isPaused) return;
    this.isPaused = false;
    this.controls((c) => c.resume());
  }
  abort(reason?: Error): void {
    if (this.isAborted || this.done) return;
    this.isAborted = true;
    this.abortReason = reason ?? null;
    this.race?.stop();
    // Waiting for admission: the wait rejects, and the caller hears of it then.
    if (this.waiting !== undefined) this.waiting.abort(reason);
    // Started attempts: undici ends each with the reason (then onError below
    // releases its lease as cancelled and tells the caller, once).
    else if (this.controls((c) => c.abort(reason))) return;
    // Queued in a pool (no controller before its start): tell the caller now;
    // the attempt is aborted when it starts, and its lease released then.
    else if (this.attempt !== undefined) this.finish(this.abortError());
    // Else the caller aborted inside its own start: start() sees it.
  }

  /** Applies `fn` to the controller of every live attempt that started; false when none has. */
  private controls(fn: (c: AttemptControl) => void): boolean {
    const racers = this.race?.racers;
    if (racers === undefined || racers.length <= 1) {
      const c = this.done ? null : (this.attempt?.control ?? null);
      if (c !== null) fn(c);
      return c !== null;
    }
    let any = false;
    // A copy: an abort may end a racer (and the request) synchronously; the
    // racers after it are aborted all the same (each released as cancelled).
    for (const r of racers.slice()) {
      if (r.control !== null) {
        any = true;
        fn(r.control);
      }
    }
    return any;
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
    return this.send(lease, false);
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
          this.send(lease, false);
        },
        (err: unknown) => {
          this.waiting = undefined;
          this.finish(this.isAborted ? this.abortError() : err);
        },
      );
  }

  /** The request's retry run, at its first failure or hedge: the request was counted in the budget with its first lease, and one attempt started. */
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

  /** Sends one attempt on `lease`'s backend (`hedge`: beside the attempts in flight). */
  private send(lease: Lease, hedge: boolean): boolean {
    const core = this.core;
    const a = this.legacy ? new LegacyAttempt(this, core, lease, core.clock()) : new Attempt(this, core, lease, core.clock());
    a.hedge = hedge;
    this.attempt = a;
    // The first attempt is counted when the run is made (newRun); later ones by the run.
    this.run?.started();
    if (this.race === undefined && this.hedgeable()) this.race = new HedgeRace(core.hedge!, core.timers, () => this.hedgeNow());
    const race = this.race;
    if (race !== undefined) {
      race.racers.push(a);
      race.arm(a);
    }
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

  /** May this request be hedged? Configured, a replayable body, no upgrade, and idempotent unless `route()` said. */
  private hedgeable(): boolean {
    if (this.core.hedge === undefined || !this.replayable) return false;
    const upgrade = this.opts.upgrade;
    if (upgrade !== undefined && upgrade !== null && upgrade !== false) return false;
    return this.hints?.hedge ?? this.idempotent;
  }

  /**
   * The hedge delay passed with no response: one more attempt, on a backend
   * no racer is on, if the run's rule grants a retry (the attempts, then the
   * budget — a refusal is counted on the slow attempt's backend).
   */
  private hedgeNow(): void {
    const slow = this.attempt;
    const race = this.race;
    if (slow === undefined || race === undefined || this.done || this.delivered || this.isAborted) return;
    this.run ??= this.newRun();
    const run = this.run;
    const grant = run.grant();
    if (grant === 'attempts') return;
    const counts = this.core.hedges;
    if (grant === 'budget') {
      counts.refused++;
      this.core.counters?.hedge(slow.lease.slot, slow.lease.generation, 'refused');
      return;
    }
    for (const r of race.racers) run.skip(r.lease);
    const next = run.acquire();
    // No backend left to hedge on: the budget's retry is spent all the same, and the request waits on.
    if (next instanceof Error) return;
    race.sent++;
    counts.sent++;
    this.core.counters?.hedge(slow.lease.slot, slow.lease.generation, 'sent');
    this.send(next, true);
  }

  /** Tells the caller the request failed (once). */
  private finish(err: unknown): void {
    if (this.done) return;
    this.done = true;
    this.race?.abandon();
    this.sink.error(this, err instanceof Error ? err : new Error(String(err)));
  }

  private abortError(): Error {
    return this.abortReason ?? new PoiseError('Cancelled', 'request aborted');
  }

  private live(a: AttemptBase): boolean {
    if (this.done) return false;
    return a === this.attempt || this.race?.has(a) === true;
  }

  // --- events of an attempt ---------------------------------------------------

  /** @internal */
  onStart(a: AttemptBase, controller: AttemptControl): void {
    if (!this.live(a)) {
      // Given up while it waited in its pool: the caller already heard.
      controller.abort(this.abortError());
      return;
    }
    a.control = controller;
    if (this.isPaused) controller.pause();
  }

  /** @internal */
  onHeaders(a: AttemptBase, statusCode: number, headers: Headers, statusMessage: string | undefined): void {
    if (!this.live(a)) return;
    const race = this.race;
    if (statusCode < 200) {
      // An informational response of one racer among several: not the caller's (it may not win).
      if (race === undefined || race.racers.length <= 1) this.sink.headers(this, statusCode, headers, statusMessage);
      return;
    }
    a.latencyMs = Math.max(0, this.core.clock() - a.startedAt);
    let outcome: unknown;
    try {
      outcome = this.core.statusOutcome(statusCode);
    } catch (err) {
      outcome = err;
    }
    if (!OUTCOMES.has(outcome)) {
      // The caller's rule failed: the request ends with that, counted as cancelled (not the backend's doing).
      a.control?.abort(badStatusOutcome(statusCode, outcome));
      return;
    }
    a.outcome = outcome as AttemptOutcome;
    this.delivered = true;
    this.attempt = a;
    // The first response wins: every other attempt is aborted, released as cancelled.
    race?.settle(a, this.core.hedges, this.core.counters);
    // The backend's own load report, if it sent one (recorded while the lease pins the slot).
    if (a instanceof LegacyAttempt) this.core.loadReports.fromRaw(a.lease, a.rawHeaders);
    else this.core.loadReports.fromHeaders(a.lease, headers);
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
    this.race?.stop();
    this.sink.end(this, trailers);
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
    this.race?.stop();
    this.sink.upgrade(this, statusCode, headers, socket);
  }

  /** @internal */
  onError(a: AttemptBase, err: Error): void {
    if (!this.live(a)) {
      a.end('cancelled');
      return;
    }
    a.control = null;
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
    if (this.outlived(a, outcome)) return;
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
          else this.send(next, false);
          return;
        }
      }
    }
    a.end(outcome);
    this.finish(err);
  }

  /**
   * A racer failed (the backend's or the network's doing) while others
   * still race: it ends (its backend is not tried again), and the request
   * waits for the others. False when it was the last one in flight, or for
   * any other error (the caller's, this host's: the request ends with it).
   */
  private outlived(a: AttemptBase, outcome: AttemptOutcome): boolean {
    const race = this.race;
    if (outcome !== 'failure' || race === undefined || this.delivered || !race.has(a) || !race.drop(a)) return false;
    this.run?.skip(a.lease);
    a.end(outcome);
    if (a === this.attempt) this.attempt = race.racers[race.racers.length - 1];
    return true;
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
