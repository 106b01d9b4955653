/**
 * poise-lb/metrics — Prometheus metrics read from the shared LoadTable
 * (prom-client), the `/metrics` + `/healthz` server, and a strict parser of
 * the text format. Explicit named exports only.
 */
export {
  collectMetrics,
  BACKEND_STATES,
  type BackendState,
  type CollectMetricsOptions,
  type MetricsCollection,
} from './metrics/collect.js';
export { MetricsServer, type MetricsServerOptions } from './metrics/server.js';
export { parseMetricsText, type MetricFamily, type ParseMetricsOptions, type Sample } from './metrics/text-format.js';
export type { AdmissionStatsSource, AdmissionFigures, AdmissionBandFigures } from './admission/admission-stats.js';
