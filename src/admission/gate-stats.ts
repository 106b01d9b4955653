/**
 * The AdmissionGate's counters as plain figures: the shapes of
 * `admissionStats()`, a band's fresh rejection counts, how a refused
 * acquire is counted, and the sum over several gates (every proxy worker's).
 */
import { PoiseError } from '../core/errors.js';

/** Why a request was rejected. */
export type AdmissionRejection = 'QueueFull' | 'QueueTimeout' | 'Cancelled' | 'NoEligibleCandidates' | 'Closed' | 'Other';

/** Counters of one band, plain numbers. */
export interface AdmissionBandStats {
  /** The band's rank (larger = more important). */
  band: number;
  /** Its ceiling in [0, 1]. */
  ceiling: number;
  /** Waiting now in this gate's queue. */
  queued: number;
  /** How long the oldest waiter has waited, ms (0 when none). */
  oldestWaitMs: number;
  /** Admitted in all (at once or after waiting). */
  admitted: number;
  /** Admitted after waiting in the queue. */
  admittedAfterWait: number;
  /** Rejected, by reason; `Other` is any other error the acquire threw (such as `PanicRejected`). */
  rejected: Record<AdmissionRejection, number>;
}

/** What {@link AdmissionGate.admissionStats} returns. */
export interface AdmissionStats {
  /** Pool saturation now (load / capacity, or the custom figure). */
  saturation: number;
  /** Capacity in force (`Infinity` when an eligible backend is unlimited, 0 when none is eligible; NaN with a custom saturation). */
  capacity: number;
  /** The pool's load now (leases of the gate's kind over every thread). */
  load: number;
  /** Waiters in this gate, all bands. */
  waiting: number;
  /** Most important band first. */
  bands: AdmissionBandStats[];
}

/** A band's rejection counts, all zero. @internal */
export function freshRejected(): Record<AdmissionRejection, number> {
  return { QueueFull: 0, QueueTimeout: 0, Cancelled: 0, NoEligibleCandidates: 0, Closed: 0, Other: 0 };
}

/** The rejection an error of the router's acquire counts as. @internal */
export function reasonOf(err: unknown): AdmissionRejection {
  if (err instanceof PoiseError && (err.code === 'NoEligibleCandidates' || err.code === 'Empty')) return 'NoEligibleCandidates';
  return 'Other';
}

/**
 * Several gates' figures as one — every proxy worker's gate, for metrics:
 * counts and queue lengths add up, the oldest wait is the longest; the
 * saturation, capacity and load are the pool's (the same table), taken from
 * the first gate that reported. Bands are matched by rank. Undefined
 * entries (a worker restarting) are skipped.
 */
export function sumAdmissionStats(parts: readonly (AdmissionStats | undefined)[]): AdmissionStats {
  const present = parts.filter((p): p is AdmissionStats => p !== undefined);
  const first = present[0];
  const bands = new Map<number, AdmissionBandStats>();
  let waiting = 0;
  for (const p of present) {
    waiting += p.waiting;
    for (const b of p.bands) {
      const sum = bands.get(b.band);
      if (sum === undefined) {
        bands.set(b.band, { ...b, rejected: { ...b.rejected } });
        continue;
      }
      sum.queued += b.queued;
      sum.oldestWaitMs = Math.max(sum.oldestWaitMs, b.oldestWaitMs);
      sum.admitted += b.admitted;
      sum.admittedAfterWait += b.admittedAfterWait;
      for (const r of Object.keys(sum.rejected) as AdmissionRejection[]) sum.rejected[r] += b.rejected[r];
    }
  }
  return {
    saturation: first?.saturation ?? 0,
    capacity: first?.capacity ?? 0,
    load: first?.load ?? 0,
    waiting,
    bands: [...bands.values()].sort((a, b) => b.band - a.band),
  };
}
