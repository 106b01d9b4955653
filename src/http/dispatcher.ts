/**
 * PoiseDispatcher: an undici `Dispatcher` that makes one balancing decision
 * per HTTP request. `fetch(url, { dispatcher })`, `undici.request`,
 * `setGlobalDispatcher` and `dispatcher.compose(interceptors)` all go
 * through {@link PoiseDispatcher.dispatch}: it takes a request lease from the
 * router (any policy), sends the request on the chosen backend's keep-alive
 * pool, and releases the lease when the request ends — with the latency to
 * response headers on success — so PeakEWMA, `p2c:requests`, passive health
 * and outlier detection see every request, in every thread that shares the
 * balancer's table.
 */
import * as undici from 'undici';
import { Dispatcher, Pool } from 'undici';
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import { finiteNumber, integerIn, positiveNumber } from '../core/validate.js';
import { checkAdmissionOptions } from '../outbound/connect.js';
import type { Router } from '../runtime/router.js';
import { HttpCounters } from './counters.js';
import { type HedgeCounts, type HedgeOptions, resolveHedge } from './hedge.js';
import { type AttemptOutcome, defaultStatusOutcome, isIdempotent, isReplayable } from './outcome.js';
import { type LoadReportCounts, ResponseLoadReports } from './load-reports.js';
import { BackendPools, type BackendDispatcher, type PoolFactory } from './pools.js';
import { type DispatchCore, type RouteHints, RoutedRequest } from './request.js';
import { RatioRetryBudget, type RetryBudget, type RetryBudgetOptions } from '../runtime/retry-budget.js';
import { toSink } from './sink.js';

/** What a request asks of the router; returned by {@link PoiseDispatcherOptions.route}. */
export interface RouteOptions {
  /** Affinity key for `rendezvous` / `maglev` / `ring-hash` routers. */
  key?: string | number;
  /** Only backends of this failover priority. */
  priority?: number;
  /** The admission band (its rank, larger = more important): the first lease is taken through `router.acquireAsync` (an `AdmissionGate` may hold it). */
  band?: number;
  /** Longest wait for admission, ms (the gate's default otherwise); only with `band`. */
  admissionTimeoutMs?: number;
  /** With the dispatcher's `hedge` option: `true` hedges this request though its method is not idempotent (its body must still be replayable), `false` never hedges it; default by its method. */
  hedge?: boolean;
}

/** Options of {@link PoiseDispatcher}. */
export interface PoiseDispatcherOptions {
  /** The router of this thread (`balancer.router()`, or `Router.attach(attachment)` in a worker). Any policy; `p2c:latency` is the router's default. */
  router: Router;
  /**
   * The origin this dispatcher serves, `http://name[:port]` or `https://...`:
   * a request for another origin is refused with `InvalidConfig`. Its scheme
   * is the backends' (`https:` also sets TLS `servername` to its host name
   * unless `pool.connect` says otherwise; a backend with a spec `hostname`,
   * a DNS-discovered one, gets that name as its `Host` and `servername`).
   */
  origin: string | URL;
  /** Backends one request may try, each a different one; default 3 (1 = never retry). */
  attempts?: number;
  /**
   * Retries allowed on top of requests: a {@link RetryBudget}, or the options of a {@link RatioRetryBudget}.
   * Default: the router's `retryBudget`, the one default of every retry loop (outbound/retry-run.ts): the Balancer's `retryBudget` (shared by every thread) when it has one; without one, every retry within `attempts` is allowed (and counted), as for `connect()`, `routedStream()` and `TcpProxy`.
   */
  retryBudget?: RetryBudget | RetryBudgetOptions;
  /** The outcome of a response by its status; default 5xx `'failure'`, else `'success'`. The response goes to the caller either way. */
  statusOutcome?: (statusCode: number) => AttemptOutcome;
  /** Options of every backend's undici `Pool` (`connections`, `keepAliveTimeout`, `connect`, `headersTimeout`...). */
  pool?: Record<string, unknown>;
  /** Makes a backend's dispatcher; default `new Pool(origin, pool)` from the `undici` you installed. */
  factory?: PoolFactory;
  /** Shared per-backend request counters for `/metrics` (`HttpCounters.create`). */
  counters?: HttpCounters;
  /** The default admission band of every request (see {@link RouteOptions.band}). */
  band?: number;
  /** The default longest wait for admission, ms. */
  admissionTimeoutMs?: number;
  /** Per-request routing from the dispatch options (headers, path): a key, a failover priority, an admission band. */
  route?: (options: Dispatcher.DispatchOptions) => RouteOptions | undefined;
  /** Monotonic milliseconds for latencies; default `performance.now` (the `timers`' clock when given). */
  clock?: () => number;
  /**
   * Hedged requests (docs/http.md, "Hedged requests"): an idempotent request
   * with a replayable body whose response headers have not come after a delay
   * is sent again to another backend; the first response wins, the other
   * attempt is cancelled. `true` for the defaults (the backend's p95 of latency
   * to headers, one hedge per request); each hedge is a retry of the retry budget.
   */
  hedge?: HedgeOptions | boolean;
  /** The clock and timers hedge delays run on; default the process's. */
  timers?: TimerSource;
}

