/**
 * `poise proxy --metrics HOST:PORT`: the flag, its help and the server it
 * starts (`/metrics` in the Prometheus text format, `/healthz`). Kept apart
 * from the listener flags in proxy.ts, like proxy-connection-flags.ts.
 */
import { PoiseError } from '../core/errors.js';
import { addressDetail, parseAddress } from '../core/spec.js';
import type { AdmissionStatsSource } from '../admission/admission-stats.js';
import type { MembershipSource } from '../membership/source.js';
import type { MetricsServer } from '../metrics/server.js';
import type { ProxyCounters } from '../proxy/counters.js';
import type { Balancer } from '../runtime/balancer.js';
import type { FlagSpecs, FlagValues } from './args.js';
import { UsageError } from './usage.js';

/** Flag specs (merged into the proxy's). */
export const METRICS_FLAGS = {
  metrics: { type: 'string' },
  'no-process-metrics': { type: 'boolean' },
} as const satisfies FlagSpecs;

/** Their --help lines. */
export const METRICS_HELP = `monitoring:
  --metrics HOST:PORT      serve GET /metrics (Prometheus text format: every backend's
                           state, connections, in-flight, PeakEWMA, ejections; the
                           proxy's accepted/refused/bytes/durations) and GET /healthz
                           (200 once a membership is in force and the listener is up,
                           503 with the reason before). The cluster label is --cluster,
                           else the --file document's "cluster", else "default". Also
                           prom-client's process and Node.js metrics (CPU, memory,
                           event-loop lag, heap, GC); see docs/monitoring.md
  --no-process-metrics     leave those out`;

/** `--metrics` → the address to serve on (and whether to add the process metrics), or undefined; throws {@link UsageError} naming the flag. */
export function metricsFlag(values: FlagValues<typeof METRICS_FLAGS>): { host: string; port: number; processMetrics: boolean } | undefined {
  const raw = values.metrics;
  if (raw === undefined) {
    if (values['no-process-metrics']) throw new UsageError('--no-process-metrics: needs --metrics', '--no-process-metrics');
    return undefined;
  }
  const at = parseAddress(raw);
  if (at === undefined) {
    const detail = addressDetail(raw);
    throw new UsageError(
      `--metrics: must be HOST:PORT with a port in [1, 65535], got ${JSON.stringify(raw)}${detail ? ` (${detail})` : ''}`,
      '--metrics',
    );
  }
  return { ...at, processMetrics: !values['no-process-metrics'] };
}

/** What the metrics server reads. */
export interface MetricsTarget {
  balancer: Balancer;
  counters: ProxyCounters;
  source: MembershipSource;
  /** The `cluster` label (`--cluster`); undefined: the cluster of the membership in force, else "default". */
  cluster: string | undefined;
  /** Why not every listener (--listen, each --band listener) accepts in every thread now; undefined when all do. */
  notAccepting: () => string | undefined;
  /** The admission gate's figures (with --band). */
  admission?: AdmissionStatsSource | undefined;
  /** Awaited before each scrape (gathers the worker threads' admission figures). */
  beforeScrape?: () => Promise<void>;
}

/** Starts the `/metrics` + `/healthz` server on `at`; throws `PoiseError` `Unavailable` naming --metrics when it cannot listen. */
export async function startMetrics(at: { host: string; port: number; processMetrics: boolean }, t: MetricsTarget): Promise<MetricsServer> {
  // Imported on first use: prom-client and the metrics modules cost an idle
  // proxy without --metrics several MB of RSS for nothing.
  const [{ Registry }, { collectMetrics }, { MetricsServer }] = await Promise.all([
    import('prom-client'),
    import('../metrics/collect.js'),
    import('../metrics/server.js'),
  ]);
  const registry = new Registry();
  collectMetrics(t.balancer, {
    registry,
    ...(t.cluster === undefined ? {} : { cluster: t.cluster }),
    processMetrics: at.processMetrics,
    source: t.source,
    proxy: t.counters,
    ...(t.admission === undefined ? {} : { admission: t.admission }),
  });
  const server = new MetricsServer({
    registry,
    host: at.host,
    port: at.port,
    ...(t.beforeScrape === undefined ? {} : { beforeScrape: t.beforeScrape }),
    notReady: () => (!t.balancer.hasMembership ? 'no membership in force' : t.notAccepting()),
  });
  try {
    await server.listen();
  } catch (err) {
    throw new PoiseError('Unavailable', `--metrics: cannot listen on ${at.host}:${at.port}: ${(err as Error).message}`, {
      field: '--metrics',
      cause: err,
    });
  }
  return server;
}
