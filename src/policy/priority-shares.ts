/**
 * Priority shares in integer millionths (the default arithmetic).
 *
 * For each priority, from weights sampled once:
 * ```
 * raw       = floor(1e6 × eligibleWeight / memberWeight)
 * effective = min(1e6, floor(1e6 × overprovisioning% / 100 × eligibleWeight / memberWeight))
 * ```
 * When Σ effective ≥ 1e6 the priorities consume traffic in ascending order
 * (70 % at P0 leaves exactly 30 % for P1) and nothing panics. Below 1e6 there
 * is a global shortage: shares are effective availabilities normalised to
 * 1e6 (floors, remainder to the first priority with nonzero availability),
 * and a priority whose raw availability is strictly below the threshold
 * panics. When every priority has zero effective availability, traffic is
 * split by panic-selectable weight instead.
 */
import { MILLION, checkedAdd, mulDivFloor } from '../core/weight.js';
import { envoyPriorityShares } from './priority-envoy.js';
import type { PriorityEngine } from './priority-engine.js';
import type { ResolvedPriorityOptions } from './priority-options.js';

/** Fills `pRaw`, `pEff`, `pShare`, `pPanic` and `globalShortage` of a sampled engine. */
export function computePriorityShares(e: PriorityEngine, o: ResolvedPriorityOptions): void {
  if (o.arithmetic === 'envoy') {
    envoyPriorityShares(e, o);
    return;
  }
  const scale = o.overprovisioningFactorPercent * 10_000;
  const k = e.pCount;
  let total = 0;
  for (let p = 0; p < k; p++) {
    const m = e.pMemberW[p]!;
    const x = e.pEligibleW[p]!;
    const raw = m > 0 ? mulDivFloor(x, MILLION, m) : 0;
    const eff = m > 0 ? Math.min(MILLION, mulDivFloor(x, scale, m)) : 0;
    e.pRaw[p] = raw;
    e.pEff[p] = eff;
    total += eff;
  }
  if (total >= MILLION) {
    e.globalShortage = false;
    let remaining = MILLION;
    for (let p = 0; p < k; p++) {
      const share = Math.min(e.pEff[p]!, remaining);
      e.pShare[p] = share;
      remaining -= share;
      e.pPanic[p] = 0;
    }
    return;
  }
  e.globalShortage = true;
  const threshold = o.panicThresholdPercent * 10_000;
  for (let p = 0; p < k; p++) e.pPanic[p] = e.pRaw[p]! < threshold ? 1 : 0;
  if (total > 0) {
    splitProportionally(e, e.pEff, total);
    return;
  }
  // Every priority is at zero effective availability.
  if (threshold === 0) {
    for (let p = 0; p < k; p++) e.pShare[p] = 0;
    return;
  }
  let panicTotal = 0;
  for (let p = 0; p < k; p++) panicTotal = checkedAdd(panicTotal, e.pPanicW[p]!);
  if (panicTotal === 0) {
    for (let p = 0; p < k; p++) e.pShare[p] = 0;
    return;
  }
  splitProportionally(e, e.pPanicW, panicTotal);
}

/** `pShare[p] = floor(1e6 × basis[p] / total)`, the rounding remainder to the first nonzero basis. */
function splitProportionally(e: PriorityEngine, basis: Float64Array, total: number): void {
  let sum = 0;
  let first = -1;
  for (let p = 0; p < e.pCount; p++) {
    const b = basis[p]!;
    if (first < 0 && b > 0) first = p;
    const share = mulDivFloor(b, MILLION, total);
    e.pShare[p] = share;
    sum += share;
  }
  e.pShare[first]! += MILLION - sum;
}
