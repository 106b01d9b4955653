/**
 * The HTTP dispatcher's per-backend families (registered when
 * collectMetrics is given the shared HttpCounters): attempts by outcome,
 * retries granted and refused, hedges, load reports, and the latency histogram.
 * Each backend's row is read once per scrape ({@link HttpView}) and shared
 * by the five families of that pass.
 * @internal
 */
import { HEDGE_RESULTS, HTTP_OUTCOMES, LATENCY_BUCKETS_SECONDS, type HttpBackendFigures } from '../../http/counters.js';
import type { Family } from '../family.js';
import { BACKEND_LABELS as BL, type BackendRow } from '../snapshot.js';

/** What the HTTP families read: each backend row of the scrape's snapshot with its HttpCounters figures. @internal */
export type HttpView = ReadonlyMap<BackendRow, HttpBackendFigures>;

/** A counter with one series per backend, its value `value(figures)`. */
function perBackend(name: string, help: string, value: (f: HttpBackendFigures) => number): Family<HttpView> {
  return {
    name,
    help,
    kind: 'counter',
    labels: BL,
    read: (push, figures) => {
      for (const [r, f] of figures) push(r.labels, value(f));
    },
  };
}

/** The HTTP families, in exposition order. @internal */
export const HTTP_FAMILIES: readonly Family<HttpView>[] = [
  {
    name: 'http_requests_total',
    help: 'HTTP attempts sent to the backend, by how their lease ended (every dispatcher thread).',
    kind: 'counter',
    labels: [...BL, 'outcome'],
    read: (push, figures) => {
      for (const [r, f] of figures)
        for (let k = 0; k < HTTP_OUTCOMES.length; k++) push({ ...r.labels, outcome: HTTP_OUTCOMES[k]! }, f.outcomes[k]!);
    },
  },
  perBackend(
    'http_retries_total',
    'Retries the retry budget granted after a failure on the backend (each to another backend, when one is left).',
    (f) => f.retries,
  ),
  perBackend(
    'http_retries_refused_total',
    'Requests that failed on the backend and were not retried: the retry budget was spent.',
    (f) => f.retriesRefused,
  ),
  {
    name: 'http_hedges_total',
    help: 'Hedged requests by result: sent (an attempt on the backend was slow), won (the hedge on the backend answered first), cancelled (an attempt on the backend lost to another), refused (the retry budget was spent).',
    kind: 'counter',
    labels: [...BL, 'result'],
    read: (push, figures) => {
      for (const [r, f] of figures)
        for (let k = 0; k < HEDGE_RESULTS.length; k++) push({ ...r.labels, result: HEDGE_RESULTS[k]! }, f.hedges[k]!);
    },
  },
  {
    name: 'http_load_reports_total',
    help: 'endpoint-load-metrics response headers (ORCA load reports) per backend: read, or malformed (ignored).',
    kind: 'counter',
    labels: [...BL, 'result'],
    read: (push, figures) => {
      for (const [r, f] of figures) {
        push({ ...r.labels, result: 'read' }, f.loadReports);
        push({ ...r.labels, result: 'malformed' }, f.loadReportsMalformed);
      }
    },
  },
  {
    name: 'http_response_latency_seconds',
    help: 'Latency from sending an HTTP attempt to its response headers, per backend (every dispatcher thread).',
    kind: 'histogram',
    labels: BL,
    bounds: LATENCY_BUCKETS_SECONDS,
    read: (push, figures) => {
      for (const [r, f] of figures) push(r.labels, f.buckets, f.latencySumSeconds);
    },
  },
];
