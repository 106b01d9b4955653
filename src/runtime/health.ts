/**
 * Passive health: consecutive failures eject a backend for an exponential
 * backoff with jitter, Sōzu's retry policy — after the k-th consecutive
 * ejection the wait is uniform in [1, 2^k) units of `baseMs` (k capped at
 * `maxTries`), never above `maxMs`. A success clears the failures and the
 * exponent. The jitter comes from the router's own OS-seeded `Rng`, so
 * workers that eject the same backend at once do not readmit it in lockstep.
 *
 * Defaults: 5 consecutive failures (Envoy's outlier detection, mysql2's
 * PoolCluster), 1 s units and 6 tries (Sōzu), at most 60 s.
 */
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
  const maxMs = numberIn(o.maxMs ?? 60_000, 'options.ejection.maxMs', baseMs, 2 ** 28, 'milliseconds');
  const maxTries = integerIn(o.maxTries ?? 6, 'options.ejection.maxTries', 1, 30);
  return { consecutiveFailures, baseMs, maxMs, maxTries };
}

/**
 * The ejection length after `priorEjections` consecutive ejections:
 * `baseMs × u` with u uniform in [1, 2^k), k = min(priorEjections + 1, maxTries),
 * capped at `maxMs`.
 *
 * @example
 * backoffMs(0, resolveEjection({}), new Rng(1)); // 1000 ms (k = 1: [1, 2) units)
 * @internal
 */
export function backoffMs(priorEjections: number, o: ResolvedEjection, rng: Rng): number {
  const k = Math.min(priorEjections + 1, o.maxTries);
  const units = 1 + rng.float() * (2 ** k - 1);
  return Math.min(o.baseMs * units, o.maxMs);
}
