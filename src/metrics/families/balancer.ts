/**
 * The per-balancer families, labelled by cluster: the membership in force
 * and its source, slots and tombstones, reclaims, the retry budget, the
 * priority plan, active health checks and outlier detection. Their values
 * come from the scrape's snapshot (../snapshot.ts) and from the Balancer's
 * own fields, read when the registry asks.
 * @internal
 */
import type { MembershipSource } from '../../membership/source.js';
import type { Balancer } from '../../runtime/balancer.js';
import type { Family } from '../family.js';
import type { Snapshot } from '../snapshot.js';

/** What the per-balancer families read: the scrape's snapshot, the balancer, its membership source. @internal */
export interface BalancerView {
  readonly s: Snapshot;
  readonly balancer: Balancer;
  readonly source: MembershipSource | undefined;
}

const C = ['cluster'] as const;
const CP = ['cluster', 'priority'] as const;

/** The source's kind from its description (`redis poise:x:snapshot`, `file members.yaml`, an array). @internal */
export function sourceKind(source: MembershipSource): string {
  const d = source.description ?? '';
  if (d.startsWith('redis')) return 'redis';
  if (d.startsWith('file')) return 'file';
  const scheme = /^(dns|srv|k8s):/.exec(d)?.[1];
  if (scheme !== undefined) return scheme;
  return 'static';
}

/** The membership in force, in exposition order. @internal */
export const MEMBERSHIP_FAMILIES: readonly Family<BalancerView>[] = [
  {
    name: 'membership_version',
    help: 'Membership version in force (0 before the first).',
    kind: 'gauge',
    labels: C,
    read: (push, { s, balancer }) => push({ cluster: s.cluster }, balancer.version),
  },
  {
    name: 'membership_info',
    help: 'The membership in force: lineage (empty when none) and source kind; always 1.',
    kind: 'gauge',
    labels: ['cluster', 'lineage', 'source'],
    read: (push, { s, balancer, source }) =>
      push({ cluster: s.cluster, lineage: balancer.lineage ?? '', source: source === undefined ? 'none' : sourceKind(source) }, 1),
  },
  {
    name: 'membership_applied',
    help: 'Whether a membership is in force (1) or none was applied yet (0).',
    kind: 'gauge',
    labels: C,
    read: (push, { s, balancer }) => push({ cluster: s.cluster }, balancer.hasMembership ? 1 : 0),
  },
];

/** The membership source's state: registered only when collectMetrics is given a source. @internal */
export const SOURCE_FAMILIES: readonly Family<BalancerView>[] = [
  {
    name: 'membership_source_up',
    help: 'Whether the membership source is connected (Redis) or healthy (file: no problem reported).',
    kind: 'gauge',
    labels: ['cluster', 'source'],
    read: (push, { s, source }) => {
      if (source === undefined) return;
      const up = source.connected ?? source.problem === undefined;
      push({ cluster: s.cluster, source: sourceKind(source) }, up ? 1 : 0);
    },
  },
];

/** A per-cluster family of one series: `value(view)`. */
function perCluster(name: string, help: string, kind: 'gauge' | 'counter', value: (v: BalancerView) => number): Family<BalancerView> {
  return { name, help, kind, labels: C, read: (push, v) => push({ cluster: v.s.cluster }, value(v)) };
}

/** A per-priority gauge of the priority plan (no series without a plan). */
function perPriority(
  name: string,
  help: string,
  value: (p: NonNullable<Snapshot['plan']>['priorities'][number]) => number,
): Family<BalancerView> {
  return {
    name,
    help,
    kind: 'gauge',
    labels: CP,
    read: (push, { s }) => {
      for (const p of s.plan?.priorities ?? []) push({ cluster: s.cluster, priority: String(p.priority) }, value(p));
    },
  };
}

/** A per-cluster counter with one series per value of `label`, each read by its own function, in order. */
function perLabelValue(
  name: string,
  help: string,
  label: string,
  values: readonly (readonly [value: string, read: (s: Snapshot) => number])[],
): Family<BalancerView> {
  return {
    name,
    help,
    kind: 'counter',
    labels: ['cluster', label],
    read: (push, { s }) => {
      for (const [value, read] of values) push({ cluster: s.cluster, [label]: value }, read(s));
    },
  };
}

