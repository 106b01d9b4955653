/**
 * Passive health: consecutive failures eject a backend for an exponential
 * backoff with jitter, Sōzu's retry policy — after the k-th consecutive
 * ejection the wait is uniform in [1, 2^k) units of `baseMs` (k capped at
 * `maxTries`), the range capped at `maxMs` (core/backoff.ts). A success clears the failures and the
 * exponent. The jitter comes from the router's own OS-seeded `Rng`, so
 * workers that eject the same backend at once do not readmit it in lockstep.
 *
 * Defaults: 5 consecutive failures (Envoy's outlier detection, mysql2's
 * PoolCluster), 1 s units and 6 tries (Sōzu), at most 60 s.
 */
import { Backoff, MAX_BACKOFF_MS } from '../core/backoff.js';
import { invalidConfig, checkOptionKeys } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { integerIn, numberIn, positiveNumber } from '../core/validate.js';

/** Ejection options of a Router. */
export interface EjectionOptions {
  /** Consecutive failures that eject a backend; integer >= 1, default 5. */
  consecutiveFailures?: number;
  /** Backoff unit in ms; default 1000. */
  baseMs?: number;
  /** Ceiling of one ejection in ms; default 60000. */
  maxMs?: number;
  /** Cap on the backoff exponent; integer in [1, 30], default 6. */
  maxTries?: number;
}

/** Ejection options with defaults filled in. @internal */
export type ResolvedEjection = Required<EjectionOptions>;

/** Validates ejection options (`InvalidConfig` naming `options.ejection.<field>`). @internal */
export function resolveEjection(opts: EjectionOptions | undefined): ResolvedEjection {
  const o = opts ?? {};
  if (typeof o !== 'object') invalidConfig('options.ejection', 'must be an object', o);
  checkOptionKeys(o, ['consecutiveFailures', 'baseMs', 'maxMs', 'maxTries'], 'options.ejection');
  const consecutiveFailures = o.consecutiveFailures ?? 5;
  integerIn(consecutiveFailures, 'options.ejection.consecutiveFailures', 1);
  const baseMs = positiveNumber(o.baseMs ?? 1000, 'options.ejection.baseMs', 'milliseconds');
  const maxMs = numberIn(o.maxMs ?? 60_000, 'options.ejection.maxMs', baseMs, MAX_BACKOFF_MS, 'milliseconds');
  const maxTries = integerIn(o.maxTries ?? 6, 'options.ejection.maxTries', 1, 30);
  return { consecutiveFailures, baseMs, maxMs, maxTries };
}

/**
 * The ejection backoff: `delayMs(priorEjections)` is uniform in
 * [baseMs, min(maxMs, baseMs · 2^k)), k = min(priorEjections + 1, maxTries)
 * (core/backoff.ts), with jitter from the router's `rng`.
 *
 * @example
 * ejectionBackoff(resolveEjection({}), new Rng(1)).delayMs(0); // in [1000, 2000) ms
 * @internal
 */
export function ejectionBackoff(o: ResolvedEjection, rng: Rng): Backoff {
  return new Backoff({ baseMs: o.baseMs, maxMs: o.maxMs, maxExponent: o.maxTries }, rng, 'options.ejection');
}
