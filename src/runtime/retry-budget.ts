/**
 * Retry budget: how many retries a client may add on top of its requests,
 * so that a dying backend cannot multiply the load on the others (a retry
 * storm). Envoy's and Finagle's model: over a sliding window of `ttlMs`,
 *
 *     retries ≤ max(floor, ratio × requests),   floor = minRetriesPerSecond × ttlMs / 1000
 *
 * Defaults: 20 % (Envoy's and Finagle's), 10 retries/s and 10 s (Finagle's).
 *
 * One implementation, two homes (load/retry-region.ts holds the counters and
 * the rule):
 * - a Balancer's `retryBudget` lives in its LoadTable, so every thread of the
 *   process draws on one budget exactly; every router's
 *   {@link Router.retryBudget} is a view of it, and `connect()`,
 *   `routedStream()`, `TcpProxy` and the HTTP dispatcher use it. With a
 *   fleet budget (`FleetRetryBudget`, poise-lb/redis) the floor is divided
 *   among the fleet's processes.
 * - a {@link RatioRetryBudget} is the same counters in one thread's own
 *   memory (a dispatcher's budget when the Balancer has none).
 *
 * Callers see only {@link RetryBudget} (two calls).
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { wrapMs } from '../core/time.js';
import { integerIn, nonNegativeNumber, numberIn } from '../core/validate.js';
import { RETRY_BUCKETS, RetryRegion, type RetryBudgetConfig } from '../load/retry-region.js';

/** What a retry loop asks of a retry budget. */
export interface RetryBudget {
  /** A request (not a retry) was made: it adds `ratio` of a retry to the window. */
  onRequest(): void;
  /** Asks for one retry: true, and counted, when the budget allows it; false otherwise. */
  tryRetry(): boolean;
}

/** Options of a retry budget (a Balancer's `retryBudget`, a membership document's, a {@link RatioRetryBudget}'s). */
export interface RetryBudgetOptions {
  /** Retries allowed per request, in [0, 1]; default 0.2. */
  ratio?: number;
  /** Retries allowed per second whatever the traffic (the floor); default 10. With a fleet budget, the whole fleet's. */
  minRetriesPerSecond?: number;
  /** The window: how long a request or a retry counts, ms; default 10 000 (at least 10). */
  ttlMs?: number;
  /** Monotonic milliseconds; default `performance.now`. A {@link RatioRetryBudget}'s only (a Balancer's budget reads the shared clock). */
  clock?: () => number;
}

const KEYS = ['ratio', 'minRetriesPerSecond', 'ttlMs'] as const;

/** Validates budget options (`field` names them in messages) into the region's configuration. @internal */
export function resolveRetryBudget(opts: unknown, field: string, extra: readonly string[] = []): RetryBudgetConfig {
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) invalidConfig(field, 'must be an object', opts);
  const o = opts as RetryBudgetOptions;
  checkOptionKeys(o, [...KEYS, ...extra], field);
  const ratio = numberIn(o.ratio ?? 0.2, `${field}.ratio`, 0, 1);
  const perSecond = nonNegativeNumber(o.minRetriesPerSecond ?? 10, `${field}.minRetriesPerSecond`);
  const ttlMs = integerIn(o.ttlMs ?? 10_000, `${field}.ttlMs`, 10, 3_600_000);
  const floor = Math.floor(perSecond * (ttlMs / 1000));
  if (floor > 1_000_000) invalidConfig(`${field}.minRetriesPerSecond`, `allows ${floor} retries per window, more than 1000000`, perSecond);
  return { bucketMs: Math.max(1, Math.floor(ttlMs / RETRY_BUCKETS)), ratioPpm: Math.round(ratio * 1_000_000), floor };
}

/** A router's view of its LoadTable's budget: the process's one budget (`router.retryBudget`). */
export class SharedRetryBudget implements RetryBudget {
  private readonly region: RetryRegion;
  private readonly now: () => number;

  constructor(region: RetryRegion, now: () => number) {
    this.region = region;
    this.now = now;
  }

  /** Whether the Balancer configured a budget (without one, every retry is allowed and counted). */
  get enabled(): boolean {
    return this.region.enabled;
  }

  onRequest(): void {
    this.region.onRequest(this.now());
  }

  tryRetry(): boolean {
    return this.region.tryRetry(this.now());
  }

  /** Whole retries the budget would grant now (Infinity without a budget). */
  available(): number {
    return this.region.available(this.now());
  }
}

/**
 * A budget in one thread's own memory (the counters and rule of the shared
 * one). The window is kept as ten buckets of `ttlMs / 10`; a bucket expires
 * whole. Time comes from `clock` (monotonic ms, default `performance.now`).
 *
 * @example
 * const budget = new RatioRetryBudget({ ratio: 0.1, minRetriesPerSecond: 5 });
 * budget.onRequest();
 * if (budget.tryRetry()) retryElsewhere();
 */
export class RatioRetryBudget implements RetryBudget {
  private readonly region = RetryRegion.local();
  private readonly clock: () => number;

  constructor(opts: RetryBudgetOptions = {}) {
    const config = resolveRetryBudget(opts, 'retryBudget', ['clock']);
    if (opts.clock !== undefined && typeof opts.clock !== 'function')
      invalidConfig('retryBudget.clock', 'must be a function returning milliseconds', opts.clock);
    this.clock = opts.clock ?? (() => performance.now());
    this.region.configure(config);
  }

  onRequest(): void {
    this.region.onRequest(wrapMs(this.clock()));
  }

  tryRetry(): boolean {
    return this.region.tryRetry(wrapMs(this.clock()));
  }

  /** Whole retries the budget would grant now (for tests and diagnostics). */
  available(): number {
    return this.region.available(wrapMs(this.clock()));
  }
}