/** Slots, reclaims, retries, the priority plan, health checks and outlier detection, in exposition order. @internal */
export const BALANCER_FAMILIES: readonly Family<BalancerView>[] = [
  perCluster(
    'membership_last_change_timestamp_seconds',
    'Unix time the membership in force was applied; 0 before the first.',
    'gauge',
    ({ balancer }) => (balancer.lastChangeAt ?? 0) / 1000,
  ),
  {
    name: 'slots',
    help: 'Load-table slots: used by live backends, held by tombstones (removed backends with leases still open), free.',
    kind: 'gauge',
    labels: ['cluster', 'state'],
    read: (push, { s, balancer }) => {
      let live = 0;
      let tomb = 0;
      for (const r of s.rows) {
        if (r.state === 'removed') tomb++;
        else live++;
      }
      push({ cluster: s.cluster, state: 'live' }, live);
      push({ cluster: s.cluster, state: 'tombstone' }, tomb);
      push({ cluster: s.cluster, state: 'free' }, balancer.table.capacity - live - tomb);
    },
  },
  perCluster('reclaims_total', 'Exited worker threads whose leases the owner reclaimed.', 'counter', ({ s }) => s.reclaims.events),
  perCluster(
    'reclaimed_leases_total',
    'Leases subtracted from the shared counters on behalf of exited threads.',
    'counter',
    ({ s }) => s.reclaims.leases,
  ),
  perLabelValue(
    'retries_total',
    'Retries on another backend after a failed connect or request (connect, routedStream, the proxy, the HTTP dispatcher on the shared budget), by whether the retry budget allowed them.',
    'outcome',
    [
      ['allowed', (s) => s.retries.allowed],
      ['refused', (s) => s.retries.refused],
    ],
  ),
  perCluster(
    'retry_budget_requests_total',
    'Requests counted by the retry budget (each deposits its ratio of a retry).',
    'counter',
    ({ s }) => s.retries.requests,
  ),
  {
    name: 'retry_budget_available',
    help: 'Retries the retry budget would grant now (absent without a budget).',
    kind: 'gauge',
    labels: C,
    read: (push, { s }) => {
      if (s.retries.available !== undefined) push({ cluster: s.cluster }, s.retries.available);
    },
  },
  perCluster(
    'retry_budget_processes',
    'Processes sharing the retry floor (1 without a fleet budget, or while Redis is away).',
    'gauge',
    ({ s }) => s.retries.processes,
  ),
  perPriority(
    'priority_availability_ratio',
    'Effective availability of each priority (overprovisioned, capped at 1) in the priority plan.',
    (p) => p.effectiveAvailabilityMillionths / 1e6,
  ),
  perPriority(
    'priority_traffic_share_ratio',
    'Share of traffic the priority plan sends to each priority (sums to 1 when anything is selectable).',
    (p) => p.shareMillionths / 1e6,
  ),
  perPriority('priority_panic', 'Whether the priority is in panic (1): its traffic goes to all its hosts, healthy or not.', (p) =>
    p.panic ? 1 : 0,
  ),
  perLabelValue('health_checks_total', 'Active health checks completed, by result.', 'result', [
    ['passed', (s) => s.health.checksPassed],
    ['failed', (s) => s.health.checksFailed],
  ]),
  perCluster(
    'health_check_timeouts_total',
    'Active health checks that failed by reaching their timeout.',
    'counter',
    ({ s }) => s.health.checksTimedOut,
  ),
  perLabelValue('health_transitions_total', 'Active-check transitions: down, up, degraded, not_degraded.', 'to', [
    ['down', (s) => s.health.markedDown],
    ['up', (s) => s.health.markedUp],
    ['degraded', (s) => s.health.markedDegraded],
    ['not_degraded', (s) => s.health.clearedDegraded],
  ]),
  perCluster(
    'health_check_unejections_total',
    'Ejections ended early by a passing active check (unejectOnPass).',
    'counter',
    ({ s }) => s.health.unejectedByCheck,
  ),
  perCluster('outlier_sweeps_total', 'Outlier-detection sweeps run.', 'counter', ({ s }) => s.health.outlierSweeps),
  perLabelValue('outlier_ejections_total', 'Outlier-detection ejections, by detector.', 'reason', [
    ['success_rate', (s) => s.health.ejectedSuccessRate],
    ['failure_percentage', (s) => s.health.ejectedFailurePercentage],
  ]),
  perCluster(
    'outlier_ejections_skipped_total',
    'Outliers left routable because maxEjectionPercent was reached.',
    'counter',
    ({ s }) => s.health.ejectionsSkippedMaxPercent,
  ),
];
