/**
 * `PriorityPlan`: the deterministic share computation behind a decision,
 * for operators and tests.
 */
import type { PriorityCandidate } from '../core/candidate.js';
import type { PriorityEngine } from './priority-engine.js';
import type { ResolvedPriorityOptions } from './priority-options.js';
import { computeLocalityShares } from './locality-shares.js';
import { computePriorityShares } from './priority-shares.js';

/** One locality of a priority. */
export interface LocalityPlan {
  readonly locality: string;
  /** Millionths of its priority's traffic; the localities of a selectable priority sum to 1,000,000. */
  readonly shareMillionths: number;
}

/** One priority, ascending. */
export interface PriorityLevelPlan {
  readonly priority: number;
  /** Eligible member weight / member weight, in millionths (host counts with `arithmetic: 'envoy'`). */
  readonly rawAvailabilityMillionths: number;
  /** min(100 %, overprovisioning × raw), in millionths (Envoy's integer health × 10,000 with `'envoy'`). */
  readonly effectiveAvailabilityMillionths: number;
  /** Millionths of all traffic. */
  readonly shareMillionths: number;
  /** True when this priority routes in panic (only ever under a global shortage). */
  readonly panic: boolean;
  /** Present for `LocalityWeightedRandom`: locality shares in ascending locality order. */
  readonly localities?: readonly LocalityPlan[];
}

/** The share computation for one snapshot. Priority shares sum to exactly 1,000,000 whenever anything is selectable. */
export interface PriorityPlan {
  /** Combined effective availability below 100 %: panic thresholds apply. */
  readonly globalShortage: boolean;
  readonly priorities: readonly PriorityLevelPlan[];
}

/** Samples `candidates` into `e`, computes every share, and returns the plan (allocates; not for the hot path). @internal */
export function computePlan(
  e: PriorityEngine,
  candidates: readonly PriorityCandidate[],
  o: ResolvedPriorityOptions,
  withLocality: boolean,
): PriorityPlan {
  e.sample(candidates, withLocality);
  computePriorityShares(e, o);
  return planOf(e, o, withLocality);
}

/** The plan of an already sampled engine whose priority shares are computed. @internal */
export function planOf(e: PriorityEngine, o: ResolvedPriorityOptions, withLocality: boolean): PriorityPlan {
  const priorities: PriorityLevelPlan[] = [];
  for (let p = 0; p < e.pCount; p++) {
    const level: {
      priority: number;
      rawAvailabilityMillionths: number;
      effectiveAvailabilityMillionths: number;
      shareMillionths: number;
      panic: boolean;
      localities?: LocalityPlan[];
    } = {
      priority: e.pValue[p]!,
      rawAvailabilityMillionths: e.pRaw[p]!,
      effectiveAvailabilityMillionths: e.pEff[p]!,
      shareMillionths: e.pShare[p]!,
      panic: e.pPanic[p] === 1,
    };
    if (withLocality) {
      computeLocalityShares(e, p, o);
      const localities: LocalityPlan[] = [];
      for (let l = e.pLocStart[p]!; l < e.pLocEnd[p]!; l++) {
        localities.push({ locality: e.loc[e.order[e.lStart[l]!]!]!, shareMillionths: e.lShare[l]! });
      }
      level.localities = localities;
    }
    priorities.push(level);
  }
  return { globalShortage: e.globalShortage, priorities };
}
