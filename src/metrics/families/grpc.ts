/**
 * The `poise` gRPC channels' per-backend families (registered when
 * collectMetrics is given the shared GrpcCounters): calls started, calls
 * ended by status class, retries granted and refused, ORCA trailers. Each
 * backend's row is read once per scrape ({@link GrpcView}) and shared by the
 * families of that pass.
 * @internal
 */
import { GRPC_STATUS_CLASSES, type GrpcBackendFigures } from '../../grpc/counters.js';
import type { Family } from '../family.js';
import { BACKEND_LABELS as BL, type BackendRow } from '../snapshot.js';

/** What the gRPC families read: each backend row of the scrape's snapshot with its GrpcCounters figures. @internal */
export type GrpcView = ReadonlyMap<BackendRow, GrpcBackendFigures>;

/** A counter with one series per backend and one per value of `label`, its values `values(figures)`. */
function byLabel(
  name: string,
  help: string,
  label: string,
  names: readonly string[],
  values: (f: GrpcBackendFigures) => readonly number[],
): Family<GrpcView> {
  return {
    name,
    help,
    kind: 'counter',
    labels: [...BL, label],
    read: (push, figures) => {
      for (const [r, f] of figures) {
        const v = values(f);
        for (let k = 0; k < names.length; k++) push({ ...r.labels, [label]: names[k]! }, v[k]!);
      }
    },
  };
}

/** The gRPC families, in exposition order. @internal */
export const GRPC_FAMILIES: readonly Family<GrpcView>[] = [
  {
    name: 'grpc_calls_started_total',
    help: 'gRPC calls started on the backend by the poise policy (every channel of every thread).',
    kind: 'counter',
    labels: BL,
    read: (push, figures) => {
      for (const [r, f] of figures) push(r.labels, f.started);
    },
  },
  byLabel(
    'grpc_calls_ended_total',
    'gRPC calls ended on the backend, by status class (ok, cancelled, deadline_exceeded, resource_exhausted, unavailable, error: any other).',
    'status_class',
    GRPC_STATUS_CLASSES,
    (f) => f.ended,
  ),
  byLabel(
    'grpc_retries_total',
    "Retries of grpc-js's retry policy that picked the backend: granted by the retry budget, or refused (dropped with UNAVAILABLE).",
    'result',
    ['granted', 'refused'],
    (f) => [f.retries, f.retriesRefused],
  ),
  byLabel(
    'grpc_load_reports_total',
    'endpoint-load-metrics-bin trailers (ORCA load reports) per backend: read, or malformed (ignored).',
    'result',
    ['read', 'malformed'],
    (f) => [f.loadReports, f.loadReportsMalformed],
  ),
];