const OPTION_KEYS = [
  'router',
  'origin',
  'attempts',
  'retryBudget',
  'statusOutcome',
  'pool',
  'factory',
  'counters',
  'band',
  'admissionTimeoutMs',
  'route',
  'clock',
  'hedge',
  'timers',
];
const ROUTE_KEYS = ['key', 'priority', 'band', 'admissionTimeoutMs', 'hedge'];

/**
 * The installed undici's pools run the older handler API natively: undici 7
 * (its dispatchers unwrap new-API handlers into it). undici 8 speaks only
 * the new API and ships `Dispatcher1Wrapper` for older callers.
 */
const NATIVE_LEGACY = !('Dispatcher1Wrapper' in undici);

function defaultFactory(origin: string, options: Record<string, unknown>): BackendDispatcher {
  return new Pool(origin, options) as unknown as BackendDispatcher;
}

function checkFunction(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== 'function') invalidConfig(field, 'must be a function', value);
}

function parseOrigin(value: unknown): URL {
  let url: URL;
  try {
    url = new URL(value instanceof URL ? value.href : String(value));
  } catch {
    return invalidConfig('options.origin', 'must be an http: or https: URL such as "http://api.internal"', value);
  }
  if (typeof value !== 'string' && !(value instanceof URL)) invalidConfig('options.origin', 'must be a string or a URL', value);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') invalidConfig('options.origin', 'must use http: or https:', value);
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '')
    invalidConfig('options.origin', 'must be an origin (scheme://host[:port]) without path, query or credentials', value);
  return url;
}

/** The budget option: without one, the router's `retryBudget` (the Balancer's), as for every retry loop. */
function checkBudget(value: unknown, router: Router): RetryBudget {
  if (value === undefined) return router.retryBudget;
  if (typeof value !== 'object' || value === null)
    return invalidConfig('options.retryBudget', 'must be a RetryBudget or its options', value);
  const v = value as Partial<RetryBudget>;
  if (typeof v.onRequest === 'function' && typeof v.tryRetry === 'function') return value as RetryBudget;
  return new RatioRetryBudget(value as RetryBudgetOptions);
}

/** The pool options with, for https:, TLS `servername` set to the origin's host name unless given. */
function poolOptions(value: unknown, url: URL): Record<string, unknown> {
  if (value !== undefined && (typeof value !== 'object' || value === null)) invalidConfig('options.pool', 'must be an object', value);
  const pool = { ...(value as Record<string, unknown> | undefined) };
  const connect = pool['connect'];
  if (url.protocol === 'https:' && typeof connect !== 'function') {
    pool['connect'] = { servername: url.hostname, ...(connect as Record<string, unknown> | undefined) };
  }
  return pool;
}

/**
 * Routes every HTTP request through a poise Router: one decision per
 * request, a keep-alive undici `Pool` per backend, retries on another
 * backend within a retry budget. undici is a peer dependency (7 or 8).
 *
 * @example
 * import { fetch } from 'undici';
 * const dispatcher = new PoiseDispatcher({ router: balancer.router(), origin: 'http://api' });
 * const res = await fetch('http://api/users/7', { dispatcher });
 */
