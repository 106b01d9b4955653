/**
 * The one place a slot's effective weight and load scale are set: at each
 * view build, from its spec weight, its slow-start ramp (load/slow-start.ts)
 * and the weight the backend reports itself (load/backend-load.ts: an agent
 * check's percentage, ORCA weights) — the factor is their product — and
 * the aperture's overlap weight (`apertureWeight`, set by candidate-view.ts
 * from the process's slice of the ring; 1 without an aperture), which
 * multiplies the spec weight.
 * Policies read `candidate.weight` when they prepare a view and
 * `candidate.load()` at each pick; this function is what makes both follow
 * the ramp, so no policy knows about slow start:
 *
 * - weighted draws, smooth weighted round robin, priority and locality
 *   plans: `weight` = spec weight × factor (every member's weight is scaled
 *   by 1000 while anyone ramps, so a weight of 1 can still ramp from 10 %);
 * - power of two choices, least loaded and the bounded hashes' capacity:
 *   `load()` is multiplied by `loadScale` = round(1 / factor) (an integer, so
 *   a load stays a small integer: the factor is quantized to 1/k, and a
 *   factor above 2/3 leaves the load as it is);
 * - the keyed hashes' weights are left alone (a ramp would move keys away and
 *   back); plain round robin and random ignore weights, so they do not ramp.
 *
 * Factors are relative: each is divided by the largest among the members, so
 * members that all ramp from one instant (every backend new) are not ramped.
 */
import { rampFactor } from '../load/slow-start.js';
import type { LoadTable } from '../load/load-table.js';
import type { SlotCandidate } from './slot-candidate.js';

/**
 * The one rule combining a backend's two self-reports into the multiplier
 * of its spec weight: the agent's weight (HAProxy's agent protocol, word
 * 24) and ORCA's A58 weight (word 39) are independent factors, so the
 * combined weight is their product; one alone is itself; neither is
 * undefined (no report: the spec weight stands). A 0 from either is
 * HAProxy's weight 0 (candidate-view.ts: no new lease while another backend
 * is eligible). HAProxy keeps the agent's weight and the check's state in
 * separate fields combined by one rule the same way: no reporter overwrites
 * the other, and what each said is still readable on its own.
 */
export function reportedWeight(agent: number | undefined, orca: number | undefined): number | undefined {
  if (agent === undefined) return orca;
  return orca === undefined ? agent : agent * orca;
}

/** {@link reportedWeight} of slot `slot` as the table holds it now. */
export function reportedFactor(table: LoadTable, slot: number): number | undefined {
  return reportedWeight(table.reported.agentWeight(slot), table.reported.orcaWeight(slot));
}

/** While anyone ramps, weights are multiplied by this (when the largest spec weight leaves room under 2^32). */
const WEIGHT_SCALE = 1000;
const MAX_WEIGHT = 0xffffffff;
/** The largest load multiplier (a factor of 0 or below 1/1000). */
const MAX_LOAD_SCALE = 1000;

/**
 * Sets `weight` and `loadScale` of every member for instant `now`, and
 * returns the ms until the ramp should be looked at again (0 when nobody
 * ramps). `scaleWeights` is false for the keyed policies.
 */
export function applyEffectiveWeights(table: LoadTable, members: readonly SlotCandidate[], now: number, scaleWeights: boolean): number {
  const config = table.slowStart.config();
  let top = 0;
  let ramping = false;
  let adjusted = false;
  let maxWeight = 0;
  for (const c of members) {
    let f = 1;
    if (config !== undefined) {
      const since = table.slowStart.sinceEligible(c.slot, now);
      if (since >= 0 && since < config.windowMs) {
        f = rampFactor(since, config);
        ramping = true;
      }
    }
    const reported = reportedFactor(table, c.slot);
    if (reported !== undefined) {
      f *= reported;
      adjusted = true;
    }
    c.ramp = f;
    if (c.eligible && f > top) top = f;
    if (c.spec.weight * c.apertureWeight > maxWeight) maxWeight = c.spec.weight * c.apertureWeight;
  }
  adjusted ||= ramping;
  const scale = adjusted && scaleWeights && maxWeight * WEIGHT_SCALE <= MAX_WEIGHT ? WEIGHT_SCALE : 1;
  for (const c of members) {
    // Relative to the largest eligible. A reported weight of 0 makes the member ineligible (candidate-view.ts: HAProxy's
    // weight 0); should panic use it, it has the smallest weight, 1, beside eligible members, else its own.
    const f = adjusted && top > 0 ? Math.min(1, c.ramp / top) : 1;
    c.ramp = f;
    // The aperture's overlap (candidate-view.ts) multiplies the spec weight for every policy, keyed ones too: it moves only with the coordinate.
    // Capped at the largest weight (2^32 − 1): a spec weight near it times an overlap would leave the integer range policies build on.
    const base = Math.min(MAX_WEIGHT, c.spec.weight * c.apertureWeight);
    c.weight = scaleWeights && adjusted ? Math.max(1, Math.round(base * scale * f)) : base;
    // Every un-keyed policy reads the weight (the layer, weighted draws, P2C's
    // weighted pair, least-loaded's load ÷ weight, the EDF rotation): the ramp
    // is in the weight alone, or P2C and least-loaded would see it twice. A
    // keyed policy's weights stay (keys would move), so the ramp scales the
    // load the bounded hashes compare with their capacity.
    // `| 0`: a small integer, so the field stays one and load() multiplies integers (no heap number on the pick path).
    c.loadScale = scaleWeights || f >= 1 ? 1 : f <= 0 ? MAX_LOAD_SCALE : Math.min(MAX_LOAD_SCALE, Math.max(1, Math.round(1 / f))) | 0;
  }
  return ramping && config !== undefined ? Math.max(10, Math.floor(config.windowMs / 50)) : 0;
}
