/**
 * The retry budget region: one budget that every thread of a process draws
 * on, in the LoadTable (two lines, layout.ts). Retries are allowed up to a
 * ratio of the requests of a sliding window, with a floor (Envoy's and
 * Finagle's budgets):
 *
 *     allowed = max(floor, ratio × requests in the window) − retries in the window
 *
 * Words (relative to the region's base):
 *
 * | word   | field        | written by | unit |
 * |--------|--------------|------------|------|
 * | 0      | bucket ms    | owner      | a tenth of the window; 0 = no budget (every retry allowed, still counted) |
 * | 1      | ratio        | owner      | parts per million of the window's requests |
 * | 2      | floor share  | owner      | this process's floor, thousandths of a retry per window (the floor, or the fleet floor divided among the fleet's processes) |
 * | 3      | floor        | owner      | the configured floor, whole retries per window |
 * | 4      | processes    | owner      | processes sharing the floor (1 without a fleet budget) |
 * | 5, 6, 7| allowed, refused, requests | every thread | totals since the table was made (wrap at 2^32) |
 * | 8–17   | requests[b]  | every thread | bucket b's requests: `tag << 20 \| count` |
 * | 18–27  | retries[b]   | every thread | bucket b's granted retries, the same |
 *
 * The window is ten buckets of `bucket ms`; bucket number n (the shared
 * clock's ms divided by `bucket ms`) lives in ring entry n mod 10, and each
 * counter word carries n's low 11 bits as a tag, so a word whose tag is not
 * the bucket's holds an expired count (read as 0, replaced on the next add).
 * The tag travels in the same word as the count, so an add and a reset are
 * one compare-and-swap and no count is lost to a reset. A count saturates at
 * 2^20 − 1 per bucket. A ring entry left untouched for exactly a multiple of
 * 10,240 buckets would be read as current (its tag comes round again): a
 * budget idle that long counts one stale bucket once.
 *
 * A grant is exact across threads: a thread reads the window, decides, and
 * takes the retry with a compare-and-swap on the current bucket's retries
 * word from the value it read; every other grant in that bucket changes that
 * word, so two threads cannot both spend the last retry (the loser reads the
 * window again). Requests added meanwhile only raise the allowance. The one
 * inexactness is the instant a bucket turns: a thread still reading the old
 * bucket and one already in the new one each see their own word.
 *
 * The configuration words are written by the owner one by one (bucket ms
 * last, so a budget turned on is whole); a grant that reads them during a
 * change mixes old and new for one decision.
 */
import { RETRY_WORDS } from './layout.js';
import { spinPause } from '../core/pause.js';

/** Ring entries (buckets) per window. */
export const RETRY_BUCKETS = 10;
const W_BUCKET_MS = 0;
const W_RATIO_PPM = 1;
const W_FLOOR_SHARE = 2;
const W_FLOOR = 3;
const W_PROCESSES = 4;
const W_ALLOWED = 5;
const W_REFUSED = 6;
const W_REQUESTS = 7;
const W_REQ = 8;
const W_RET = W_REQ + RETRY_BUCKETS;
const COUNT_BITS = 20;
const COUNT_MASK = (1 << COUNT_BITS) - 1;
const TAG_MASK = 0x7ff;

/** A budget's configuration as the region stores it. */
export interface RetryBudgetConfig {
  /** A tenth of the window, ms (≥ 1). */
  bucketMs: number;
  /** Retries per request, parts per million (0 … 1,000,000). */
  ratioPpm: number;
  /** Retries allowed per window whatever the traffic (the whole fleet's, with a fleet budget). */
  floor: number;
}

/** Counts of the window in force. */
export interface RetryWindowCounts {
  requests: number;
  retries: number;
}

/** Totals since the table was made (each wraps at 2^32). */
export interface RetryTotals {
  requests: number;
  allowed: number;
  refused: number;
}

/** The retry budget words of one table (or of one private array: a per-dispatcher budget). */
export class RetryRegion {
  private readonly i32: Int32Array;
  private readonly base: number;

  /** `i32` may be shared (a LoadTable) or private (`new Int32Array(RETRY_WORDS)`). */
  constructor(i32: Int32Array, base = 0) {
    this.i32 = i32;
    this.base = base;
  }

  /** A region over its own private words (one thread's budget). */
  static local(): RetryRegion {
    return new RetryRegion(new Int32Array(RETRY_WORDS), 0);
  }

  // --- the owner -------------------------------------------------------------------

  /** Turns the budget on with `config`, or off (`undefined`: every retry allowed). Owner only. */
  configure(config: RetryBudgetConfig | undefined): void {
    const i32 = this.i32;
    const b = this.base;
    if (config === undefined) {
      Atomics.store(i32, b + W_BUCKET_MS, 0);
      return;
    }
    Atomics.store(i32, b + W_RATIO_PPM, config.ratioPpm);
    Atomics.store(i32, b + W_FLOOR, config.floor);
    this.shareFloor(Math.max(1, Atomics.load(i32, b + W_PROCESSES)));
    // Last: a grant that sees the budget on sees its ratio and floor (SC stores, in order).
    Atomics.store(i32, b + W_BUCKET_MS, config.bucketMs);
  }

  /** Divides the floor among `processes` (a fleet budget); 1 gives this process the whole floor. Owner only. */
  shareFloor(processes: number): void {
    const i32 = this.i32;
    const b = this.base;
    const n = Math.max(1, Math.floor(processes));
    Atomics.store(i32, b + W_PROCESSES, n);
    Atomics.store(i32, b + W_FLOOR_SHARE, Math.floor((Atomics.load(i32, b + W_FLOOR) * 1000) / n));
  }

  // --- every thread ----------------------------------------------------------------

