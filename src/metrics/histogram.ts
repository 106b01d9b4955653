/**
 * The proxy's connection-duration histogram as a prom-client metric whose
 * buckets are the shared {@link ProxyCounters} (every worker's row), read at
 * scrape time. prom-client's own Histogram keeps its buckets in the thread
 * that observes, so it cannot show other threads' observations; this object
 * has the shape the registry reads (`name`, `help`, `type`, `get`, `reset`).
 * @internal
 */
import type { Metric, MetricValueWithName } from 'prom-client';
import { ProxyCounter, type ProxyCounters } from '../net/proxy-counters.js';

/** The histogram metric over `counters`' duration buckets (`bounds` in seconds). @internal */
export function proxyDurationHistogram(name: string, counters: ProxyCounters, bounds: readonly number[]): Metric & { name: string } {
  const help = 'Duration of spliced client connections, accept to close (every proxy worker).';
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: MetricValueWithName<string>[] }> {
      const counts = counters.durationBuckets();
      const values: MetricValueWithName<string>[] = [];
      let cumulative = 0;
      for (let k = 0; k < counts.length; k++) {
        cumulative += counts[k]!;
        values.push({ metricName: `${name}_bucket`, labels: { le: k < bounds.length ? String(bounds[k]) : '+Inf' }, value: cumulative });
      }
      values.push({ metricName: `${name}_sum`, labels: {}, value: counters.total(ProxyCounter.DurationSumUs) / 1e6 });
      values.push({ metricName: `${name}_count`, labels: {}, value: cumulative });
      return Promise.resolve({ name, help, type: 'histogram', aggregator: 'sum', values });
    },
    reset(): void {
      // The counts are the proxy's shared counters: nothing of this object to reset.
    },
  };
  return metric as unknown as Metric & { name: string };
}
