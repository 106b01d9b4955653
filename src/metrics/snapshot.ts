/**
 * One scrape's reading of the balancer: every backend's row of the
 * LoadTable (state, counters, estimates), the priority plan, and the
 * balancer's figures (admission, health, reclaims, retries). Taken once per
 * scrape by collectMetrics and read by every family of that pass.
 * @internal
 */
import { Backend, Prioritized, type Status } from '../core/candidate.js';
import { PoiseError } from '../core/errors.js';
import type { ResolvedBackendSpec } from '../core/spec.js';
import { EwmaSeries, HealthFlag, SlotState, type SlotStats } from '../load/load-table.js';
import type { PriorityPlan, PriorityWeightedRandom } from '../policy/priority/policy.js';
import type { Balancer } from '../runtime/balancer.js';
import type { AdmissionFigures, AdmissionStatsSource } from '../admission/admission-stats.js';
import type { HealthCounters } from '../health/stats.js';

/** The `role` label values of `poise_backend_role`, by role code (load/db-state.ts). */
export const DB_ROLES = ['unknown', 'primary', 'replica'] as const;

/** The `state` label values of `poise_backend_state` (exactly one is 1 per backend). */
export const BACKEND_STATES = ['ready', 'draining', 'unavailable', 'ejected', 'unhealthy', 'removed'] as const;
/** A backend state as metrics and `poise top` show it. */
export type BackendState = (typeof BACKEND_STATES)[number];

/** The labels of every per-backend series, in print order. @internal */
export const BACKEND_LABELS = ['cluster', 'backend', 'priority', 'locality'] as const;

/** One backend as one scrape saw it. @internal */
export interface BackendRow {
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
export interface Snapshot {
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

/** The state a slot shows: its tag state, then ejection, then the active check. @internal */
export function backendState(stats: SlotStats, ejectedForMs: number, removed: boolean): BackendState {
  if (removed || stats.state === SlotState.Removed || stats.state === SlotState.Closing) return 'removed';
  if (stats.state === SlotState.Draining) return 'draining';
  if (stats.state === SlotState.Unavailable) return 'unavailable';
  if (ejectedForMs > 0) return 'ejected';
  if ((stats.health & (HealthFlag.Unhealthy | HealthFlag.AgentDown)) !== 0) return 'unhealthy';
  return 'ready';
}

/** Reads the snapshot of one scrape (see the file comment). @internal */
export function takeSnapshot(
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
