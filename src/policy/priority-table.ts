/**
 * The prepared pick table: priority, locality and endpoint choice reduced to
 * cumulative arrays, built once from a sampled engine.
 *
 * A pick is three binary searches (priority shares, locality shares,
 * endpoint weight prefix sums): O(log n), no allocation. It consumes random
 * numbers exactly like `drawDecision`, and every array holds the values the
 * per-decision form computes for the same snapshot, so both forms return
 * the same index for the same seed.
 */
import type { Rng } from '../core/rng.js';
import { MILLION } from '../core/weight.js';
import { SMALL_COUNT, drawSmall } from './priority-draw.js';
import { F_ELIGIBLE, F_MEMBER, F_PANIC, type PriorityEngine } from './priority-engine.js';
import {
  type DrawResult,
  anySelectable,
  noEligible,
  panicRejected,
  priorityCapacity,
} from './priority-decide.js';
import type { ResolvedPriorityOptions } from './priority-options.js';
import { computeLocalityShares } from './locality-shares.js';

const HEALTHY = 0;
const PANIC = 1;
const REJECT = 2;
const EMPTY = 3;

/** First index in [lo, hi) whose value exceeds `x` (`hi - 1` if none, which cannot happen for x < total). */
function upper(a: Float64Array, lo: number, hi: number, x: number): number {
  let l = lo;
  let h = hi - 1;
  while (l < h) {
    const m = (l + h) >>> 1;
    if (a[m]! > x) h = m;
    else l = m + 1;
  }
  return l;
}

/** Cumulative tables of one prepared snapshot. */
export class PriorityTable {
  private readonly any: boolean;
  private readonly k: number;
  private readonly cum: Float64Array;
  private readonly value: Uint32Array;
  private readonly mode: Uint8Array;
  private readonly gFrom: Int32Array;
  private readonly gTo: Int32Array;
  private readonly gCum: Float64Array;
  private readonly gOff: Int32Array;
  private readonly gLen: Int32Array;
  private readonly members: Int32Array;
  private readonly prefix: Float64Array;
  private readonly withLocality: boolean;

  /** Builds from an engine that has sampled and computed priority shares. */
  constructor(e: PriorityEngine, o: ResolvedPriorityOptions, withLocality: boolean) {
    this.withLocality = withLocality;
    this.any = anySelectable(e, o);
    const k = e.pCount;
    this.k = k;
    this.cum = new Float64Array(k);
    this.value = new Uint32Array(k);
    this.mode = new Uint8Array(k);
    this.gFrom = new Int32Array(k);
    this.gTo = new Int32Array(k);
    const groups = withLocality ? e.lCount : k;
    this.gCum = new Float64Array(groups);
    this.gOff = new Int32Array(groups);
    this.gLen = new Int32Array(groups);
    this.members = new Int32Array(e.n);
    this.prefix = new Float64Array(e.n);
    let acc = 0;
    let m = 0;
    for (let p = 0; p < k; p++) {
      acc += e.pShare[p]!;
      this.cum[p] = acc;
      this.value[p] = e.pValue[p]!;
      const panic = e.pPanic[p] === 1;
      this.mode[p] =
        panic && o.panicMode === 'failClosed' ? REJECT : priorityCapacity(e, p) === 0 ? EMPTY : panic ? PANIC : HEALTHY;
      if (withLocality) {
        computeLocalityShares(e, p, o);
        this.gFrom[p] = e.pLocStart[p]!;
        this.gTo[p] = e.pLocEnd[p]!;
        let lacc = 0;
        for (let l = e.pLocStart[p]!; l < e.pLocEnd[p]!; l++) {
          lacc += e.lShare[l]!;
          this.gCum[l] = lacc;
          m = this.fill(e, l, e.lStart[l]!, e.lEnd[l]!, panic, m);
        }
      } else {
        this.gFrom[p] = p;
        this.gTo[p] = p + 1;
        m = this.fill(e, p, e.pStart[p]!, e.pEnd[p]!, panic, m);
      }
    }
  }

  private fill(e: PriorityEngine, g: number, start: number, end: number, panic: boolean, m: number): number {
    this.gOff[g] = m;
    let sum = 0;
    for (let k = start; k < end; k++) {
      const i = e.order[k]!;
      const f = e.flags[i]!;
      if ((f & F_MEMBER) === 0) continue;
      if ((f & F_ELIGIBLE) === 0 && !(panic && (f & F_PANIC) !== 0)) continue;
      sum += e.weight[i]!;
      this.members[m] = i;
      this.prefix[m] = sum;
      m++;
    }
    this.gLen[g] = m - this.gOff[g]!;
    return m;
  }

  /**
   * One decision: the same draws, in the same order, as the per-decision form.
   * The three stages (priority, locality, endpoint) share one draw and one
   * search call site, which keeps the inlined size small enough for V8 to
   * inline `Rng.nextU32` too — a non-inlined `nextU32` returns its 32-bit
   * word as a boxed heap number.
   */
  pick(rng: Rng, out: DrawResult): number {
    if (!this.any) throw noEligible();
    let arr = this.cum;
    let lo = 0;
    let hi = this.k;
    let n = MILLION;
    let stage = 0;
    for (;;) {
      const x = n <= SMALL_COUNT ? drawSmall(rng, n | 0) : rng.below(n);
      const r = upper(arr, lo, hi, x);
      if (stage === 2) return this.members[r]!;
      const g = r;
      if (stage === 0) {
        const mode = this.mode[r]!;
        out.priority = this.value[r]!;
        out.panic = mode === PANIC || mode === REJECT;
        if (mode === REJECT) throw panicRejected(this.value[r]!);
        if (mode === EMPTY) throw noEligible();
        if (this.withLocality) {
          arr = this.gCum;
          lo = this.gFrom[r]!;
          hi = this.gTo[r]!;
          stage = 1;
          continue;
        }
      }
      const off = this.gOff[g]!;
      arr = this.prefix;
      lo = off;
      hi = off + this.gLen[g]!;
      n = this.prefix[hi - 1]!;
      stage = 2;
    }
  }
}
