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
import { checkedAdd, checkedMul, MILLION, mulDivFloor } from '../../core/weight.js';
import type { ResolvedPriorityOptions } from './options.js';
import type { Sample } from './sample.js';
/** Fills `pRaw`, `pEff`, `pShare`, `pPanic` and `globalShortage` of a sampled engine. */
export function computePriorityShares(e: Sample, o: ResolvedPriorityOptions): void {
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
function splitProportionally(e: Sample, basis: Float64Array, total: number): void {
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

const PERCENT = 10_000;

/** Fills `pRaw`, `pEff`, `pShare`, `pPanic` and `globalShortage` the way Envoy computes priority load. */
export function envoyPriorityShares(e: Sample, o: ResolvedPriorityOptions): void {
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

/**
 * Locality shares inside one priority.
 *
 * ```
 * availability(L)   = min(100 %, overprovisioning × selectable(L) / members(L))
 * effective(L)      = localityWeight(L) × availability(L)
 * share(L)          = effective(L) / Σ effective      (millionths of the priority's traffic)
 * ```
 * `selectable` is the eligible weight in healthy mode and the panic-selectable
 * weight when the priority panics. With `arithmetic: 'envoy'` availability is
 * Envoy's integer percent from host counts instead of weighted millionths.
 * A locality with any selectable capacity never quantises to zero: its
 * availability and its share are at least one unit. Shares are floors; the
 * remainder (either sign) is settled on the largest share, so they sum to
 * exactly 1,000,000 whenever any locality is selectable.
 */

/** Fills `lEff` and `lShare` for the localities of priority group `p`; returns Σ effective. */
export function computeLocalityShares(e: Sample, p: number, o: ResolvedPriorityOptions): number {
  const from = e.pLocStart[p]!;
  const to = e.pLocEnd[p]!;
  const panic = e.pPanic[p] === 1;
  const envoy = o.arithmetic === 'envoy';
  const factor = o.overprovisioningFactorPercent;
  let total = 0;
  for (let l = from; l < to; l++) {
    let avail: number;
    if (envoy) {
      const den = e.lMemberN[l]!;
      const num = panic ? e.lPanicN[l]! : e.lEligibleN[l]!;
      avail = den > 0 ? Math.min(100, Math.floor((factor * num) / den)) : 0;
      if (num > 0 && avail === 0) avail = 1;
    } else {
      const den = e.lMemberW[l]!;
      const num = panic ? e.lPanicW[l]! : e.lEligibleW[l]!;
      avail = den > 0 ? Math.min(MILLION, mulDivFloor(num, factor * 10_000, den)) : 0;
      if (num > 0 && avail === 0) avail = 1;
    }
    const eff = checkedMul(e.lWeight[l]!, avail);
    e.lEff[l] = eff;
    total = checkedAdd(total, eff);
  }
  if (total === 0) {
    for (let l = from; l < to; l++) e.lShare[l] = 0;
    return 0;
  }
  let sum = 0;
  for (let l = from; l < to; l++) {
    const eff = e.lEff[l]!;
    let share = mulDivFloor(eff, MILLION, total);
    if (eff > 0 && share === 0) share = 1;
    e.lShare[l] = share;
    sum += share;
  }
  let rest = MILLION - sum;
  while (rest !== 0) {
    let big = from;
    for (let l = from + 1; l < to; l++) if (e.lShare[l]! > e.lShare[big]!) big = l;
    const take = rest > 0 ? rest : Math.max(rest, 1 - e.lShare[big]!);
    e.lShare[big]! += take;
    rest -= take;
    if (take === 0) break;
  }
  return total;
}
