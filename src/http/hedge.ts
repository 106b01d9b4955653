/**
 * Hedged requests (Dean and Barroso, "The Tail at Scale", 2013): a request
 * whose response headers have not come after a delay is sent again to a
 * backend it has not tried; the first response wins and every other attempt
 * is aborted, its lease released as `cancelled` (no blame: the backend was
 * slow, not wrong).
 *
 * - Which requests: a replayable body (none, a string, bytes — never a
 *   stream) and an idempotent method (GET, HEAD, OPTIONS, PUT, DELETE, or
 *   undici's `idempotent` flag); `route()` may say `hedge: true` for one it
 *   knows is safe (a POST search) or `hedge: false`. Upgrades are never hedged.
 * - When: `delayMs` when configured; otherwise the slow attempt's backend's
 *   `quantile` (p95) of latency to headers, read from the LoadTable's
 *   shared histogram (load/latency-histogram.ts: every thread agrees),
 *   never below `minDelayMs`; a backend with fewer than `minSamples`
 *   samples is not hedged (no figure yet to say what is late).
 * - How many: `maxHedges` per request (default 1), and each one is a retry
 *   of the request's retry run (outbound/retry-run.ts: `attempts`, then the
 *   budget): a hedge the budget refuses is not sent and is counted.
 *
 * This module holds the options and one request's race ({@link HedgeRace});
 * request.ts decides when to send.
 */
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import type { TimerSource } from '../core/timers.js';
import { integerIn, nonNegativeNumber, numberIn } from '../core/validate.js';
import type { AttemptBase } from './attempt.js';
import type { HttpCounters } from './counters.js';

/** Options of hedging (`PoiseDispatcher`'s `hedge`). */
export interface HedgeOptions {
  /** A fixed delay, ms, before a request without response headers is hedged. Default: adaptive (the backend's `quantile` of latency to headers). */
  delayMs?: number;
  /** The quantile of the adaptive delay, in (0, 1); default 0.95. */
  quantile?: number;
  /** The adaptive delay's floor, ms; default 1. */
  minDelayMs?: number;
  /** Samples a backend's histogram needs before its requests are hedged (adaptive delay); default 20. */
  minSamples?: number;
  /** Hedges per request at most, 1–8; default 1. Each is also an attempt of `attempts`. */
  maxHedges?: number;
}

/** Validated hedge options. @internal */
export interface HedgeConfig {
  /** Fixed delay, ms; -1 = adaptive. */
  readonly delayMs: number;
  readonly quantile: number;
  readonly minDelayMs: number;
  readonly minSamples: number;
  readonly maxHedges: number;
}

/** What one dispatcher's hedging did (every request of this dispatcher, this thread). */
export interface HedgeCounts {
  /** Hedges sent. */
  sent: number;
  /** Requests whose response came from a hedge. */
  won: number;
  /** Attempts aborted because another one's response came first (their leases released as `cancelled`). */
  cancelled: number;
  /** Hedges the retry budget refused (not sent). */
  refused: number;
}

const KEYS = ['delayMs', 'quantile', 'minDelayMs', 'minSamples', 'maxHedges'];

/** Validates the `hedge` option (`InvalidConfig` naming `options.hedge.<field>`); undefined when absent or `false`. @internal */
export function resolveHedge(value: unknown): HedgeConfig | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) value = {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    invalidConfig('options.hedge', 'must be an object, true or false', value);
  const o = value as HedgeOptions;
  checkOptionKeys(o, KEYS, 'options.hedge');
  const delayMs = o.delayMs === undefined ? -1 : nonNegativeNumber(o.delayMs, 'options.hedge.delayMs');
  if (delayMs > 3_600_000) invalidConfig('options.hedge.delayMs', 'must be at most 3600000 (an hour)', delayMs);
  if (o.delayMs !== undefined && (o.quantile !== undefined || o.minDelayMs !== undefined || o.minSamples !== undefined))
    invalidConfig('options.hedge.delayMs', 'is a fixed delay: quantile, minDelayMs and minSamples are the adaptive delay’s', o.delayMs);
  const quantile = numberIn(o.quantile ?? 0.95, 'options.hedge.quantile', 0, 1);
  if (quantile <= 0 || quantile >= 1) invalidConfig('options.hedge.quantile', 'must be strictly between 0 and 1', quantile);
  return {
    delayMs,
    quantile,
    minDelayMs: numberIn(o.minDelayMs ?? 1, 'options.hedge.minDelayMs', 0, 3_600_000),
    minSamples: integerIn(o.minSamples ?? 20, 'options.hedge.minSamples', 1, 1000),
    maxHedges: integerIn(o.maxHedges ?? 1, 'options.hedge.maxHedges', 1, 8),
  };
}

