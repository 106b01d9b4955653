/**
 * The per-backend families: one series (or one per state, role, admin
 * state) per backend of the scrape's snapshot, labelled cluster, backend,
 * priority, locality. Every value is a word of the shared LoadTable read by
 * the snapshot (../snapshot.ts).
 * @internal
 */
import { HealthFlag } from '../../load/load-table.js';
import type { Family, SeriesFamily } from '../family.js';
import { BACKEND_LABELS as BL, BACKEND_STATES, DB_ROLES, type BackendRow, type Snapshot } from '../snapshot.js';

/** A family with one series per backend, its value `value(row)`. */
function perBackend(
  name: string,
  help: string,
  value: (r: BackendRow) => number,
  kind: 'gauge' | 'counter' = 'gauge',
): SeriesFamily<Snapshot> {
  return {
    name,
    help,
    kind,
    labels: BL,
    read: (push, s) => {
      for (const r of s.rows) push(r.labels, value(r));
    },
  };
}

/** The per-backend families, in exposition order. @internal */
export const BACKEND_FAMILIES: readonly Family<Snapshot>[] = [
  {
    name: 'backend_state',
    help: 'Backend state: 1 for the state it is in, 0 for the others (removed = a tombstone still holding leases).',
    kind: 'gauge',
    labels: [...BL, 'state'],
    read: (push, s) => {
      for (const r of s.rows) for (const st of BACKEND_STATES) push({ ...r.labels, state: st }, r.state === st ? 1 : 0);
    },
  },
  perBackend(
    'backend_degraded',
    'Whether the backend is degraded (by its active check or the membership): used only when its priority has no healthy host.',
    (r) => ((r.stats.health & (HealthFlag.CheckDegraded | HealthFlag.MemberDegraded)) !== 0 ? 1 : 0),
  ),
  {
    name: 'backend_role',
    help: 'Database role: 1 for the role in force (the spec role, or what a roles check read; unknown when none or the check failed), 0 for the others.',
    kind: 'gauge',
    labels: [...BL, 'role'],
    read: (push, s) => {
      for (const r of s.rows)
        for (let k = 0; k < DB_ROLES.length; k++) push({ ...r.labels, role: DB_ROLES[k]! }, r.stats.dbRole === k ? 1 : 0);
    },
  },
  perBackend(
    'backend_replication_lag_seconds',
    "A replica's replay lag as its last roles check read it (0 on a primary, and on a replica that replayed all it received).",
    (r) => r.stats.lagMs / 1000,
  ),
  perBackend('backend_weight', 'Backend weight in force.', (r) => r.spec.weight),
  perBackend('backend_connections', 'Open connection leases on the backend, summed over every thread.', (r) => r.stats.connections),
  perBackend('backend_requests_in_flight', 'In-flight request leases on the backend, summed over every thread.', (r) => r.stats.requests),
  perBackend(
    'backend_picks_total',
    'Leases granted on the backend (routers add them in batches of up to 64).',
    (r) => r.stats.picks,
    'counter',
  ),
  perBackend('backend_latency_ewma_seconds', 'PeakEWMA request latency estimate, decayed to now.', (r) => r.latencyUs / 1e6),
  perBackend('backend_connect_time_ewma_seconds', 'PeakEWMA connect time estimate, decayed to now.', (r) => r.connectUs / 1e6),
  perBackend('backend_consecutive_failures', 'Consecutive failures since the last success.', (r) => r.stats.failures),
  perBackend('backend_consecutive_ejections', 'Consecutive ejections (the exponent of the ejection time).', (r) => r.stats.ejections),
  perBackend(
    'backend_ejections_total',
    'Ejections of the backend since it took its slot (passive health and outlier detection).',
    (r) => r.stats.ejectionsTotal,
    'counter',
  ),
  perBackend(
    'backend_slow_start_ratio',
    "Slow start's ramp factor of the backend now (Envoy's formula; 1 when slow start is off or the backend is not ramping).",
    (r) => r.ramp,
  ),
  perBackend(
    'backend_reported_weight_ratio',
    'The weight multiplier the backend reports about itself (agent check percentage, ORCA weight / mean); 1 without a report.',
    (r) => r.reported.multiplier,
  ),
  {
    name: 'backend_admin_state',
    help: 'What the backend asked of new traffic (agent check): 1 for ready, drain or maint, 0 for the others.',
    kind: 'gauge',
    labels: [...BL, 'admin'],
    read: (push, s) => {
      for (const r of s.rows) {
        const admin = r.reported.maint ? 'maint' : r.reported.drain ? 'drain' : 'ready';
        for (const a of ['ready', 'drain', 'maint']) push({ ...r.labels, admin: a }, a === admin ? 1 : 0);
      }
    },
  },
  perBackend('backend_ejection_remaining_seconds', 'Ejection time left; 0 when routable.', (r) => r.ejectedForMs / 1000),
  {
    name: 'backend_ejected_until_timestamp_seconds',
    help: 'Unix time the current ejection ends; 0 when not ejected.',
    kind: 'gauge',
    labels: BL,
    read: (push, s) => {
      for (const r of s.rows) push(r.labels, r.ejectedForMs > 0 ? (s.nowWallMs + r.ejectedForMs) / 1000 : 0);
    },
  },
];
