/**
 * The one retry/ejection backoff of Poise: capped exponential with jitter
 * drawn from our own {@link Rng} (OS-seeded through `crypto.getRandomValues`
 * unless the caller hands in a seeded one, for replay).
 *
 * The delay before attempt `n` (0-based) is uniform in
 * `[baseMs, ceiling)` with `ceiling = min(maxMs, baseMs · 2^min(n + 1, maxExponent))`
 * — Sōzu's retry policy ([1, 2^k) units) with the cap applied before the
 * draw. Capping before the draw keeps the jitter at the cap: capping after
 * it (min(draw, maxMs)) would put most late draws exactly on `maxMs`, and
 * workers that failed together would retry together, which is the lockstep
 * jitter exists to prevent. When `maxMs == baseMs` the delay is exactly
 * `baseMs`.
 *
 * Used by passive health (ejection length), the Redis membership reader
 * (reconnect) and the publisher (retry after a lost conditional write).
 * @internal
 */
import { checkOptionKeys } from './errors.js';
import { Rng } from './rng.js';
import { integerIn, numberIn, positiveNumber } from './validate.js';

/** The largest backoff ceiling, 2^28 ms (3.1 days): well inside the 2^29 ms a wrapped time difference can carry. @internal */
export const MAX_BACKOFF_MS = 2 ** 28;

/** Backoff shape. @internal */
export interface BackoffOptions {
  /** The floor of every delay and the unit of the exponential, ms; finite > 0. */
  baseMs: number;
  /** The ceiling of every delay, ms; in [baseMs, 2^28]. */
  maxMs: number;
  /** Cap on the exponent; integer in [1, 30], default 30. */
  maxExponent?: number;
}

/**
 * A seeded capped exponential backoff. `delayMs` draws one float from the
 * Rng and allocates nothing.
 *
 * @example
 * const b = new Backoff({ baseMs: 100, maxMs: 5000 }, new Rng(7));
 * b.delayMs(0); // in [100, 200)
 * b.delayMs(9); // in [100, 5000)
 * @internal
 */
export class Backoff {
  readonly baseMs: number;
  readonly maxMs: number;
  readonly maxExponent: number;
  readonly #rng: Rng;

  /** Throws `InvalidConfig` naming `${field}.baseMs` (or maxMs, maxExponent). OS-seeded unless `rng` is given. */
  constructor(opts: BackoffOptions, rng: Rng = new Rng(), field = 'options.backoff') {
    checkOptionKeys(opts, ['baseMs', 'maxMs', 'maxExponent'], field);
    this.baseMs = positiveNumber(opts.baseMs, `${field}.baseMs`, 'milliseconds');
    this.maxMs = numberIn(opts.maxMs, `${field}.maxMs`, this.baseMs, MAX_BACKOFF_MS, 'milliseconds');
    this.maxExponent = integerIn(opts.maxExponent ?? 30, `${field}.maxExponent`, 1, 30);
    this.#rng = rng;
  }

  /** The upper bound of the delay before attempt `attempt` (0-based). */
  ceilingMs(attempt: number): number {
    return Math.min(this.maxMs, this.baseMs * 2 ** Math.min(attempt + 1, this.maxExponent));
  }

  /**
   * A delay in ms before attempt `attempt` (0-based; negative counts as 0):
   * uniform in [baseMs, ceilingMs(attempt)), never outside [baseMs,
   * ceilingMs(attempt)] (floating-point rounding of a draw just below 1 can
   * land on the ceiling itself).
   */
  delayMs(attempt: number): number {
    const ceiling = this.ceilingMs(Math.max(attempt, 0));
    return this.baseMs + this.#rng.float() * (ceiling - this.baseMs);
  }
}
