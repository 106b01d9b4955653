/**
 * A log-bucketed latency histogram that merges across workers.
 *
 * Values are recorded in microseconds into buckets whose bounds grow by
 * {@link GROWTH} (2 %), so every percentile is exact to within 2 % relative
 * error from 1 µs to an hour, in a fixed array of {@link BUCKETS} counts —
 * recording allocates nothing, and merging W workers' histograms is W
 * element-wise additions. Values under 1 µs land in bucket 0.
 */

/** Bucket bound ratio: bucket i holds values in [GROWTH^(i-1), GROWTH^i) µs. */
export const GROWTH = 1.02;
const LOG_GROWTH = Math.log(GROWTH);
/** Enough buckets to reach one hour (3.6e9 µs). */
export const BUCKETS = Math.ceil(Math.log(3.6e9) / LOG_GROWTH) + 2;

/** What crosses the thread boundary (structured-clonable). */
export interface HistogramData {
  counts: Float64Array;
  count: number;
  sumUs: number;
  minUs: number;
  maxUs: number;
}

/**
 * @example
 * const h = new Histogram();
 * h.recordMs(4.2);
 * h.merge(Histogram.from(otherWorker.data()));
 * h.percentileMs(0.99);
 */
export class Histogram {
  private readonly counts: Float64Array;
  private n = 0;
  private sum = 0;
  private min = Number.POSITIVE_INFINITY;
  private max = 0;

  constructor(counts?: Float64Array) {
    this.counts = counts ?? new Float64Array(BUCKETS);
  }

  /** Rebuilds a histogram sent by another thread. */
  static from(data: HistogramData): Histogram {
    const h = new Histogram(Float64Array.from(data.counts));
    h.n = data.count;
    h.sum = data.sumUs;
    h.min = data.minUs;
    h.max = data.maxUs;
    return h;
  }

  /** The bucket index of a value in µs. */
  static bucketOf(us: number): number {
    if (!(us >= 1)) return 0;
    return Math.min(BUCKETS - 1, 1 + Math.floor(Math.log(us) / LOG_GROWTH));
  }

  /** Records one latency in milliseconds (negative and NaN count as 0). */
  recordMs(ms: number): void {
    const us = ms > 0 ? ms * 1000 : 0;
    this.counts[Histogram.bucketOf(us)]! += 1;
    this.n++;
    this.sum += us;
    if (us < this.min) this.min = us;
    if (us > this.max) this.max = us;
  }

  /** Adds another histogram's counts into this one. */
  merge(other: Histogram): this {
    for (let i = 0; i < BUCKETS; i++) this.counts[i]! += other.counts[i]!;
    this.n += other.n;
    this.sum += other.sum;
    this.min = Math.min(this.min, other.min);
    this.max = Math.max(this.max, other.max);
    return this;
  }

  /** Number of recorded values. */
  get count(): number {
    return this.n;
  }

  /** Mean in ms (NaN when empty). */
  meanMs(): number {
    return this.n === 0 ? Number.NaN : this.sum / this.n / 1000;
  }

  /** Largest recorded value in ms (NaN when empty). */
  maxMs(): number {
    return this.n === 0 ? Number.NaN : this.max / 1000;
  }

  /**
   * The q-quantile (q in [0, 1]) in ms: the geometric middle of the bucket
   * holding the ⌈q·n⌉-th smallest value, clamped to the recorded min and max.
   * NaN when empty.
   */
  percentileMs(q: number): number {
    if (this.n === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil(q * this.n));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(this.max, Math.max(this.min, Histogram.midpointUs(i))) / 1000;
    }
    return this.max / 1000;
  }

  /** Points (ms, cumulative fraction) of the CDF, one per non-empty bucket. */
  cdf(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      const c = this.counts[i]!;
      if (c === 0) continue;
      seen += c;
      out.push([Math.min(this.max, Histogram.upperUs(i)) / 1000, seen / this.n]);
    }
    return out;
  }

  /** The structured-clonable state, for postMessage. */
  data(): HistogramData {
    return { counts: this.counts, count: this.n, sumUs: this.sum, minUs: this.min, maxUs: this.max };
  }

  private static midpointUs(i: number): number {
    return i === 0 ? 0.5 : GROWTH ** (i - 0.5);
  }

  private static upperUs(i: number): number {
    return i === 0 ? 1 : GROWTH ** i;
  }
}
