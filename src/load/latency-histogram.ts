/**
 * Latency histogram: per slot, a decaying log-scale histogram of the
 * request latency to response headers, so that every thread reads the same
 * quantile of a backend (the HTTP dispatcher's adaptive hedge delay is the
 * backend's p95: docs/http.md, "Hedged requests"). Written by the feedback
 * path (runtime/feedback.ts) on every `success` release of a request lease
 * that carries a latency; read at hedge time (one request in flight past its
 * expected answer), never by a pick.
 *
 * Words 40–47 of the slot's third line (layout.ts): 15 buckets of 16-bit
 * counts, two to a word (bucket k in word 40 + k/2, its low half when k is
 * even), and in word 47's high half the samples since the last decay.
 * Bucket k holds latencies up to {@link BASE_US}·2^k µs (bucket 0: up to
 * 128 µs; bucket 13: up to 1.05 s); bucket 14 everything above.
 *
 * Decay: the writer whose sample is the {@link HALVE_AT}-th since the last
 * decay halves every count (a compare-and-swap per word, so a concurrent
 * increment is kept) and takes HALVE_AT off the sample count; the add that
 * counts samples returns a distinct value to each writer, so exactly one
 * writer decays per HALVE_AT samples. The histogram thus weighs the last
 * ~1,000 samples fully and older ones by halves; no count can exceed
 * 2·HALVE_AT, far below 2^16. A reader may see a bucket incremented and not
 * yet decayed, or the reverse: a quantile off by one sample's weight.
 */
import { S_LATENCY_HIST, type Layout } from './layout.js';

/** Buckets of the histogram. */
export const LATENCY_BUCKETS = 15;
/** Upper bound of bucket 0, µs; bucket k's is `BASE_US · 2^k`. */
export const BASE_US = 128;
/** Samples between two decays. */
export const HALVE_AT = 1024;
/** Words of the region in a slot. */
const WORDS = 8;
const LOW = 0xffff;
const HIGH_ONE = 1 << 16;

/** Bucket index of a latency in µs (no allocation). @internal */
export function bucketOf(us: number): number {
  if (!(us > BASE_US)) return 0;
  const k = Math.ceil(Math.log2(us / BASE_US));
  return Math.min(k, LATENCY_BUCKETS - 1);
}

/** The latency histograms of one table. */
export class LatencyHistogram {
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /** Owner: a new occupant of `slot` starts with no samples. */
  reset(slot: number): void {
    const o = this.layout.slot(slot) + S_LATENCY_HIST;
    for (let w = 0; w < WORDS; w++) Atomics.store(this.i32, o + w, 0);
  }

  /** Records one latency sample (ms) on `slot`: two atomic adds, and every {@link HALVE_AT}-th sample a decay. */
  record(slot: number, latencyMs: number): void {
    const i = this.i32;
    const o = this.layout.slot(slot) + S_LATENCY_HIST;
    const k = bucketOf(latencyMs * 1000);
    Atomics.add(i, o + (k >> 1), (k & 1) === 0 ? 1 : HIGH_ONE);
    const before = Atomics.add(i, o + WORDS - 1, HIGH_ONE) >>> 16;
    // Every HALVE_AT-th sample, not only the first: a decaying writer terminated mid-decay leaves the count past it.
    if (((before + 1) & (HALVE_AT - 1)) === 0) this.decay(o);
  }

  private decay(o: number): void {
    const i = this.i32;
    for (let w = 0; w < WORDS; w++) {
      const last = w === WORDS - 1;
      for (;;) {
        const old = Atomics.load(i, o + w);
        // The last word's high half is the sample count: kept as it is (HALVE_AT is taken off below).
        const next = last ? (old & ~LOW) | ((old & LOW) >>> 1) : ((old >>> 1) & 0x7fff7fff) | 0;
        if (Atomics.compareExchange(i, o + w, old, next) === old) break;
      }
    }
    Atomics.sub(i, o + WORDS - 1, HALVE_AT * HIGH_ONE);
  }

  /** The weight of bucket `k` on `slot` (decayed counts). */
  count(slot: number, k: number): number {
    const word = Atomics.load(this.i32, this.layout.slot(slot) + S_LATENCY_HIST + (k >> 1));
    return (k & 1) === 0 ? word & LOW : (word >>> 16) & LOW;
  }

  /**
   * The `q` quantile (0 < q < 1) of `slot`'s latencies, ms, interpolated
   * geometrically inside its bucket (linearly in bucket 0); -1 while the
   * histogram holds fewer than `minSamples` samples. A quantile in the last
   * (open) bucket reads as that bucket's lower bound times 2. Fifteen loads
   * and numbers: no allocation.
   */
  quantileMs(slot: number, q: number, minSamples: number): number {
    let total = 0;
    for (let k = 0; k < LATENCY_BUCKETS; k++) total += this.count(slot, k);
    if (total < minSamples || total === 0) return -1;
    const target = q * total;
    let below = 0;
    for (let k = 0; k < LATENCY_BUCKETS; k++) {
      const c = this.count(slot, k);
      if (c > 0 && below + c >= target) {
        const f = (target - below) / c;
        if (k === 0) return (f * BASE_US) / 1000;
        const lower = BASE_US * 2 ** (k - 1);
        return (lower * 2 ** f) / 1000;
      }
      below += c;
    }
    return (BASE_US * 2 ** (LATENCY_BUCKETS - 1)) / 1000;
  }
}
