/**
 * collectMetrics: Prometheus metrics read from the LoadTable at scrape time.
 *
 * Nothing is counted twice and nothing is sent between threads: every
 * per-backend figure is a word (or a sum of per-thread cells) of the shared
 * table, so a scrape in the owner thread covers the routers of every worker.
 * A scrape only loads shared words with `Atomics.load` — it never takes a
 * lock a router waits on and never writes — so it cannot slow or block a
 * pick; it allocates its snapshot in the scraping thread, off the routing
 * path. One snapshot is read per scrape (the first metric's `get` reads
 * it, the rest of that synchronous pass reuse it).
 */
import { Registry, collectDefaultMetrics, register as defaultRegistry } from 'prom-client';
import { Backend, Prioritized, type Status } from '../core/candidate.js';
import { invalidConfig, checkOptionKeys, PoiseError } from '../core/errors.js';
import type { ResolvedBackendSpec } from '../core/spec.js';
import { EwmaSeries, HealthFlag, SlotState, type SlotStats } from '../load/load-table.js';
import type { MembershipSource } from '../membership/source.js';
import { DISCOVERY_ERROR_KINDS, discoveryStatusOf } from '../discovery/status.js';
import { DURATION_BUCKETS_SECONDS, ProxyCounter, REFUSAL_REASONS, type ProxyCounters } from '../proxy/counters.js';
import { PriorityWeightedRandom } from '../policy/priority/policy.js';
import type { PriorityPlan } from '../policy/priority/policy.js';
import type { Balancer } from '../runtime/balancer.js';
import type { AdmissionFigures, AdmissionStatsSource } from '../admission/admission-stats.js';
import type { HealthCounters } from '../health/stats.js';
import { HTTP_OUTCOMES, LATENCY_BUCKETS_SECONDS, type HttpBackendFigures, type HttpCounters } from '../http/counters.js';
import { proxyDurationHistogram, snapshotHistogram, snapshotMetric, type Push } from './snapshot-metrics.js';

/** The `role` label values of `poise_backend_role`, by role code (load/db-state.ts). */
export const DB_ROLES = ['unknown', 'primary', 'replica'] as const;

/** The `state` label values of `poise_backend_state` (exactly one is 1 per backend). */
export const BACKEND_STATES = ['ready', 'draining', 'unavailable', 'ejected', 'unhealthy', 'removed'] as const;
/** A backend state as metrics and `poise top` show it. */
export type BackendState = (typeof BACKEND_STATES)[number];

/** Options of {@link collectMetrics}. */
export interface CollectMetricsOptions {
  /** Where to register; default prom-client's global `register`. */
  registry?: Registry;
  /** Metric name prefix; default `'poise_'`. Must match `[a-zA-Z_:][a-zA-Z0-9_:]*` (or be empty). */
  prefix?: string;
  /**
   * The `cluster` label value. Default: the cluster the membership in force
   * names (`balancer.cluster`: a document's `"cluster"`, a Redis source's
   * cluster), read at each scrape, else `'default'`.
   */
  cluster?: string;
  /**
   * Also register prom-client's default process and Node.js metrics
   * (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
   * `nodejs_eventloop_lag_seconds`, `nodejs_heap_size_used_bytes`, GC
   * durations, ...; unprefixed, their standard names) on the same registry,
   * unless it holds them already. Default false: an application that
   * registers them itself (prom-client refuses a second registration)
   * keeps doing so. `poise proxy --metrics` turns it on.
   */
  processMetrics?: boolean;
  /** The membership source bound to the balancer: adds its kind and connection state. */
  source?: MembershipSource;
  /** A proxy's shared counters (every worker's row): adds the `proxy_*` metrics. */
  proxy?: ProxyCounters;
  /** An admission controller: adds the `admission_*` metrics. */
  admission?: AdmissionStatsSource;
  /** The HTTP dispatchers' shared counters (`HttpCounters`, `poise-lb/http`): adds the per-backend `http_*` metrics. */
  http?: HttpCounters;
  /** Options of the priority plan shown by `priority_*` (default Envoy's: overprovisioning 140 %, panic threshold 50 %). */
  plan?: { overprovisioningFactorPercent?: number; panicThresholdPercent?: number };
}