/** The delay before hedging `a` (ms), or -1 when it is not hedged (adaptive, too few samples). @internal */
export function hedgeDelayMs(config: HedgeConfig, a: AttemptBase): number {
  if (config.delayMs >= 0) return config.delayMs;
  const q = a.lease.latencyQuantileMs(config.quantile, config.minSamples);
  return q < 0 ? -1 : Math.max(config.minDelayMs, q);
}

/** The error a losing attempt is aborted with (never seen by the caller). */
const LOST = new PoiseError('Cancelled', 'hedged request: another attempt answered first');

/**
 * One request's race: the attempts in flight before its response, and the
 * timer of its next hedge. Made at the request's first send when it may be
 * hedged. @internal
 */
export class HedgeRace {
  /** Attempts in flight, none answered yet (the first one included once a hedge was sent). */
  readonly racers: AttemptBase[] = [];
  /** Hedges sent. */
  sent = 0;
  private timer: unknown = undefined;
  private readonly timers: TimerSource;
  private readonly config: HedgeConfig;
  private readonly fire: () => void;

  constructor(config: HedgeConfig, timers: TimerSource, fire: () => void) {
    this.config = config;
    this.timers = timers;
    this.fire = () => {
      this.timer = undefined;
      fire();
    };
  }

  /** Sets the timer of the next hedge, after attempt `a` went out (none when every hedge was sent, or no delay is known). */
  arm(a: AttemptBase): void {
    this.stop();
    if (this.sent >= this.config.maxHedges) return;
    const ms = hedgeDelayMs(this.config, a);
    if (ms >= 0) this.timer = this.timers.setTimeout(this.fire, ms);
  }

  /** Clears the pending timer, if any. */
  stop(): void {
    if (this.timer === undefined) return;
    this.timers.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Is `a` one of the racers? */
  has(a: AttemptBase): boolean {
    return this.racers.includes(a);
  }

  /** Takes a failed racer out; true when others still race. */
  drop(a: AttemptBase): boolean {
    const k = this.racers.indexOf(a);
    if (k >= 0) this.racers.splice(k, 1);
    return this.racers.length > 0;
  }

  /**
   * The request ended without a response (an error of the caller's, this
   * host's, or a racer's that ends it): every racer still in flight is
   * released as `cancelled` now and aborted, so no lease outlives the
   * request (a slow backend would otherwise hold one until it answered).
   * Not counted as hedges cancelled: nothing won. The race is over.
   */
  abandon(): void {
    this.stop();
    for (const r of this.racers.splice(0)) {
      r.end('cancelled');
      r.control?.abort(LOST);
    }
  }

  /**
   * `winner`'s response came first: every other racer is aborted and its
   * lease released as `cancelled` now (each counted on its own backend);
   * the counts say who won. The race is over.
   */
  settle(winner: AttemptBase, counts: HedgeCounts, counters: HttpCounters | undefined): void {
    this.stop();
    if (winner.hedge) {
      counts.won++;
      counters?.hedge(winner.lease.slot, winner.lease.generation, 'won');
    }
    const losers = this.racers.splice(0);
    for (const r of losers) {
      if (r === winner) continue;
      counts.cancelled++;
      counters?.hedge(r.lease.slot, r.lease.generation, 'cancelled');
      r.end('cancelled');
      // A racer still queued in its pool is aborted at its start (request.ts: not live).
      r.control?.abort(LOST);
    }
  }
}