  /** Whether a budget is configured (otherwise every retry is allowed). */
  get enabled(): boolean {
    return Atomics.load(this.i32, this.base + W_BUCKET_MS) !== 0;
  }

  /** A request (not a retry) was made at `nowMs` (wrapped shared-clock ms). */
  onRequest(nowMs: number): void {
    const i32 = this.i32;
    // add: every thread counts into one word; only statistics read it.
    Atomics.add(i32, this.base + W_REQUESTS, 1);
    const bucketMs = Atomics.load(i32, this.base + W_BUCKET_MS);
    if (bucketMs === 0) return;
    const n = Math.floor(nowMs / bucketMs);
    this.bump(this.base + W_REQ + (n % RETRY_BUCKETS), n & TAG_MASK);
  }

  /** Asks for one retry at `nowMs`: true, and counted, when the budget allows it; false (counted refused) otherwise. */
  tryRetry(nowMs: number): boolean {
    const i32 = this.i32;
    const b = this.base;
    const bucketMs = Atomics.load(i32, b + W_BUCKET_MS);
    if (bucketMs !== 0) {
      const n = Math.floor(nowMs / bucketMs);
      const at = b + W_RET + (n % RETRY_BUCKETS);
      const tag = n & TAG_MASK;
      for (;;) {
        // The current bucket's word first: the compare-and-swap below takes the retry only if it still holds this value.
        const cur = Atomics.load(i32, at);
        const retries = this.sum(W_RET, n, at, cur);
        const requests = this.sum(W_REQ, n, -1, 0);
        // Thousandths of a retry: ratio (ppm) × requests / 1000; at most 10^6 × 10 × 2^20, exact in a double.
        const allowance = Math.max(
          Atomics.load(i32, b + W_FLOOR_SHARE),
          Math.floor((Atomics.load(i32, b + W_RATIO_PPM) * requests) / 1000),
        );
        if (allowance - retries * 1000 < 1000) {
          Atomics.add(i32, b + W_REFUSED, 1);
          return false;
        }
        if (Atomics.compareExchange(i32, at, cur, next(cur, tag)) === cur) break;
        spinPause();
      }
    }
    Atomics.add(i32, b + W_ALLOWED, 1);
    return true;
  }

  /** Whole retries the budget would grant at `nowMs` (Infinity without a budget). */
  available(nowMs: number): number {
    const i32 = this.i32;
    const bucketMs = Atomics.load(i32, this.base + W_BUCKET_MS);
    if (bucketMs === 0) return Number.POSITIVE_INFINITY;
    const { requests, retries } = this.window(nowMs);
    const allowance = Math.max(
      Atomics.load(i32, this.base + W_FLOOR_SHARE),
      Math.floor((Atomics.load(i32, this.base + W_RATIO_PPM) * requests) / 1000),
    );
    return Math.max(0, Math.floor((allowance - retries * 1000) / 1000));
  }

  /** The requests and granted retries of the window in force at `nowMs` (zeros without a budget). */
  window(nowMs: number): RetryWindowCounts {
    const bucketMs = Atomics.load(this.i32, this.base + W_BUCKET_MS);
    if (bucketMs === 0) return { requests: 0, retries: 0 };
    const n = Math.floor(nowMs / bucketMs);
    return { requests: this.sum(W_REQ, n, -1, 0), retries: this.sum(W_RET, n, -1, 0) };
  }

  /** Totals since the table was made (each wraps at 2^32). */
  totals(): RetryTotals {
    const i32 = this.i32;
    const b = this.base;
    return {
      requests: Atomics.load(i32, b + W_REQUESTS) >>> 0,
      allowed: Atomics.load(i32, b + W_ALLOWED) >>> 0,
      refused: Atomics.load(i32, b + W_REFUSED) >>> 0,
    };
  }

  /** The configuration in force (undefined when off), and the processes sharing the floor. */
  config(): (RetryBudgetConfig & { processes: number }) | undefined {
    const i32 = this.i32;
    const b = this.base;
    const bucketMs = Atomics.load(i32, b + W_BUCKET_MS);
    if (bucketMs === 0) return undefined;
    return {
      bucketMs,
      ratioPpm: Atomics.load(i32, b + W_RATIO_PPM),
      floor: Atomics.load(i32, b + W_FLOOR),
      processes: Atomics.load(i32, b + W_PROCESSES),
    };
  }

  /** Adds one to the counter word at `at` for the bucket tagged `tag` (a word of an older bucket starts again at 1). */
  private bump(at: number, tag: number): void {
    const i32 = this.i32;
    for (;;) {
      const cur = Atomics.load(i32, at);
      // compareExchange: a reset and an add must not lose each other's count.
      if (Atomics.compareExchange(i32, at, cur, next(cur, tag)) === cur) return;
      spinPause();
    }
  }

  /** The counts of series `first` over the ten buckets ending at bucket `n`; the word at `known` is taken as `value`. */
  private sum(first: number, n: number, known: number, value: number): number {
    const i32 = this.i32;
    let total = 0;
    for (let k = 0; k < RETRY_BUCKETS; k++) {
      const m = n - k;
      if (m < 0) break;
      const at = this.base + first + (m % RETRY_BUCKETS);
      const w = at === known ? value : Atomics.load(i32, at);
      if (w >>> COUNT_BITS === (m & TAG_MASK)) total += w & COUNT_MASK;
    }
    return total;
  }
}

/** The counter word after one more event of the bucket tagged `tag`. */
function next(cur: number, tag: number): number {
  if (cur >>> COUNT_BITS !== tag) return (tag << COUNT_BITS) | 1;
  return (cur & COUNT_MASK) === COUNT_MASK ? cur : cur + 1;
}
