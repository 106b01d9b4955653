/**
 * Health counters the Balancer exposes through `healthStats()`, which the
 * metrics collector (src/metrics/collect.ts) exports at scrape time.
 * Monotonic counts since the Balancer was made; owner thread only, plain
 * numbers.
 */

/** Counters of active checks and outlier detection. */
export interface HealthCounters {
  /** Active checks completed (passed + failed). */
  checks: number;
  checksPassed: number;
  checksFailed: number;
  /** Failed checks that failed by reaching `timeoutMs`. */
  checksTimedOut: number;
  /** up → down transitions (`fall` consecutive failures). */
  markedDown: number;
  /** down → up transitions (`rise` consecutive passes). */
  markedUp: number;
  /** A check started reporting degraded. */
  markedDegraded: number;
  /** A check stopped reporting degraded. */
  clearedDegraded: number;
  /** Ejections ended early by a passing active check (`unejectOnPass`). */
  unejectedByCheck: number;
  /** Outlier ejections by success rate. */
  ejectedSuccessRate: number;
  /** Outlier ejections by failure percentage. */
  ejectedFailurePercentage: number;
  /** Outliers left routable because `maxEjectionPercent` was reached. */
  ejectionsSkippedMaxPercent: number;
  /** Outlier sweeps run. */
  outlierSweeps: number;
}

/** Zeroed counters. @internal */
export function newCounters(): HealthCounters {
  return {
    checks: 0,
    checksPassed: 0,
    checksFailed: 0,
    checksTimedOut: 0,
    markedDown: 0,
    markedUp: 0,
    markedDegraded: 0,
    clearedDegraded: 0,
    unejectedByCheck: 0,
    ejectedSuccessRate: 0,
    ejectedFailurePercentage: 0,
    ejectionsSkippedMaxPercent: 0,
    outlierSweeps: 0,
  };
}

/** One backend's health, as the owner sees it now. */
export interface BackendHealth {
  id: string;
  /** The active check's view: `unchecked` until a check runs (or when no check is configured). */
  check: 'up' | 'down' | 'unchecked';
  /** Degraded by a check or by the membership. */
  degraded: boolean;
  /** Ejection time left (passive or outlier), ms; 0 = routable. */
  ejectedForMs: number;
  /** The outlier detector's ejection multiplier (ejections in a row). */
  outlierEjections: number;
}

/** The snapshot `balancer.healthStats()` returns. */
export interface HealthStats {
  counters: HealthCounters;
  backends: BackendHealth[];
}
