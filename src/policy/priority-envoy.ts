/**
 * `arithmetic: 'envoy'`: Envoy's priority load and panic computation,
 * reproduced exactly (LoadBalancerBase::recalculatePerPriorityState,
 * recalculatePerPriorityPanic and recalculateLoadInTotalPanic), with Envoy's
 * host sets mapped onto a sampled snapshot:
 *
 * - hosts = every candidate of the priority; excluded hosts = non-members;
 *   host count = members; healthy hosts = eligible members.
 * - health = min(100, floor(overprovisioning% × healthy / host count)), integer percent.
 * - normalised total health = min(100, Σ health).
 * - load: floor(health × 100 / normalised total), capped by what is left, in
 *   ascending priority; the rounding remainder goes to the first priority
 *   with nonzero health.
 * - panic (only when normalised total health < 100): 100 × healthy / host
 *   count strictly below the threshold (an empty priority counts as 0 %).
 * - total panic (every priority panicking): load by host count including
 *   non-members, floors, remainder to the first non-empty priority.
 *
 * Loads are integer percents; shares are reported in millionths (× 10,000).
 * With threshold 0 and no healthy host, Envoy sends 100 % to P0 where
 * nothing can be chosen; here the plan shows no selectable share and a pick
 * throws `NoEligibleCandidates` (Envoy's "no healthy upstream").
 */
import { MILLION, mulDivFloor } from '../core/weight.js';
import type { PriorityEngine } from './priority-engine.js';
import type { ResolvedPriorityOptions } from './priority-options.js';

const PERCENT = 10_000;

/** Fills `pRaw`, `pEff`, `pShare`, `pPanic` and `globalShortage` the way Envoy computes priority load. */
export function envoyPriorityShares(e: PriorityEngine, o: ResolvedPriorityOptions): void {
  const k = e.pCount;
  const factor = o.overprovisioningFactorPercent;
  let sum = 0;
  for (let p = 0; p < k; p++) {
    const hosts = e.pMemberN[p]!;
    const healthy = e.pEligibleN[p]!;
    const health = hosts > 0 ? Math.min(100, Math.floor((factor * healthy) / hosts)) : 0;
    e.pRaw[p] = hosts > 0 ? mulDivFloor(healthy, MILLION, hosts) : 0;
    e.pEff[p] = health * PERCENT;
    sum += health;
  }
  const normalized = Math.min(100, sum);
  e.globalShortage = normalized < 100;
  const threshold = o.panicThresholdPercent;

  if (normalized > 0) {
    let remaining = 100;
    let first = -1;
    for (let p = 0; p < k; p++) {
      const health = e.pEff[p]! / PERCENT;
      if (first < 0 && health > 0) first = p;
      const load = Math.min(remaining, Math.floor((health * 100) / normalized));
      e.pShare[p] = load;
      remaining -= load;
    }
    e.pShare[first]! += remaining;
  } else {
    for (let p = 0; p < k; p++) e.pShare[p] = 0;
  }

  let totalPanic = threshold > 0;
  for (let p = 0; p < k; p++) {
    const hosts = e.pMemberN[p]!;
    const panic = normalized === 100 ? false : threshold > 0 && (hosts === 0 || 100 * e.pEligibleN[p]! < threshold * hosts);
    e.pPanic[p] = panic ? 1 : 0;
    totalPanic = totalPanic && panic;
  }

  if (totalPanic) {
    let all = 0;
    for (let p = 0; p < k; p++) all += e.pAllN[p]!;
    let remaining = 100;
    let first = -1;
    for (let p = 0; p < k; p++) {
      const n = e.pAllN[p]!;
      if (first < 0 && n > 0) first = p;
      const load = Math.floor((100 * n) / all);
      e.pShare[p] = load;
      remaining -= load;
    }
    e.pShare[first]! += remaining;
  }
  for (let p = 0; p < k; p++) e.pShare[p]! *= PERCENT;
}
