/**
 * The prepared pick table: priority, locality and endpoint choice reduced to
 * cumulative arrays, built once from a sampled engine.
 *
 * A pick is three guide-table lookups (priority shares, locality shares,
 * endpoint weight prefix sums; see guide.ts — a range of at most
 * four entries is simply walked): expected O(1), flat in n, and no
 * allocation. Each lookup returns exactly what a binary search
 * for the first cumulative value exceeding the draw returns, it consumes
 * random numbers exactly like `drawDecision`, and every array holds the
 * values the per-decision form computes for the same snapshot, so both
 * forms return the same index for the same seed.
 */
import type { Rng } from '../../core/rng.js';
import { MILLION } from '../../core/weight.js';
import { anySelectable, type DrawResult, drawSmall, noEligible, panicRejected, priorityCapacity, SMALL_COUNT } from './draw.js';
import { F_ELIGIBLE, F_MEMBER, F_PANIC } from './flags.js';
import { fillGuide, guideBuckets, guideSize, guideWidth } from './guide.js';
import type { ResolvedPriorityOptions } from './options.js';
import { computeLocalityShares } from './plan.js';
import type { Sample } from './sample.js';
/** Ranges of at most this many entries are searched by a forward walk instead of their guide. */
const SHORT = 4;

const HEALTHY = 0;
const PANIC = 1;
const REJECT = 2;
const EMPTY = 3;

/** Grows `a` to at least `n` entries (doubling; contents are not kept). */
function grownF64(a: Float64Array<ArrayBuffer>, n: number): Float64Array<ArrayBuffer> {
  return a.length >= n ? a : new Float64Array(Math.max(n, 2 * a.length));
}
function grownI32(a: Int32Array<ArrayBuffer>, n: number): Int32Array<ArrayBuffer> {
  return a.length >= n ? a : new Int32Array(Math.max(n, 2 * a.length));
}

/**
 * Cumulative tables of one snapshot, in buffers that grow to the high-water
 * size and are then reused: {@link PriorityTable.load} allocates nothing
 * for a snapshot no larger than one it has held, so the per-decision form
 * can load and pick on every call.
 */
export class PriorityTable {
  private any = false;
  private k = 0;
  private cum = new Float64Array(8);
  private value = new Uint32Array(8);
  private mode = new Uint8Array(8);
  private gFrom = new Int32Array(8);
  private gTo = new Int32Array(8);
  private gCum = new Float64Array(8);
  private gOff = new Int32Array(8);
  private gLen = new Int32Array(8);
  private members = new Int32Array(8);
  private prefix = new Float64Array(8);
  private withLocality = false;
  /** Guide tables of every stage, back to back: priorities, then localities, then endpoint groups. */
  private guide = new Int32Array(64);
  /**
   * Per search range — slot 0 the priorities, 1 + p the localities of
   * priority p (locality routing), 1 + k + g endpoint group g — the offset of
   * its guide and 1 / its bucket width. Both live in typed arrays so the pick
   * loop's variables stay unboxed (docs/internals.md).
   */
  private sGuide = new Int32Array(16);
  private sInv = new Float64Array(16);

