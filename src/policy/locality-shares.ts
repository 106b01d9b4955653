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
import { MILLION, checkedAdd, checkedMul, mulDivFloor } from '../core/weight.js';
import type { PriorityEngine } from './priority-engine.js';
import type { ResolvedPriorityOptions } from './priority-options.js';

/** Fills `lEff` and `lShare` for the localities of priority group `p`; returns Σ effective. */
export function computeLocalityShares(e: PriorityEngine, p: number, o: ResolvedPriorityOptions): number {
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
