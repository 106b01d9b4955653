/**
 * Retry budget: how many retries a client may add on top of its requests,
 * so that a dying backend cannot multiply the load on the others (a retry
 * storm). Finagle's model: every request deposits `ratio` of a retry, every
 * retry withdraws one, deposits and withdrawals expire after `ttlMs`, and a
 * reserve of `minRetriesPerSecond × ttl` lets a client with little traffic
 * still retry. Over any window of `ttlMs`:
 *
 *     retries ≤ ratio × requests + minRetriesPerSecond × ttlMs / 1000
 *
 * Defaults: 20 % (Envoy's and Finagle's), 10 retries/s and 10 s (Finagle's).
 * The budget is per dispatcher, so per thread: the floor adds up over
 * threads and processes (neither Envoy's nor Finagle's is shared either).
 *
 * The dispatcher sees only {@link RetryBudget} (two calls), so a budget kept
 * elsewhere (shared memory, Redis) can replace this one.
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn, nonNegativeNumber, numberIn } from '../core/validate.js';

/** What the dispatcher asks of a retry budget. */
export interface RetryBudget {
  /** A request (not a retry) was admitted: deposit its share. */
  onRequest(): void;
  /** Asks for one retry: true, and withdrawn, when the budget allows it; false otherwise. */
  tryRetry(): boolean;
}

/** Options of {@link RatioRetryBudget}. */
export interface RetryBudgetOptions {
  /** Retries allowed per request, in [0, 1]; default 0.2. */
  ratio?: number;
  /** Retries allowed per second whatever the traffic (the reserve); default 10. */
  minRetriesPerSecond?: number;
  /** How long a deposit or a withdrawal counts, ms; default 10 000 (at least 10 ms). */
  ttlMs?: number;
  /** Monotonic milliseconds; default `performance.now`. */
  clock?: () => number;
}

/** Units of one retry; a request deposits `ratio × UNIT`, rounded (integer arithmetic, no drift). */
const UNIT = 1000;
/** The window is kept as this many slices; a slice expires whole. */
const SLICES = 10;

/**
 * The Finagle-style budget. Deposits and withdrawals are summed per time
 * slice (a tenth of `ttlMs`); a slice older than the window is cleared when
 * the clock comes back round to it. `onRequest` is O(1); `tryRetry` sums the
 * ten slices.
 *
 * @example
 * const budget = new RatioRetryBudget({ ratio: 0.1, minRetriesPerSecond: 5 });
 * budget.onRequest();
 * if (budget.tryRetry()) retryElsewhere();
 */
export class RatioRetryBudget implements RetryBudget {
  private readonly deposit: number;
  private readonly reserve: number;
  private readonly sliceMs: number;
  private readonly clock: () => number;
  /** Per ring entry: the absolute slice number it holds, and its deposits minus withdrawals (units). */
  private readonly sliceOf = new Float64Array(SLICES).fill(Number.NEGATIVE_INFINITY);
  private readonly net = new Float64Array(SLICES);
  /** The slice number of the last clock reading. */
  private slice = 0;

  constructor(opts: RetryBudgetOptions = {}) {
    if (typeof opts !== 'object' || opts === null) invalidConfig('retryBudget', 'must be an object', opts);
    checkOptionKeys(opts, ['ratio', 'minRetriesPerSecond', 'ttlMs', 'clock'], 'retryBudget');
    const ratio = numberIn(opts.ratio ?? 0.2, 'retryBudget.ratio', 0, 1);
    const perSecond = nonNegativeNumber(opts.minRetriesPerSecond ?? 10, 'retryBudget.minRetriesPerSecond');
    const ttlMs = integerIn(opts.ttlMs ?? 10_000, 'retryBudget.ttlMs', 10, 3_600_000);
    if (opts.clock !== undefined && typeof opts.clock !== 'function')
      invalidConfig('retryBudget.clock', 'must be a function returning milliseconds', opts.clock);
    this.deposit = Math.round(ratio * UNIT);
    this.reserve = Math.floor(perSecond * (ttlMs / 1000)) * UNIT;
    this.sliceMs = ttlMs / SLICES;
    this.clock = opts.clock ?? (() => performance.now());
  }

  onRequest(): void {
    if (this.deposit !== 0) this.net[this.current()]! += this.deposit;
  }

  tryRetry(): boolean {
    const i = this.current();
    if (this.balance() < UNIT) return false;
    this.net[i]! -= UNIT;
    return true;
  }

  /** Whole retries the budget would grant now (for tests and diagnostics). */
  available(): number {
    this.current();
    return Math.max(0, Math.floor(this.balance() / UNIT));
  }

  /** Ring index of the current slice, clearing it when it held an expired one. */
  private current(): number {
    const slice = Math.floor(this.clock() / this.sliceMs);
    this.slice = slice;
    const i = ((slice % SLICES) + SLICES) % SLICES;
    if (this.sliceOf[i] !== slice) {
      this.sliceOf[i] = slice;
      this.net[i] = 0;
    }
    return i;
  }

  /** Reserve plus the slices still inside the window (the current one and the nine before it). */
  private balance(): number {
    const oldest = this.slice - SLICES;
    let sum = this.reserve;
    for (let k = 0; k < SLICES; k++) if (this.sliceOf[k]! > oldest) sum += this.net[k]!;
    return sum;
  }
}