  /** Loads the tables of an engine that has sampled and computed priority shares. */
  load(e: Sample, o: ResolvedPriorityOptions, withLocality: boolean): void {
    this.withLocality = withLocality;
    this.any = anySelectable(e, o);
    const k = e.pCount;
    this.k = k;
    if (this.value.length < k) {
      const cap = Math.max(k, 2 * this.value.length);
      this.value = new Uint32Array(cap);
      this.mode = new Uint8Array(cap);
    }
    this.cum = grownF64(this.cum, k);
    this.gFrom = grownI32(this.gFrom, k);
    this.gTo = grownI32(this.gTo, k);
    const groups = withLocality ? e.lCount : k;
    this.gCum = grownF64(this.gCum, groups);
    this.gOff = grownI32(this.gOff, groups);
    this.gLen = grownI32(this.gLen, groups);
    this.members = grownI32(this.members, e.n);
    this.prefix = grownF64(this.prefix, e.n);
    let acc = 0;
    let m = 0;
    for (let p = 0; p < k; p++) {
      acc += e.pShare[p]!;
      this.cum[p] = acc;
      this.value[p] = e.pValue[p]!;
      const panic = e.pPanic[p] === 1;
      this.mode[p] = panic && o.panicMode === 'failClosed' ? REJECT : priorityCapacity(e, p) === 0 ? EMPTY : panic ? PANIC : HEALTHY;
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
    // Guide tables: priorities over [0, 1e6), each priority's localities over
    // [0, 1e6), each endpoint group over [0, its selectable weight).
    const slots = 1 + k + groups;
    this.sGuide = grownI32(this.sGuide, slots);
    this.sInv = grownF64(this.sInv, slots);
    let size = guideSize(MILLION, k);
    for (let p = 0; p < k && withLocality; p++) size += guideSize(MILLION, this.gTo[p]! - this.gFrom[p]!);
    for (let g = 0; g < groups; g++) size += this.gLen[g]! > 0 ? guideSize(this.groupTotal(g), this.gLen[g]!) : 0;
    this.guide = grownI32(this.guide, size);
    let at = this.build(0, this.cum, 0, k, MILLION, 0);
    for (let p = 0; p < k && withLocality; p++) at = this.build(1 + p, this.gCum, this.gFrom[p]!, this.gTo[p]!, MILLION, at);
    for (let g = 0; g < groups; g++) {
      const off = this.gOff[g]!;
      if (this.gLen[g]! > 0) at = this.build(1 + k + g, this.prefix, off, off + this.gLen[g]!, this.groupTotal(g), at);
    }
  }

  /** Selectable weight of endpoint group `g` (its last prefix sum). */
  private groupTotal(g: number): number {
    return this.prefix[this.gOff[g]! + this.gLen[g]! - 1]!;
  }

  /** Fills slot `slot`'s guide of `a[lo .. hi)` over draws in [0, total) at `at`; returns the next free offset. */
  private build(slot: number, a: Float64Array, lo: number, hi: number, total: number, at: number): number {
    if (hi <= lo) return at;
    const pow = guideWidth(total, hi - lo);
    const buckets = guideBuckets(total, pow);
    fillGuide(a, lo, hi, pow, buckets, this.guide, at);
    this.sGuide[slot] = at;
    this.sInv[slot] = 1 / pow;
    return at + buckets;
  }

  private fill(e: Sample, g: number, start: number, end: number, panic: boolean, m: number): number {
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

  // --- the layer (docs/policies.md, "Weight and priority"): the first two stages with given draws ---

  /**
   * The priority stage for a draw `x` in [0, 1e6): its group index `p`,
   * with `out` set and `PanicRejected` / `NoEligibleCandidates` thrown as
   * {@link pick} throws them. The layer (layer.ts) draws `x` itself (from
   * its stream, or a key's hash) and then lets the configured policy choose
   * inside the group, so these never touch {@link pick}'s draws.
   */
  priorityAt(x: number, out: DrawResult): number {
    if (!this.any) throw noEligible();
    const p = this.search(this.cum, 0, this.k, 0, x);
    const mode = this.mode[p]!;
    out.priority = this.value[p]!;
    out.panic = mode === PANIC || mode === REJECT;
    if (mode === REJECT) throw panicRejected(this.value[p]!);
    if (mode === EMPTY) throw noEligible();
    return p;
  }

  /** Endpoint groups of priority `p`: its localities (locality routing), else 1. */
  groupCount(p: number): number {
    return this.gTo[p]! - this.gFrom[p]!;
  }

  /** The endpoint group of priority `p` for a locality draw `y` in [0, 1e6) (unused with one group). */
  groupAt(p: number, y: number): number {
    const lo = this.gFrom[p]!;
    const hi = this.gTo[p]!;
    return hi - lo === 1 ? lo : this.search(this.gCum, lo, hi, 1 + p, y);
  }

  /** The priority group that takes all traffic when one does (share 1e6, routable), else −1. */
  soleGroupPriority(): number {
    if (!this.any) return -1;
    for (let p = 0; p < this.k; p++) {
      const share = this.cum[p]! - (p > 0 ? this.cum[p - 1]! : 0);
      if (share === MILLION) return this.mode[p] === HEALTHY ? p : -1;
      if (share > 0) return -1;
    }
    return -1;
  }

  /** Priority groups in the table. */
  get priorities(): number {
    return this.k;
  }

  /** The first endpoint group of priority `p` (its groups are `groupStart(p) .. groupStart(p) + groupCount(p) − 1`). */
  groupStart(p: number): number {
    return this.gFrom[p]!;
  }

  /** Selectable members of endpoint group `g`, as candidate indices in candidate order. */
  groupMembers(g: number): Int32Array {
    const off = this.gOff[g]!;
    return this.members.slice(off, off + this.gLen[g]!);
  }

  /** First index in [lo, hi − 1] of `arr` whose value exceeds `x` (`hi − 1` when none), through range `slot`'s guide. */
  private search(arr: Float64Array, lo: number, hi: number, slot: number, x: number): number {
    let r = hi - lo <= SHORT ? lo : this.guide[this.sGuide[slot]! + Math.floor(x * this.sInv[slot]!)]!;
    while (r < hi - 1 && arr[r]! <= x) r++;
    return r;
  }

  /**
   * One decision: the same draws, in the same order, as the per-decision form.
   * The three stages (priority, locality, endpoint) share one draw and one
   * search call site, which keeps the inlined size small.
   */
  pick(rng: Rng, out: DrawResult): number {
    if (!this.any) throw noEligible();
    let arr = this.cum;
    let lo = 0;
    let hi = this.k;
    let n = MILLION;
    let slot = 0;
    let stage = 0;
    for (;;) {
      const x = n <= SMALL_COUNT ? drawSmall(rng, n | 0) : rng.below(n);
      // guideSearch(arr, hi, x, guide, off, inv) by hand (a call would box the
      // double argument); a range of at most SHORT entries is walked from its
      // start, which finds the same entry without the guide's dependent loads.
      let r = hi - lo <= SHORT ? lo : this.guide[this.sGuide[slot]! + Math.floor(x * this.sInv[slot]!)]!;
      while (r < hi - 1 && arr[r]! <= x) r++;
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
          slot = 1 + r;
          stage = 1;
          continue;
        }
      }
      const off = this.gOff[g]!;
      arr = this.prefix;
      lo = off;
      hi = off + this.gLen[g]!;
      n = this.prefix[hi - 1]!;
      slot = 1 + this.k + g;
      stage = 2;
    }
  }
}