/** What {@link collectMetrics} registered. */
export interface MetricsCollection {
  /** The registry the metrics are in. */
  readonly registry: Registry;
  /** The full names registered. */
  readonly names: readonly string[];
  /** Removes them from the registry. */
  remove(): void;
}

/** One backend as one scrape saw it. @internal */
interface BackendRow {
  labels: { cluster: string; backend: string; priority: string; locality: string };
  slot: number;
  state: BackendState;
  stats: SlotStats;
  spec: ResolvedBackendSpec;
  latencyUs: number;
  connectUs: number;
  ejectedForMs: number;
  /** Slow start's factor now (1 when not ramping). */
  ramp: number;
  /** What the backend reports about itself. */
  reported: { multiplier: number; drain: boolean; maint: boolean };
}

/** One scrape's reading of everything. @internal */
interface Snapshot {
  /** The `cluster` label value of this scrape. */
  cluster: string;
  rows: BackendRow[];
  plan: PriorityPlan | undefined;
  nowWallMs: number;
  admission: AdmissionFigures | undefined;
  health: HealthCounters;
  reclaims: { events: number; leases: number };
  retries: ReturnType<Balancer['retryBudgetStats']>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/** The state a slot shows: its tag state, then ejection, then the active check. @internal */
export function backendState(stats: SlotStats, ejectedForMs: number, removed: boolean): BackendState {
  if (removed || stats.state === SlotState.Removed || stats.state === SlotState.Closing) return 'removed';
  if (stats.state === SlotState.Draining) return 'draining';
  if (stats.state === SlotState.Unavailable) return 'unavailable';
  if (ejectedForMs > 0) return 'ejected';
  if ((stats.health & (HealthFlag.Unhealthy | HealthFlag.AgentDown)) !== 0) return 'unhealthy';
  return 'ready';
}

/** `QueueFull` → `queue_full` (Prometheus label values are lower snake case by convention). */
function snake(reason: string): string {
  return reason.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** The source's kind from its description (`redis poise:x:snapshot`, `file members.yaml`, an array). */
function sourceKind(source: MembershipSource): string {
  const d = source.description ?? '';
  if (d.startsWith('redis')) return 'redis';
  if (d.startsWith('file')) return 'file';
  const scheme = /^(dns|srv|k8s):/.exec(d)?.[1];
  if (scheme !== undefined) return scheme;
  return 'static';
}

/**
 * Registers the balancer's metrics (per backend, per balancer, and the
 * proxy's and admission's when given) on a prom-client registry. Every
 * value is read when the registry is scraped. Throws `InvalidConfig` naming
 * a bad option; prom-client throws when a name is already registered.
 *
 * @example
 * import { Registry } from 'prom-client';
 * const registry = new Registry();
 * collectMetrics(balancer, { registry, cluster: 'api' });
 * const text = await registry.metrics(); // poise_backend_connections{cluster="api",backend="a",...} 3
 */
export function collectMetrics(balancer: Balancer, opts: CollectMetricsOptions = {}): MetricsCollection {
  if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
  checkOptionKeys(opts, ['registry', 'prefix', 'cluster', 'processMetrics', 'source', 'proxy', 'admission', 'http', 'plan']);
  if (typeof balancer !== 'object' || balancer === null || typeof balancer.slotEntries !== 'function')
    invalidConfig('balancer', 'must be a Balancer', balancer);
  const registry = opts.registry ?? defaultRegistry;
  if (!(registry instanceof Registry)) invalidConfig('options.registry', 'must be a prom-client Registry', registry);
  const prefix = opts.prefix ?? 'poise_';
  if (typeof prefix !== 'string' || (prefix !== '' && !NAME.test(prefix)))
    invalidConfig('options.prefix', 'must match [a-zA-Z_:][a-zA-Z0-9_:]* or be empty', prefix);
  const fixedCluster = opts.cluster;
  if (fixedCluster !== undefined && (typeof fixedCluster !== 'string' || fixedCluster.length === 0))
    invalidConfig('options.cluster', 'must be a non-empty string', fixedCluster);
  const processMetrics = opts.processMetrics ?? false;
  if (typeof processMetrics !== 'boolean') invalidConfig('options.processMetrics', 'must be a boolean', processMetrics);
  const planner = new PriorityWeightedRandom({ seed: 1, ...opts.plan });
  const { source, proxy, admission, http } = opts;
  if (http !== undefined && (typeof http !== 'object' || http === null || typeof http.figures !== 'function'))
    invalidConfig('options.http', 'must be an HttpCounters (poise-lb/http)', http);
  if (admission !== undefined && typeof admission?.admissionStats !== 'function')
    invalidConfig('options.admission', 'must have admissionStats()', admission);

  let snap: Snapshot | undefined;
  const read = (): Snapshot => {
    if (snap !== undefined) return snap;
    snap = takeSnapshot(balancer, fixedCluster ?? balancer.cluster ?? 'default', planner, admission);
    // Reused by every metric of this synchronous scrape pass, then dropped.
    queueMicrotask(() => {
      snap = undefined;
    });
    return snap;
  };

  const names: string[] = [];
  const BL = ['cluster', 'backend', 'priority', 'locality'] as const;
  // Label names are fixed per metric by the code below; the registry prints what each fill pushes.
  const add = (name: string, help: string, type: 'gauge' | 'counter', fill: (push: Push, s: Snapshot) => void): void => {
    const m = snapshotMetric(prefix + name, help, type, (push) => fill(push, read()));
    registry.registerMetric(m);
    names.push(m.name);
  };
  const gauge = (name: string, help: string, _labels: readonly string[], fill: (g: { set: Push }, s: Snapshot) => void): void =>
    add(name, help, 'gauge', (push, s) => fill({ set: push }, s));
  const counter = (name: string, help: string, _labels: readonly string[], fill: (c: { inc: Push }, s: Snapshot) => void): void =>
    add(name, help, 'counter', (push, s) => fill({ inc: push }, s));
  const perBackend = (name: string, help: string, value: (r: BackendRow) => number, kind: 'gauge' | 'counter' = 'gauge'): void => {
    if (kind === 'gauge')
      gauge(name, help, BL, (g, s) => {
        for (const r of s.rows) g.set(r.labels, value(r));
      });
    else {
      counter(name, help, BL, (c, s) => {
        for (const r of s.rows) c.inc(r.labels, value(r));
      });
    }
  };

  // --- per backend -----------------------------------------------------------
  gauge(
    'backend_state',
    'Backend state: 1 for the state it is in, 0 for the others (removed = a tombstone still holding leases).',
    [...BL, 'state'],
    (g, s) => {
      for (const r of s.rows) for (const st of BACKEND_STATES) g.set({ ...r.labels, state: st }, r.state === st ? 1 : 0);
    },
  );
  perBackend(
    'backend_degraded',
    'Whether the backend is degraded (by its active check or the membership): used only when its priority has no healthy host.',
    (r) => ((r.stats.health & (HealthFlag.CheckDegraded | HealthFlag.MemberDegraded)) !== 0 ? 1 : 0),
  );
  gauge(
    'backend_role',
    'Database role: 1 for the role in force (the spec role, or what a roles check read; unknown when none or the check failed), 0 for the others.',
    [...BL, 'role'],
    (g, s) => {
      for (const r of s.rows)
        for (let k = 0; k < DB_ROLES.length; k++) g.set({ ...r.labels, role: DB_ROLES[k]! }, r.stats.dbRole === k ? 1 : 0);
    },
  );
  perBackend(
    'backend_replication_lag_seconds',
    "A replica's replay lag as its last roles check read it (0 on a primary, and on a replica that replayed all it received).",
    (r) => r.stats.lagMs / 1000,
  );
  perBackend('backend_weight', 'Backend weight in force.', (r) => r.spec.weight);
  perBackend('backend_connections', 'Open connection leases on the backend, summed over every thread.', (r) => r.stats.connections);
  perBackend('backend_requests_in_flight', 'In-flight request leases on the backend, summed over every thread.', (r) => r.stats.requests);
  perBackend(
    'backend_picks_total',
    'Leases granted on the backend (routers add them in batches of up to 64).',
    (r) => r.stats.picks,
    'counter',
  );
  perBackend('backend_latency_ewma_seconds', 'PeakEWMA request latency estimate, decayed to now.', (r) => r.latencyUs / 1e6);
  perBackend('backend_connect_time_ewma_seconds', 'PeakEWMA connect time estimate, decayed to now.', (r) => r.connectUs / 1e6);
  perBackend('backend_consecutive_failures', 'Consecutive failures since the last success.', (r) => r.stats.failures);
  perBackend('backend_consecutive_ejections', 'Consecutive ejections (the exponent of the ejection time).', (r) => r.stats.ejections);
  perBackend(
    'backend_ejections_total',
    'Ejections of the backend since it took its slot (passive health and outlier detection).',
    (r) => r.stats.ejectionsTotal,
    'counter',
  );
  perBackend(
    'backend_slow_start_ratio',
    "Slow start's ramp factor of the backend now (Envoy's formula; 1 when slow start is off or the backend is not ramping).",
    (r) => r.ramp,
  );
  perBackend(
    'backend_reported_weight_ratio',
    'The weight multiplier the backend reports about itself (agent check percentage, ORCA weight / mean); 1 without a report.',
    (r) => r.reported.multiplier,
  );
  gauge(
    'backend_admin_state',
    'What the backend asked of new traffic (agent check): 1 for ready, drain or maint, 0 for the others.',
    [...BL, 'admin'],
    (g, s) => {
      for (const r of s.rows) {
        const admin = r.reported.maint ? 'maint' : r.reported.drain ? 'drain' : 'ready';
        for (const a of ['ready', 'drain', 'maint']) g.set({ ...r.labels, admin: a }, a === admin ? 1 : 0);
      }
    },
  );
  perBackend('backend_ejection_remaining_seconds', 'Ejection time left; 0 when routable.', (r) => r.ejectedForMs / 1000);
  gauge('backend_ejected_until_timestamp_seconds', 'Unix time the current ejection ends; 0 when not ejected.', BL, (g, s) => {
    for (const r of s.rows) g.set(r.labels, r.ejectedForMs > 0 ? (s.nowWallMs + r.ejectedForMs) / 1000 : 0);
  });

  // --- per balancer ------------------------------------------------------------
  const C = ['cluster'] as const;
  gauge('membership_version', 'Membership version in force (0 before the first).', C, (g, s) =>
    g.set({ cluster: s.cluster }, balancer.version),
  );
  gauge(
    'membership_info',
    'The membership in force: lineage (empty when none) and source kind; always 1.',
    ['cluster', 'lineage', 'source'],
    (g, s) => g.set({ cluster: s.cluster, lineage: balancer.lineage ?? '', source: source === undefined ? 'none' : sourceKind(source) }, 1),
  );
  gauge('membership_applied', 'Whether a membership is in force (1) or none was applied yet (0).', C, (g, s) =>
    g.set({ cluster: s.cluster }, balancer.hasMembership ? 1 : 0),
  );
  if (source !== undefined) {
    gauge(
      'membership_source_up',
      'Whether the membership source is connected (Redis) or healthy (file: no problem reported).',
      ['cluster', 'source'],
      (g, s) => {
        const up = source.connected ?? source.problem === undefined;
        g.set({ cluster: s.cluster, source: sourceKind(source) }, up ? 1 : 0);
      },
    );
  }
  const discovery = discoveryStatusOf(source);
  if (discovery !== undefined) {
    // One writer (the source), read here at scrape time (src/discovery/status.ts).
    const DL = ['cluster', 'source'] as const;
    gauge(
      'discovery_last_success_timestamp_seconds',
      "Unix time of the discovery source's last good answer; 0 before the first.",
      DL,
      (g, s) => g.set({ cluster: s.cluster, source: discovery.source }, discovery.lastSuccessMs / 1000),
    );
    counter(
      'discovery_errors_total',
      'Failed discovery queries, by kind (the last good membership stayed in force).',
      ['cluster', 'source', 'kind'],
      (c, s) => {
        for (const kind of DISCOVERY_ERROR_KINDS) c.inc({ cluster: s.cluster, source: discovery.source, kind }, discovery.errors[kind]);
      },
    );
    gauge('discovery_records', 'Backends in the membership in force from the discovery source (its last good answer).', DL, (g, s) =>
      g.set({ cluster: s.cluster, source: discovery.source }, discovery.records),
    );
    gauge(
      'discovery_state',
      "The discovery source's state: 1 for the one it is in (ok, stale: last good kept, failing: none yet).",
      ['cluster', 'source', 'state'],
      (g, s) => {
        for (const state of ['ok', 'stale', 'failing'] as const)
          g.set({ cluster: s.cluster, source: discovery.source, state }, discovery.state === state ? 1 : 0);
      },
    );
  }
  gauge('membership_last_change_timestamp_seconds', 'Unix time the membership in force was applied; 0 before the first.', C, (g, s) =>
    g.set({ cluster: s.cluster }, (balancer.lastChangeAt ?? 0) / 1000),
  );
  gauge(
    'slots',
    'Load-table slots: used by live backends, held by tombstones (removed backends with leases still open), free.',
    ['cluster', 'state'],
    (g, s) => {
      let live = 0;
      let tomb = 0;
      for (const r of s.rows) {
        if (r.state === 'removed') tomb++;
        else live++;
      }
      g.set({ cluster: s.cluster, state: 'live' }, live);
      g.set({ cluster: s.cluster, state: 'tombstone' }, tomb);
      g.set({ cluster: s.cluster, state: 'free' }, balancer.table.capacity - live - tomb);
    },
  );
  counter('reclaims_total', 'Exited worker threads whose leases the owner reclaimed.', C, (c, s) =>
    c.inc({ cluster: s.cluster }, s.reclaims.events),
  );
  counter('reclaimed_leases_total', 'Leases subtracted from the shared counters on behalf of exited threads.', C, (c, s) =>
    c.inc({ cluster: s.cluster }, s.reclaims.leases),
  );
  counter(
    'retries_total',
    'Retries on another backend after a failed connect or request (connect, routedStream, the proxy, the HTTP dispatcher on the shared budget), by whether the retry budget allowed them.',
    ['cluster', 'outcome'],
    (c, s) => {
      c.inc({ cluster: s.cluster, outcome: 'allowed' }, s.retries.allowed);
      c.inc({ cluster: s.cluster, outcome: 'refused' }, s.retries.refused);
    },
  );
  counter('retry_budget_requests_total', 'Requests counted by the retry budget (each deposits its ratio of a retry).', C, (c, s) =>
    c.inc({ cluster: s.cluster }, s.retries.requests),
  );
  gauge('retry_budget_available', 'Retries the retry budget would grant now (absent without a budget).', C, (g, s) => {
    if (s.retries.available !== undefined) g.set({ cluster: s.cluster }, s.retries.available);
  });
  gauge('retry_budget_processes', 'Processes sharing the retry floor (1 without a fleet budget, or while Redis is away).', C, (g, s) =>
    g.set({ cluster: s.cluster }, s.retries.processes),
  );
  gauge(
    'priority_availability_ratio',
    'Effective availability of each priority (overprovisioned, capped at 1) in the priority plan.',
    ['cluster', 'priority'],
    (g, s) => {
      for (const p of s.plan?.priorities ?? [])
        g.set({ cluster: s.cluster, priority: String(p.priority) }, p.effectiveAvailabilityMillionths / 1e6);
    },
  );
  gauge(
    'priority_traffic_share_ratio',
    'Share of traffic the priority plan sends to each priority (sums to 1 when anything is selectable).',
    ['cluster', 'priority'],
    (g, s) => {
      for (const p of s.plan?.priorities ?? []) g.set({ cluster: s.cluster, priority: String(p.priority) }, p.shareMillionths / 1e6);
    },
  );
  gauge(
    'priority_panic',
    'Whether the priority is in panic (1): its traffic goes to all its hosts, healthy or not.',
    ['cluster', 'priority'],
    (g, s) => {
      for (const p of s.plan?.priorities ?? []) g.set({ cluster: s.cluster, priority: String(p.priority) }, p.panic ? 1 : 0);
    },
  );
  counter('health_checks_total', 'Active health checks completed, by result.', ['cluster', 'result'], (c, s) => {
    const h = s.health;
    c.inc({ cluster: s.cluster, result: 'passed' }, h.checksPassed);
    c.inc({ cluster: s.cluster, result: 'failed' }, h.checksFailed);
  });
  counter('health_check_timeouts_total', 'Active health checks that failed by reaching their timeout.', C, (c, s) =>
    c.inc({ cluster: s.cluster }, s.health.checksTimedOut),
  );
  counter('health_transitions_total', 'Active-check transitions: down, up, degraded, not_degraded.', ['cluster', 'to'], (c, s) => {
    const h = s.health;
    c.inc({ cluster: s.cluster, to: 'down' }, h.markedDown);
    c.inc({ cluster: s.cluster, to: 'up' }, h.markedUp);
    c.inc({ cluster: s.cluster, to: 'degraded' }, h.markedDegraded);
    c.inc({ cluster: s.cluster, to: 'not_degraded' }, h.clearedDegraded);
  });
  counter('health_check_unejections_total', 'Ejections ended early by a passing active check (unejectOnPass).', C, (c, s) =>
    c.inc({ cluster: s.cluster }, s.health.unejectedByCheck),
  );
  counter('outlier_sweeps_total', 'Outlier-detection sweeps run.', C, (c, s) => c.inc({ cluster: s.cluster }, s.health.outlierSweeps));
  counter('outlier_ejections_total', 'Outlier-detection ejections, by detector.', ['cluster', 'reason'], (c, s) => {
    const h = s.health;
    c.inc({ cluster: s.cluster, reason: 'success_rate' }, h.ejectedSuccessRate);
    c.inc({ cluster: s.cluster, reason: 'failure_percentage' }, h.ejectedFailurePercentage);
  });
  counter('outlier_ejections_skipped_total', 'Outliers left routable because maxEjectionPercent was reached.', C, (c, s) =>
    c.inc({ cluster: s.cluster }, s.health.ejectionsSkippedMaxPercent),
  );

  // --- proxy ---------------------------------------------------------------------
  if (proxy !== undefined) {
    const W = ['worker'] as const;
    counter('proxy_accepted_total', 'Client connections accepted, per proxy worker (the reusePort spread).', W, (c) => {
      for (let w = 0; w < proxy.workers; w++) c.inc({ worker: String(w) }, proxy.value(w, ProxyCounter.Accepted));
    });
    counter('proxy_refused_total', 'Client connections refused, by reason.', ['reason'], (c) => {
      for (const reason of REFUSAL_REASONS) c.inc({ reason }, proxy.refusals(reason));
    });
    gauge('proxy_active_connections', 'Spliced client-backend pairs open now, per proxy worker.', W, (g) => {
      for (let w = 0; w < proxy.workers; w++) g.set({ worker: String(w) }, proxy.active(w));
    });
    gauge(
      'proxy_open_connections',
      'Accepted client connections not yet finished (held, reading a PROXY header, connecting or spliced), per proxy worker.',
      W,
      (g) => {
        for (let w = 0; w < proxy.workers; w++) g.set({ worker: String(w) }, proxy.open(w));
      },
    );
    counter('proxy_bytes_total', 'Bytes spliced: in = client to backend, out = backend to client.', ['direction'], (c) => {
      c.inc({ direction: 'in' }, proxy.total(ProxyCounter.BytesIn));
      c.inc({ direction: 'out' }, proxy.total(ProxyCounter.BytesOut));
    });
    counter('proxy_idle_timeouts_total', 'Spliced connections closed by the client or server inactivity timeout.', [], (c) =>
      c.inc({}, proxy.total(ProxyCounter.IdleTimeouts)),
    );
    counter(
      'proxy_worker_lost_connections_total',
      'Accepted connections not yet finished when their proxy worker thread died, per worker row (the row is cumulative over restarts).',
      W,
      (c) => {
        for (let w = 0; w < proxy.workers; w++) c.inc({ worker: String(w) }, proxy.value(w, ProxyCounter.WorkerLost));
      },
    );
    const hist = proxyDurationHistogram(`${prefix}proxy_connection_duration_seconds`, proxy, DURATION_BUCKETS_SECONDS);
    registry.registerMetric(hist);
    names.push(hist.name);
  }

  // --- HTTP dispatcher --------------------------------------------------------
  if (http !== undefined) {
    // One read of the shared rows per backend and scrape, shared by the five families of that pass.
    let figures: Map<BackendRow, HttpBackendFigures> | undefined;
    const httpOf = (s: Snapshot): Map<BackendRow, HttpBackendFigures> => {
      if (figures !== undefined) return figures;
      const m = new Map<BackendRow, HttpBackendFigures>();
      for (const r of s.rows) m.set(r, http.figures(r.slot, r.stats.generation));
      figures = m;
      queueMicrotask(() => {
        figures = undefined;
      });
      return m;
    };
    counter(
      'http_requests_total',
      'HTTP attempts sent to the backend, by how their lease ended (every dispatcher thread).',
      [...BL, 'outcome'],
      (c, s) => {
        for (const [r, f] of httpOf(s))
          for (let k = 0; k < HTTP_OUTCOMES.length; k++) c.inc({ ...r.labels, outcome: HTTP_OUTCOMES[k]! }, f.outcomes[k]!);
      },
    );
    counter(
      'http_retries_total',
      'Retries the retry budget granted after a failure on the backend (each to another backend, when one is left).',
      BL,
      (c, s) => {
        for (const [r, f] of httpOf(s)) c.inc(r.labels, f.retries);
      },
    );
    counter(
      'http_retries_refused_total',
      'Requests that failed on the backend and were not retried: the retry budget was spent.',
      BL,
      (c, s) => {
        for (const [r, f] of httpOf(s)) c.inc(r.labels, f.retriesRefused);
      },
    );
    counter(
      'http_load_reports_total',
      'endpoint-load-metrics response headers (ORCA load reports) per backend: read, or malformed (ignored).',
      [...BL, 'result'],
      (c, s) => {
        for (const [r, f] of httpOf(s)) {
          c.inc({ ...r.labels, result: 'read' }, f.loadReports);
          c.inc({ ...r.labels, result: 'malformed' }, f.loadReportsMalformed);
        }
      },
    );
    const hist = snapshotHistogram(
      `${prefix}http_response_latency_seconds`,
      'Latency from sending an HTTP attempt to its response headers, per backend (every dispatcher thread).',
      LATENCY_BUCKETS_SECONDS,
      (push) => {
        for (const [r, f] of httpOf(read())) push(r.labels, f.buckets, f.latencySumSeconds);
      },
    );
    registry.registerMetric(hist);
    names.push(hist.name);
  }

  // --- admission -------------------------------------------------------------
  if (admission !== undefined) {
    const B = ['band'] as const;
    const bands = (s: Snapshot) => s.admission?.bands ?? [];
    gauge('admission_saturation_ratio', 'Pool saturation the admission controller sees (load / capacity).', [], (g, s) => {
      if (s.admission?.saturation !== undefined) g.set({}, s.admission.saturation);
    });
    gauge('admission_queue_length', 'Requests waiting for admission, per band (its rank).', B, (g, s) => {
      for (const b of bands(s)) g.set({ band: String(b.band) }, b.queued);
    });
    gauge('admission_oldest_wait_seconds', 'How long the oldest waiter of each band has waited; 0 when its queue is empty.', B, (g, s) => {
      for (const b of bands(s)) g.set({ band: String(b.band) }, b.oldestWaitMs / 1000);
    });
    counter('admission_admitted_total', 'Requests admitted, per band.', B, (c, s) => {
      for (const b of bands(s)) c.inc({ band: String(b.band) }, b.admitted);
    });
    counter('admission_rejected_total', 'Requests rejected, per band and reason (QueueFull -> queue_full).', ['band', 'reason'], (c, s) => {
      for (const b of bands(s))
        for (const [reason, n] of Object.entries(b.rejected)) c.inc({ band: String(b.band), reason: snake(reason) }, n);
    });
  }

  // --- process ---------------------------------------------------------------
  // prom-client's defaults, under their standard names; left alone when the
  // registry has them already (the application registered them).
  if (processMetrics && registry.getSingleMetric('process_cpu_user_seconds_total') === undefined) {
    const before = new Set(registry.getMetricsAsArray().map((m) => m.name));
    collectDefaultMetrics({ register: registry });
    for (const m of registry.getMetricsAsArray()) if (!before.has(m.name)) names.push(m.name);
  }

  return {
    registry,
    names,
    remove: () => {
      for (const n of names) registry.removeSingleMetric(n);
    },
  };
}

function takeSnapshot(
  balancer: Balancer,
  cluster: string,
  planner: PriorityWeightedRandom,
  admission: AdmissionStatsSource | undefined,
): Snapshot {
  // The owner thread's routers batch their picks and outcomes: count them in before reading.
  balancer.flushStats();
  const t = balancer.table;
  const rows: BackendRow[] = [];
  const candidates: Prioritized<Backend>[] = [];
  for (const e of balancer.slotEntries()) {
    const stats = t.stats(e.slot);
    const ejectedForMs = t.ejectedForMs(e.slot);
    const state = backendState(stats, ejectedForMs, e.removed);
    rows.push({
      labels: { cluster, backend: e.id, priority: String(e.spec.priority), locality: e.spec.locality },
      slot: e.slot,
      state,
      stats,
      spec: e.spec,
      latencyUs: t.estimateUs(e.slot, EwmaSeries.Latency),
      connectUs: t.estimateUs(e.slot, EwmaSeries.ConnectTime),
      ejectedForMs,
      ramp: t.rampFactor(e.slot),
      reported: t.reportedLoad(e.slot),
    });
    if (state === 'removed') continue;
    const status: Status = state === 'ready' ? 'ready' : state === 'draining' ? 'draining' : 'unavailable';
    candidates.push(new Prioritized(new Backend(e.id, { weight: e.spec.weight, status }), e.spec.priority, e.spec.panicEligible));
  }
  let plan: PriorityPlan | undefined;
  try {
    plan = candidates.length === 0 ? undefined : planner.plan(candidates);
  } catch (err) {
    // Nothing selectable at all (e.g. every backend draining): no plan to show.
    if (!(err instanceof PoiseError)) throw err;
  }
  return {
    cluster,
    rows,
    plan,
    nowWallMs: Date.now(),
    admission: admission?.admissionStats(),
    health: balancer.healthStats().counters,
    reclaims: balancer.reclaimStats(),
    retries: balancer.retryBudgetStats(),
  };
}