export class PoiseDispatcher extends Dispatcher {
  /** The origin served (`URL.origin` form, e.g. `http://api`). */
  readonly origin: string;
  private readonly core: DispatchCore;
  private readonly route: ((options: Dispatcher.DispatchOptions) => RouteOptions | undefined) | undefined;
  private readonly admission: { band: number; timeoutMs: number | undefined } | undefined;
  private isClosed = false;
  private isDestroyed = false;
  private closing: Promise<void> | undefined;

  constructor(opts: PoiseDispatcherOptions) {
    super();
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, OPTION_KEYS);
    const router = opts.router;
    if (typeof router !== 'object' || router === null || typeof router.acquire !== 'function' || typeof router.member !== 'function')
      invalidConfig('options.router', 'must be a Router (balancer.router() or Router.attach())', router);
    const url = parseOrigin(opts.origin);
    this.origin = url.origin;
    checkFunction(opts.statusOutcome, 'options.statusOutcome');
    checkFunction(opts.factory, 'options.factory');
    checkFunction(opts.route, 'options.route');
    checkFunction(opts.clock, 'options.clock');
    if (opts.counters !== undefined && !(opts.counters instanceof HttpCounters))
      invalidConfig('options.counters', 'must be an HttpCounters (HttpCounters.create / attach)', opts.counters);
    this.admission = checkAdmissionOptions(opts);
    this.route = opts.route;
    const timers = timersOption(opts.timers);
    const given = (opts.pool as { connect?: { servername?: unknown } } | undefined)?.connect?.servername !== undefined;
    const pools = new BackendPools(
      url.protocol,
      opts.factory ?? defaultFactory,
      poolOptions(opts.pool, url),
      (event, args) => this.forward(event, args),
      given,
    );
    this.core = {
      router,
      pools,
      budget: checkBudget(opts.retryBudget, router),
      counters: opts.counters,
      attempts: integerIn(opts.attempts ?? 3, 'options.attempts', 1, 10),
      statusOutcome: opts.statusOutcome ?? defaultStatusOutcome,
      legacyPools: opts.factory === undefined && NATIVE_LEGACY,
      clock: opts.clock ?? (opts.timers === undefined ? () => performance.now() : () => timers.now()),
      release: { latencyMs: 0 },
      seenVersion: router.version,
      loadReports: new ResponseLoadReports(opts.counters),
      hedge: resolveHedge(opts.hedge),
      hedges: { sent: 0, won: 0, cancelled: 0, refused: 0 },
      timers,
    };
    // The adaptive delay reads the backends' latency quantiles: this router's request releases feed them.
    if (this.core.hedge !== undefined && this.core.hedge.delayMs < 0) router.recordLatencyQuantiles();
  }

  /** True once {@link close} or {@link destroy} was called. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** True once {@link destroy} was called. */
  get destroyed(): boolean {
    return this.isDestroyed;
  }

  /**
   * The `endpoint-load-metrics` response headers this dispatcher saw: read
   * (recorded for the owner's ORCA weights, `health.orca`), malformed
   * (ignored), busy (another thread was recording the same backend's).
   */
  get loadReports(): Readonly<LoadReportCounts> {
    return this.core.loadReports.counts;
  }

  /** What this dispatcher's hedging did (this thread's requests; the shared per-backend counts are `HttpCounters`' `hedges`). */
  get hedges(): Readonly<HedgeCounts> {
    return this.core.hedges;
  }

  /** Backend pools open now (one per backend that served a request and is still a member). */
  get pools(): number {
    return this.core.pools.size;
  }

  /**
   * undici's dispatch: routes one request. Refusals — another origin, a bad
   * `route` result, a closed dispatcher, no backend to take it — reach the
   * handler's error callback as a `PoiseError`, with nothing counted.
   */
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    if (typeof handler !== 'object' || handler === null) invalidConfig('dispatch(handler)', 'must be an object', handler);
    const sink = toSink(handler);
    let hints: RouteHints | undefined;
    try {
      if (this.isClosed)
        throw new PoiseError('Closed', `dispatch: the dispatcher for ${this.origin} is ${this.isDestroyed ? 'destroyed' : 'closed'}`);
      if (typeof options !== 'object' || options === null) invalidConfig('dispatch(options)', 'must be an object', options);
      this.checkOrigin(options.origin);
      hints = this.hints(options);
    } catch (err) {
      sink.error(null, err as Error);
      return false;
    }
    const req = new RoutedRequest(
      this.core,
      options,
      sink,
      hints,
      isReplayable(options.body),
      isIdempotent(options.method, options.idempotent),
    );
    return req.start();
  }

  /** Stops taking requests, lets those in flight finish, then closes every backend pool. */
  override close(): Promise<void>;
  override close(callback: () => void): void;
  override close(callback?: () => void): Promise<void> | undefined {
    if (!this.isClosed) this.isClosed = true;
    this.closing ??= this.core.pools.close();
    if (callback === undefined) return this.closing;
    this.closing.then(callback, callback);
    return undefined;
  }

  /** Stops taking requests and destroys every backend pool: requests in flight fail with `err` (released as `cancelled`). */
  override destroy(): Promise<void>;
  override destroy(err: Error | null): Promise<void>;
  override destroy(callback: () => void): void;
  override destroy(err: Error | null, callback: () => void): void;
  override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | undefined {
    const err = typeof a === 'function' ? null : (a ?? null);
    const callback = typeof a === 'function' ? a : b;
    this.isClosed = true;
    this.isDestroyed = true;
    const done = this.core.pools.destroy(err);
    if (callback === undefined) return done;
    done.then(callback, callback);
    return undefined;
  }

  private forward(event: string, args: unknown[]): void {
    // As undici's Agent: the origin, then this dispatcher ahead of the pool's targets.
    const [origin, targets, ...rest] = args;
    const emit = this.emit as (event: string, ...args: unknown[]) => boolean;
    emit.call(this, event, origin, [this, ...((targets as Dispatcher[] | undefined) ?? [])], ...rest);
  }

  private checkOrigin(origin: unknown): void {
    if (origin === undefined || origin === null || origin === this.origin) return;
    let got: string | undefined;
    if (origin instanceof URL) got = origin.origin;
    else if (typeof origin === 'string') {
      try {
        got = new URL(origin).origin;
      } catch {
        got = undefined;
      }
    }
    if (got !== this.origin)
      invalidConfig(
        'dispatch(options).origin',
        `must be this dispatcher's origin ${this.origin}`,
        origin instanceof URL ? origin.href : origin,
      );
  }

  /** The request's routing: the dispatcher's defaults and what `route` returns for it, checked. */
  private hints(options: Dispatcher.DispatchOptions): RouteHints | undefined {
    const r = this.route === undefined ? undefined : this.route(options);
    if (r === undefined)
      return this.admission === undefined ? undefined : { key: undefined, priority: undefined, admission: this.admission };
    if (typeof r !== 'object' || r === null) invalidConfig('options.route', 'must return an object or undefined', r);
    checkOptionKeys(r, ROUTE_KEYS, 'route()');
    if (r.key !== undefined && typeof r.key !== 'string' && typeof r.key !== 'number')
      invalidConfig('route().key', 'must be a string or a number', r.key);
    if (typeof r.key === 'number') finiteNumber(r.key, 'route().key');
    if (r.priority !== undefined) integerIn(r.priority, 'route().priority', 0);
    if (r.hedge !== undefined && typeof r.hedge !== 'boolean') invalidConfig('route().hedge', 'must be a boolean', r.hedge);
    let admission = this.admission;
    if (r.band !== undefined) {
      admission = {
        band: finiteNumber(r.band, 'route().band'),
        timeoutMs:
          r.admissionTimeoutMs === undefined ? admission?.timeoutMs : positiveNumber(r.admissionTimeoutMs, 'route().admissionTimeoutMs'),
      };
    } else if (r.admissionTimeoutMs !== undefined) {
      if (admission === undefined)
        invalidConfig('route().admissionTimeoutMs', 'needs an admission band (route().band or options.band)', r.admissionTimeoutMs);
      admission = { band: admission.band, timeoutMs: positiveNumber(r.admissionTimeoutMs, 'route().admissionTimeoutMs') };
    }
    return { key: r.key, priority: r.priority, admission, hedge: r.hedge };
  }
}
