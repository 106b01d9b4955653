/**
 * Latency statistics of a run on Node's own HdrHistogram
 * (`perf_hooks.createHistogram`): each worker records its request latencies
 * in its own {@link RecordableHistogram}; the histogram travels back to the
 * main thread in the task's result (a Histogram is one of the native objects
 * `postMessage` clones: the clone refers to the same native histogram), where
 * `add()` merges the workers' counts exactly.
 *
 * Values are recorded in whole microseconds from 1 µs to one hour with three
 * significant figures: a value below 2048 µs is kept exactly, a larger one to
 * within 1/1024 (0.1 %) — finer than the 2 % buckets this replaced. Recording
 * allocates nothing.
 */
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/** The largest recordable latency, µs (one hour); larger ones are recorded as this. */
export const MAX_US = 3_600_000_000;

/** A latency histogram in µs: 1 µs to {@link MAX_US}, 3 significant figures. */
export function latencyHistogram(): RecordableHistogram {
  return createHistogram({ lowest: 1, highest: MAX_US, figures: 3 });
}

/** Records one latency given in ms, rounded to whole µs and clamped to [1 µs, {@link MAX_US}] (NaN and negatives count as 1 µs). */
export function recordMs(h: RecordableHistogram, ms: number): void {
  const us = Math.round(ms * 1000);
  h.record(us >= 1 ? Math.min(us, MAX_US) : 1); // NaN fails `>= 1`
}

/** The percentiles the CDF is drawn at: every whole percent, then the tail. */
const CDF_PERCENTILES = [...Array.from({ length: 99 }, (_, i) => i + 1), 99.5, 99.9, 99.95, 99.99, 100];

/** The latency columns of one policy, in ms (NaN when nothing was recorded). */
export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  p999: number;
  mean: number;
  max: number;
  /** Points (ms, cumulative fraction) of the CDF, at {@link CDF_PERCENTILES}; the last is (max, 1). */
  cdf: Array<[number, number]>;
}

/**
 * The summary of `h`. A percentile is HdrHistogram's: the highest value
 * equivalent (within the precision above) to the ⌊q·n + ½⌋-th smallest
 * recorded value.
 *
 * @example
 * const h = latencyHistogram();
 * for (const ms of [1, 2, 3, 4]) recordMs(h, ms);
 * summarize(h).p50; // 2
 */
export function summarize(h: RecordableHistogram): LatencySummary {
  const count = h.count;
  if (count === 0) return { count, p50: Number.NaN, p99: Number.NaN, p999: Number.NaN, mean: Number.NaN, max: Number.NaN, cdf: [] };
  const at = (p: number): number => h.percentile(p) / 1000;
  return {
    count,
    p50: at(50),
    p99: at(99),
    p999: at(99.9),
    mean: h.mean / 1000,
    max: h.max / 1000,
    cdf: CDF_PERCENTILES.map((p) => [at(p), p / 100]),
  };
}
