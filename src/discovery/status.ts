/**
 * The status every discovery source keeps for metrics and `poise top`: one
 * small plain object per source, written only by that source (one writer),
 * read at scrape time by src/metrics/collect.ts. No callbacks, no history:
 * what the last query said, when the source last had a good answer, and how
 * many errors of each kind it met since it started.
 *
 * `state`:
 * - `'ok'`: the last query gave a good answer, now in force;
 * - `'stale'`: the last query failed (or answered nothing usable) and the
 *   last good membership stays in force;
 * - `'failing'`: no good answer yet since the source started (nothing in force
 *   from this source).
 */

/** Why a query of a discovery source failed: the label of `poise_discovery_errors_total{kind}`. */
export type DiscoveryErrorKind =
  /** The name does not exist (DNS NXDOMAIN; Kubernetes: no such service). */
  | 'notfound'
  /** The name exists but answered no usable record (an empty set during an outage; a slice with no ready endpoint). */
  | 'empty'
  /** The server failed (DNS SERVFAIL / REFUSED; an API server 5xx). */
  | 'servfail'
  /** No answer in time. */
  | 'timeout'
  /** A record or object that does not parse or validate (a bad SRV target, a bad port). */
  | 'malformed'
  /** The server could not be reached (connection refused, reset). */
  | 'unreachable'
  /** Anything else. */
  | 'other';

/** Every {@link DiscoveryErrorKind}, in a fixed order (metrics print a zero for each). */
export const DISCOVERY_ERROR_KINDS: readonly DiscoveryErrorKind[] = Object.freeze([
  'notfound',
  'empty',
  'servfail',
  'timeout',
  'malformed',
  'unreachable',
  'other',
]);

/** The state of a discovery source (see the file comment). */
export type DiscoveryState = 'ok' | 'stale' | 'failing';

/** One discovery source's status, as metrics and `poise top` read it. */
export interface DiscoveryStatus {
  /** The source as the user wrote it (`dns:api.internal:8080`, `srv:_pg._tcp.db.internal`, `k8s:ns/svc`). */
  readonly source: string;
  /** Wall-clock milliseconds (`Date.now()`) of the last good answer; 0 before the first. */
  lastSuccessMs: number;
  /** Errors since the source started, by kind (every kind present, 0 when none). */
  readonly errors: Record<DiscoveryErrorKind, number>;
  /** Backends in the membership in force from this source (the last good answer's). */
  records: number;
  /** See the file comment. */
  state: DiscoveryState;
}

/** A fresh status for `source`: no answer yet (`'failing'`), no errors. */
export function newDiscoveryStatus(source: string): DiscoveryStatus {
  const errors = {} as Record<DiscoveryErrorKind, number>;
  for (const kind of DISCOVERY_ERROR_KINDS) errors[kind] = 0;
  return { source, lastSuccessMs: 0, errors, records: 0, state: 'failing' };
}

/** A source that keeps a {@link DiscoveryStatus} (every source of src/discovery/). */
export interface DiscoveryStatusHolder {
  /** The source's status, the same object for its whole life (read it at any time). */
  readonly status: DiscoveryStatus;
}

/** Whether `source` keeps a {@link DiscoveryStatus} (metrics read it when it does). */
export function discoveryStatusOf(source: unknown): DiscoveryStatus | undefined {
  if (typeof source !== 'object' || source === null || !('status' in source)) return undefined;
  const status = (source as { status: unknown }).status;
  if (typeof status !== 'object' || status === null) return undefined;
  const s = status as Partial<DiscoveryStatus>;
  return typeof s.source === 'string' && typeof s.errors === 'object' && typeof s.state === 'string'
    ? (status as DiscoveryStatus)
    : undefined;
}
