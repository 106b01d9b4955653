/**
 * poise-lb/metrics — Prometheus metrics read from the shared LoadTable
 * (prom-client) and the `/metrics` + `/healthz` server. Explicit named
 * exports only; at most 30 names (test/surface.test.ts).
 */
export {
  collectMetrics,
  BACKEND_STATES,
  type BackendState,
  type CollectMetricsOptions,
  type MetricsCollection,
} from './metrics/collect.js';
export { MetricsServer, type MetricsServerOptions } from './metrics/server.js';
export type { AdmissionStatsSource, AdmissionFigures, AdmissionBandFigures } from './admission/admission-stats.js';
