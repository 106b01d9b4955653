/**
 * `drawSmall(rng, n)`: the value `rng.below(n)` would draw — the same words
 * consumed, the same rejection of the short last bucket — for counts below
 * 2^30, without boxing.
 *
 * Why: docs/internals.md ("Numbers that do not allocate"). Callers narrow a
 * count to a small integer (`n | 0`) at the call site when `n <= SMALL_COUNT`
 * and call `rng.below(n)` otherwise; the draws are identical either way.
 */
import { PoiseError } from '../../core/errors.js';
import type { Rng } from '../../core/rng.js';
import { MILLION } from '../../core/weight.js';
import { F_ELIGIBLE, F_MEMBER, F_PANIC } from './flags.js';
import type { ResolvedPriorityOptions } from './options.js';
import { computeLocalityShares } from './plan.js';
import type { Sample, Sampled } from './sample.js';
const TWO_32 = 4294967296;
/** Counts up to this (2^30 − 1) are small-integer (Smi) values in V8 and draw through {@link drawSmall}. */
export const SMALL_COUNT = 0x3fff_ffff;

/** Uniform in [0, n) for an integer 1 <= n <= SMALL_COUNT; identical to `rng.below(n)`. */
export function drawSmall(rng: Rng, n: number): number {
  // limit is the largest multiple of n not above 2^32; words at or past it are redrawn.
  const limit = TWO_32 - (TWO_32 % n);
  // r is read from the generator's word, never returned as a uint32 (see Rng.word).
  let r: number;
  do {
    rng.step();
    r = rng.word[0]!;
  } while (r >= limit);
  return r % n;
}

/**
 * The per-decision draw shared by `PriorityWeightedRandom` and
 * `LocalityWeightedRandom`, and the errors both forms throw.
 *
 * Random consumption is fixed so that the prepared form can replay it:
 * nothing is drawn when nothing is selectable; then one `below(1e6)` picks
 * the priority (first whose cumulative share exceeds it); a fail-closed
 * panicking priority throws `PanicRejected` here; with localities one more
 * `below(1e6)` picks the locality; finally one `below(W)` over the selectable
 * weight `W` of the chosen group picks the endpoint (first, in candidate
 * order, whose cumulative weight exceeds it).
 */

/** How the chosen priority routed: its eligible members, or use-all panic. */
export type PriorityMode = 'healthy' | 'panic';

/** What `decide()` reports. */
export interface PriorityDecision {
  /** Index into the candidates array. */
  readonly index: number;
  /** The chosen priority's value. */
  readonly priority: number;
  readonly mode: PriorityMode;
}

/** Retained output of a draw (so `pick` allocates nothing). @internal */
export interface DrawResult {
  priority: number;
  panic: boolean;
}

/** Selectable weight of priority group `p` in its routing mode. @internal */
export function priorityCapacity(e: Sample, p: number): number {
  return e.pPanic[p] === 1 ? e.pPanicW[p]! : e.pEligibleW[p]!;
}

/** True when some priority with a share can take (or, fail-closed, deliberately reject) traffic. @internal */
export function anySelectable(e: Sample, o: ResolvedPriorityOptions): boolean {
  const failClosed = o.panicMode === 'failClosed';
  for (let p = 0; p < e.pCount; p++) {
    if (e.pShare[p]! > 0 && ((failClosed && e.pPanic[p] === 1) || priorityCapacity(e, p) > 0)) return true;
  }
  return false;
}

/** `NoEligibleCandidates` for a snapshot with members but nothing selectable. @internal */
export function noEligible(): PoiseError {
  return new PoiseError('NoEligibleCandidates', 'no eligible candidates: no priority has selectable capacity');
}

/** `PanicRejected` for fail-closed panic at `priority`. @internal */
export function panicRejected(priority: number): PoiseError {
  return new PoiseError('PanicRejected', `priority ${priority} is in panic and panicMode is 'failClosed': traffic shed on purpose`);
}

/**
 * Draws one decision from a sampled engine with computed priority shares;
 * returns the candidate index. The stages share one draw call site (see
 * PriorityTable.pick for why that matters to allocation).
 * @internal
 */
export function drawDecision(e: Sample, o: ResolvedPriorityOptions, rng: Rng, withLocality: boolean, out: DrawResult): number {
  if (!anySelectable(e, o)) throw noEligible();
  let n = MILLION;
  let stage = 0;
  let p = 0;
  let panic = false;
  let start = 0;
  let end = 0;
  for (;;) {
    const x = n <= SMALL_COUNT ? drawSmall(rng, n | 0) : rng.below(n);
    if (stage === 0) {
      p = 0;
      let acc = e.pShare[0]!;
      while (acc <= x) acc += e.pShare[++p]!;
      panic = e.pPanic[p] === 1;
      out.priority = e.pValue[p]!;
      out.panic = panic;
      if (panic && o.panicMode === 'failClosed') throw panicRejected(e.pValue[p]!);
      if (priorityCapacity(e, p) === 0) throw noEligible();
      if (withLocality) {
        computeLocalityShares(e, p, o);
        stage = 1;
        continue;
      }
      start = e.pStart[p]!;
      end = e.pEnd[p]!;
      n = priorityCapacity(e, p);
    } else if (stage === 1) {
      let l = e.pLocStart[p]!;
      let acc = e.lShare[l]!;
      while (acc <= x) acc += e.lShare[++l]!;
      start = e.lStart[l]!;
      end = e.lEnd[l]!;
      n = panic ? e.lPanicW[l]! : e.lEligibleW[l]!;
    } else {
      return endpointAt(e, panic, x, start, end);
    }
    stage = 2;
  }
}

/**
 * The candidate whose cumulative selectable weight in the group being drawn
 * from (`order[start .. end)`) first exceeds `w`.
 */
function endpointAt(e: Sampled, panic: boolean, w: number, start: number, end: number): number {
  const flags = e.flags;
  const weight = e.weight;
  // Selectable: a member that is eligible, or in panic panic-eligible.
  const mask = panic ? F_ELIGIBLE | F_PANIC : F_ELIGIBLE;
  let sum = 0;
  const order = e.order;
  for (let k = start; k < end; k++) {
    const i = order[k]!;
    const f = flags[i]!;
    if ((f & F_MEMBER) === 0 || (f & mask) === 0) continue;
    sum += weight[i]!;
    if (w < sum) return i;
  }
  throw noEligible(); // unreachable: w < Σ selectable weight of the group
}
