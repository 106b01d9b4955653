/**
 * Built-in scenarios as data: which backends exist (latency distribution,
 * failure rate, weight, priority), what changes mid-run (membership updates
 * and backends starting to fail), and which policies a run compares by
 * default. The runner applies a scenario; nothing here does I/O.
 */
import type { Status } from 'poise-lb';
import type { BackendSpec, HealthConfig } from 'poise-lb/runtime';
import { DEFAULT_POLICIES, type BenchPolicyName } from './policies.js';

/** Every `--scenario` value. */
export const SCENARIO_NAMES = ['slow-backend', 'uniform', 'failover', 'membership-churn', 'balls'] as const;
/** A `--scenario` value. */
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/** What a backend is there to show; the table's "slow share" column sums the `slow` ones. */
export type BackendRole = 'normal' | 'slow' | 'failing' | 'primary' | 'backup' | 'joining' | 'leaving';

/** One simulated backend: a TCP server whose reply delay is log-normal. */
export interface BackendModel {
  id: string;
  role: BackendRole;
  /** Median reply delay in ms. */
  medianMs: number;
  /** σ of ln(delay); 0 = constant delay. */
  sigma: number;
  /** Probability in [0, 1] that a request gets an error reply. */
  failureRate: number;
  weight: number;
  priority: number;
  /** Membership status at the start; `absent` = not yet a member (joins later). */
  status: Status | 'absent';
}

/** A change at `at` × duration: new statuses and/or failure rates for some backends. */
export interface ScenarioEvent {
  /** Fraction of the measured duration, in (0, 1). */
  at: number;
  label: string;
  /** `accepting: false` closes the backend's listener and resets its connections (connects are refused). */
  changes: ReadonlyArray<{ id: string; status?: Status | 'absent'; failureRate?: number; accepting?: boolean }>;
}

/** A scenario ready to run. */
export interface ScenarioPlan {
  name: ScenarioName;
  description: string;
  backends: BackendModel[];
  events: ScenarioEvent[];
  defaultPolicies: readonly BenchPolicyName[];
  /** Active checks / outlier detection the run's Balancer runs (none when absent). */
  health?: HealthConfig;
}

/** The failover scenario's active check: TCP connect every 200 ms, down after 2 failures, up after 2 passes. */
export const FAILOVER_CHECK = { kind: 'tcp', intervalMs: 200, timeoutMs: 200, fall: 2, rise: 2, jitterPercent: 10 } as const;

/** Median delay of an ordinary backend, ms. */
export const BASE_MEDIAN_MS = 4;
/** σ of ln(delay) of every backend: p99 ≈ 2.3 × median. */
export const BASE_SIGMA = 0.35;
/** How much slower the slow backend is. */
export const SLOW_FACTOR = 10;
/** Error rate of the failing backend. */
export const FAILING_RATE = 0.05;

function model(i: number, over: Partial<BackendModel> = {}): BackendModel {
  return {
    id: `b${i}`,
    role: 'normal',
    medianMs: BASE_MEDIAN_MS,
    sigma: BASE_SIGMA,
    failureRate: 0,
    weight: 1,
    priority: 0,
    status: 'ready',
    ...over,
  };
}

/**
 * The plan of a scenario with `k` backends (`k` ≥ 3; failover needs ≥ 4).
 *
 * @example
 * const plan = scenarioPlan('slow-backend', 8); // b0 is 10× slower, b1 fails 5 %
 */
export function scenarioPlan(name: ScenarioName, k: number): ScenarioPlan {
  const idx = Array.from({ length: k }, (_, i) => i);
  switch (name) {
    case 'slow-backend':
      return {
        name,
        description: `${k} backends, median ${BASE_MEDIAN_MS} ms; b0 is ${SLOW_FACTOR}× slower, b1 fails ${FAILING_RATE * 100} % of requests`,
        backends: idx.map((i) =>
          i === 0
            ? model(i, { role: 'slow', medianMs: BASE_MEDIAN_MS * SLOW_FACTOR })
            : i === 1
              ? model(i, { role: 'failing', failureRate: FAILING_RATE })
              : model(i),
        ),
        events: [],
        defaultPolicies: DEFAULT_POLICIES,
      };
    case 'uniform':
      return {
        name,
        description: `${k} identical backends, median ${BASE_MEDIAN_MS} ms, no failures`,
        backends: idx.map((i) => model(i)),
        events: [],
        defaultPolicies: DEFAULT_POLICIES,
      };
    case 'failover': {
      const primaries = Math.ceil(k / 2);
      const lost = idx.slice(0, Math.floor(primaries / 2));
      return {
        name,
        description:
          `priority 0 has ${primaries} hosts, priority 1 has ${k - primaries}; at half time ${lost.length} primaries ` +
          `go away (connections reset, connects refused) and active TCP checks (every ${FAILOVER_CHECK.intervalMs} ms, ` +
          `fall ${FAILOVER_CHECK.fall}) take them down; membership never changes`,
        backends: idx.map((i) => model(i, i < primaries ? { role: 'primary', priority: 0 } : { role: 'backup', priority: 1 })),
        events: [
          {
            at: 0.5,
            label: `${lost.length} of ${primaries} primaries go away`,
            changes: lost.map((i) => ({ id: `b${i}`, failureRate: 1, accepting: false })),
          },
        ],
        defaultPolicies: ['priority', 'p2c:latency', 'round-robin'],
        health: { check: FAILOVER_CHECK },
      };
    }
    case 'membership-churn': {
      const joining = Math.max(1, Math.floor(k / 4));
      const leaving = idx.slice(0, joining);
      const joiners = Array.from({ length: joining }, (_, j) => k + j);
      return {
        name,
        description: `${k} backends; at 1/3 ${joining} join, at 2/3 ${joining} of the originals drain and then leave`,
        backends: [
          ...idx.map((i) => model(i, i < joining ? { role: 'leaving' } : {})),
          ...joiners.map((i) => model(i, { role: 'joining', status: 'absent' })),
        ],
        events: [
          { at: 1 / 3, label: `${joining} backends join`, changes: joiners.map((i) => ({ id: `b${i}`, status: 'ready' as const })) },
          { at: 2 / 3, label: `${joining} backends drain`, changes: leaving.map((i) => ({ id: `b${i}`, status: 'draining' as const })) },
          { at: 0.8, label: 'drained backends leave', changes: leaving.map((i) => ({ id: `b${i}`, status: 'absent' as const })) },
        ],
        defaultPolicies: DEFAULT_POLICIES,
      };
    }
    case 'balls':
      return { name, description: 'balls into bins simulation (no network load)', backends: [], events: [], defaultPolicies: [] };
  }
}

/** Membership specs for the backends whose status is not `absent`, addressed by `addressOf`. */
export function membershipOf(
  backends: readonly BackendModel[],
  statusOf: (b: BackendModel) => Status | 'absent',
  addressOf: (id: string) => string,
): BackendSpec[] {
  const specs: BackendSpec[] = [];
  for (const b of backends) {
    const status = statusOf(b);
    if (status === 'absent') continue;
    specs.push({ id: b.id, address: addressOf(b.id), weight: b.weight, priority: b.priority, status });
  }
  return specs;
}
