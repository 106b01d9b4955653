/**
 * Metrics whose values are read at scrape time, as objects of the shape a
 * prom-client Registry reads (`name`, `help`, `type`, `get`, `reset`):
 *
 * - gauges and counters filled from one scrape's snapshot of the table.
 *   prom-client's Gauge/Counter would keep a hashed label map per metric,
 *   reset and refill it on every scrape (a sort and a join per series);
 *   these hand the registry the values directly, about 3x cheaper per series.
 * - histograms whose buckets live in shared memory: the proxy's
 *   connection-duration histogram (the shared ProxyCounters, every worker's
 *   row) and the HTTP dispatcher's per-backend latency histograms (the
 *   shared HttpCounters). prom-client's own Histogram keeps its buckets in
 *   the thread that observes, so it cannot show other threads'
 *   observations.
 * @internal
 */
import type { Metric, MetricValueWithName } from 'prom-client';

/** Pushes one series: its labels and value. @internal */
export type Push = (labels: Record<string, string | number>, value: number) => void;

/** A gauge or counter whose series `fill` pushes at each scrape. @internal */
export function snapshotMetric(
  name: string,
  help: string,
  type: 'gauge' | 'counter',
  fill: (push: Push) => void,
): Metric & { name: string } {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValueWithName<string>[] }> {
      const values: MetricValueWithName<string>[] = [];
      fill((labels, value) => {
        values.push({ labels, value });
      });
      return Promise.resolve({ name, help, type, aggregator: 'sum', values });
    },
    reset(): void {
      // Nothing is kept between scrapes.
    },
  };
  return metric as unknown as Metric & { name: string };
}

/** Pushes one labelled histogram series: its bucket counts (not cumulative, the last `+Inf`) and sum. @internal */
export type PushHistogram = (labels: Record<string, string>, counts: readonly number[], sum: number) => void;

/** A histogram with labels whose series `fill` pushes at each scrape (`bounds` in seconds, `+Inf` implied). @internal */
export function snapshotHistogram(
  name: string,
  help: string,
  bounds: readonly number[],
  fill: (push: PushHistogram) => void,
): Metric & { name: string } {
  const les = [...bounds.map(String), '+Inf'];
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValueWithName<string>[] }> {
      const values: MetricValueWithName<string>[] = [];
      fill((labels, counts, sum) => {
        let cumulative = 0;
        for (let k = 0; k < les.length; k++) {
          cumulative += counts[k] ?? 0;
          values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: les[k]! }, value: cumulative });
        }
        values.push({ metricName: `${name}_sum`, labels, value: sum });
        values.push({ metricName: `${name}_count`, labels, value: cumulative });
      });
      return Promise.resolve({ name, help, type: 'histogram', aggregator: 'sum', values });
    },
    reset(): void {
      // The counts live in shared memory: nothing of this object to reset.
    },
  };
  return metric as unknown as Metric & { name: string };
}
