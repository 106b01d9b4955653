/**
 * The shared sampling stage of the priority and locality policies.
 *
 * One read takes every candidate exactly once — weight, priority, the three
 * predicates (`isMember`, `isEligible`, `isPanicEligible`, through
 * `flagsOf`) and, for locality routing, locality and locality weight — into
 * retained typed arrays. `sample()` then orders the indices by (priority,
 * locality, index) — a counting sort over the distinct (priority, locality)
 * keys, whose counts and weights one histogram pass sums — and folds the
 * keys into priority groups (and locality groups inside each priority) with
 * exact weight sums and host counts: the one layout `plan()`, the
 * per-decision draw and the prepared tables all use. Past 64 keys, or when
 * a sum or a locality weight is wrong, a heapsort (heap-order.ts) and a checked walk over
 * the candidates compute the same layout and throw the error that names the
 * first offending candidate. Nothing later re-reads a candidate, so a health
 * signal that changes mid-decision cannot make the plan and the endpoint
 * choice disagree.
 *
 * Buffers grow to the high-water candidate count and are then reused: a
 * stable candidate count allocates nothing.
 */
import { type LocalityCandidate, MAX_PRIORITY, type PriorityCandidate } from '../../core/candidate.js';
import { invalidConfig, PoiseError } from '../../core/errors.js';
import { checkedAdd, MAX_WEIGHT_SUM, validateWeight } from '../../core/weight.js';
import { F_ELIGIBLE, F_MEMBER, F_PANIC, flagsOf } from './flags.js';
import { heapSortOrder } from './heap-order.js';
import { KeyTable, MAX_KEYS } from './keys.js';
/** Panic-mode selectable: a member that is eligible or panic-eligible (panic widens, never narrows). */
export function panicSelectable(flags: number): boolean {
  return (flags & F_MEMBER) !== 0 && (flags & (F_ELIGIBLE | F_PANIC)) !== 0;
}

/**
 * The sample's fields that the later stages read. Only this file writes
 * them (the type makes every reference read-only elsewhere); plan.ts writes
 * the {@link Shares}; draw.ts and table.ts read both.
 * @internal
 */
export type Sampled = Readonly<
  Pick<
    PriorityEngine,
    | 'n'
    | 'weight'
    | 'prio'
    | 'flags'
    | 'locWeight'
    | 'loc'
    | 'order'
    | 'pCount'
    | 'pValue'
    | 'pStart'
    | 'pEnd'
    | 'pMemberW'
    | 'pEligibleW'
    | 'pPanicW'
    | 'pAllN'
    | 'pMemberN'
    | 'pEligibleN'
    | 'pLocStart'
    | 'pLocEnd'
    | 'lCount'
    | 'lStart'
    | 'lEnd'
    | 'lWeight'
    | 'lMemberW'
    | 'lEligibleW'
    | 'lPanicW'
    | 'lMemberN'
    | 'lEligibleN'
    | 'lPanicN'
  >
>;

/** The share stage's outputs, in the engine's buffers: written by plan.ts only. @internal */
export type Shares = Pick<PriorityEngine, 'pRaw' | 'pEff' | 'pShare' | 'pPanic' | 'globalShortage' | 'lEff' | 'lShare'>;

/** A sampled engine as the plan, draw and table stages see it. @internal */
export type Sample = Sampled & Shares;

/** Retained per-decision scratch: candidate samples, priority groups, locality groups, shares. @internal */
export class PriorityEngine {
  /** Candidates in the last sample. */
  n = 0;
  private cap = 0;
  weight = new Float64Array(0);
  prio = new Uint32Array(0);
  flags = new Uint8Array(0);
  locWeight = new Float64Array(0);
  loc: string[] = [];
  /** Candidate indices ordered by (priority, locality, index). */
  order = new Int32Array(0);
  /** The (priority, locality) keys of the last sample. */
  private readonly keys = new KeyTable();
  /** Counting sort: the next slot of each key (indexed by key); after placement, where each key's range ends. */
  private readonly keyStart = new Int32Array(MAX_KEYS);
  /** Histogram of the last {@link sumKeys}: count and weight per cell `key << 3 | flags`. */
  private readonly hCount = new Float64Array(8 * MAX_KEYS);
  private readonly hWeight = new Float64Array(8 * MAX_KEYS);
  /** Per-key sums of the last counting sort, indexed by key (not rank); see {@link bucketOrder}. */
  private readonly kAllN = new Float64Array(MAX_KEYS);
  private readonly kMemberN = new Float64Array(MAX_KEYS);
  private readonly kMemberW = new Float64Array(MAX_KEYS);
  private readonly kEligibleN = new Float64Array(MAX_KEYS);
  private readonly kEligibleW = new Float64Array(MAX_KEYS);
  private readonly kPanicN = new Float64Array(MAX_KEYS);
  private readonly kPanicW = new Float64Array(MAX_KEYS);
  private readonly kLocW = new Float64Array(MAX_KEYS);
  /** Two members of one key disagreed on the locality weight in the last counting sort. */
  private kConflict = false;

  /** Number of distinct priorities, ascending in the p* arrays. */
  pCount = 0;
  pValue = new Uint32Array(0);
  pStart = new Int32Array(0);
  pEnd = new Int32Array(0);
  /** Weight of members (the availability denominator). */
  pMemberW = new Float64Array(0);
  /** Weight of eligible members (healthy capacity). */
  pEligibleW = new Float64Array(0);
  /** Weight of members selectable in panic (eligible or panic-eligible). */
  pPanicW = new Float64Array(0);
  /** Host counts for `arithmetic: 'envoy'`: all candidates, members, eligible members. */
  pAllN = new Float64Array(0);
  pMemberN = new Float64Array(0);
  pEligibleN = new Float64Array(0);
  pRaw = new Float64Array(0);
  pEff = new Float64Array(0);
  pShare = new Float64Array(0);
  pPanic = new Uint8Array(0);
  pLocStart = new Int32Array(0);
  pLocEnd = new Int32Array(0);
  /** True when combined effective availability is below 100 %. */
  globalShortage = false;
  /** Candidate → (priority, locality) key, valid after a key scan. */
  keyOf = new Int32Array(0);
  /** Locality groups, contiguous per priority (`pLocStart..pLocEnd`). */
  lCount = 0;
  lStart = new Int32Array(0);
  lEnd = new Int32Array(0);
  lWeight = new Float64Array(0);
  lMemberW = new Float64Array(0);
  lEligibleW = new Float64Array(0);
  lPanicW = new Float64Array(0);
  lMemberN = new Float64Array(0);
  lEligibleN = new Float64Array(0);
  lPanicN = new Float64Array(0);
  lEff = new Float64Array(0);
  lShare = new Float64Array(0);

  /**
   * Samples `candidates` once and groups them. Throws `Empty`, `InvalidWeight`,
   * `InvalidConfig` (a bad priority or locality) or `InconsistentTopology`.
   */
  sample(candidates: readonly PriorityCandidate[], withLocality: boolean): void {
    this.read(candidates, withLocality);
    this.sortAndGroup(withLocality);
  }

  /** Reads and validates every candidate once into the scratch arrays. */
  private read(candidates: readonly PriorityCandidate[], withLocality: boolean): void {
    const n = candidates.length;
    if (n === 0) throw new PoiseError('Empty', 'no candidates');
    this.ensure(n);
    this.n = n;
    const weight = this.weight;
    const prio = this.prio;
    const flags = this.flags;
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      // For a number x, `x >>> 0 === x` holds exactly when x is an integer in
      // [0, 2^32 − 1] (the priority range; a weight must also not be 0), so
      // these checks accept and reject what isValidWeight and the priority
      // rule do, in a couple of instructions (typeof first: a bigint or a
      // symbol must reach the PoiseError, not a TypeError from `>>>`).
      const w = c.weight;
      if (typeof w !== 'number' || w >>> 0 !== w || w === 0) validateWeight(w, `candidates[${i}].weight`);
      const p = c.priority;
      if (typeof p !== 'number' || p >>> 0 !== p)
        invalidConfig(`candidates[${i}].priority`, `must be an integer in [0, ${MAX_PRIORITY}]`, p);
      weight[i] = w;
      prio[i] = p;
      flags[i] = flagsOf(c);
      if (withLocality) {
        const lc = c as LocalityCandidate;
        const name = lc.locality;
        if (typeof name !== 'string') invalidConfig(`candidates[${i}].locality`, 'must be a string', name);
        const lw = lc.localityWeight;
        if (typeof lw !== 'number' || lw >>> 0 !== lw || lw === 0) validateWeight(lw, `candidates[${i}].localityWeight`);
        this.loc[i] = name;
        this.locWeight[i] = lw;
      }
    }
  }

  private sortAndGroup(withLocality: boolean): void {
    const k = this.bucketOrder(withLocality);
    if (k >= 0 && this.foldKeys(k, withLocality)) return;
    if (k < 0) {
      const order = this.order;
      for (let i = 0; i < this.n; i++) order[i] = i;
      heapSortOrder(order, this.n, this.prio, this.loc, withLocality);
    }
    this.group(withLocality);
  }

  private ensure(n: number): void {
    if (n <= this.cap) return;
    let cap = Math.max(8, this.cap);
    while (cap < n) cap *= 2;
    this.cap = cap;
    this.weight = new Float64Array(cap);
    this.prio = new Uint32Array(cap);
    this.flags = new Uint8Array(cap);
    this.locWeight = new Float64Array(cap);
    while (this.loc.length < cap) this.loc.push('');
    this.order = new Int32Array(cap);
    this.keyOf = new Int32Array(cap);
    this.pValue = new Uint32Array(cap);
    this.pStart = new Int32Array(cap);
    this.pEnd = new Int32Array(cap);
    this.pMemberW = new Float64Array(cap);
    this.pEligibleW = new Float64Array(cap);
    this.pPanicW = new Float64Array(cap);
    this.pAllN = new Float64Array(cap);
    this.pMemberN = new Float64Array(cap);
    this.pEligibleN = new Float64Array(cap);
    this.pRaw = new Float64Array(cap);
    this.pEff = new Float64Array(cap);
    this.pShare = new Float64Array(cap);
    this.pPanic = new Uint8Array(cap);
    this.pLocStart = new Int32Array(cap);
    this.pLocEnd = new Int32Array(cap);
    this.lStart = new Int32Array(cap);
    this.lEnd = new Int32Array(cap);
    this.lWeight = new Float64Array(cap);
    this.lMemberW = new Float64Array(cap);
    this.lEligibleW = new Float64Array(cap);
    this.lPanicW = new Float64Array(cap);
    this.lMemberN = new Float64Array(cap);
    this.lEligibleN = new Float64Array(cap);
    this.lPanicN = new Float64Array(cap);
    this.lEff = new Float64Array(cap);
    this.lShare = new Float64Array(cap);
  }

  /**
   * Orders `order` by (priority, locality, index) with a counting sort over
   * the distinct keys — O(n + k²) for k ≤ MAX_KEYS distinct keys, the usual
   * case of a few priorities × a few localities — and sums each key's
   * counts and weights in the same pass, in index order (sequential reads:
   * {@link foldKeys} then groups k keys instead of walking n candidates
   * through `order`). Returns k, or −1 (leaving the heapsort and the walk
   * to do it) when there are more distinct keys than that.
   */
  private bucketOrder(withLocality: boolean): number {
    const n = this.n;
    const keyOf = this.keyOf;
    const k = this.keys.find(n, this.prio, this.loc, withLocality, keyOf);
    if (k < 0) return -1;
    this.keys.sort(k);
    this.sumKeys(k, withLocality);
    // Counting sort: each key's first slot in (priority, locality) order, indexed by key.
    const keyOrder = this.keys.order;
    const at = this.keyStart;
    let acc = 0;
    for (let r = 0; r < k; r++) {
      const key = keyOrder[r]!;
      at[key] = acc;
      acc += this.kAllN[key]!;
    }
    const order = this.order;
    for (let i = 0; i < n; i++) order[at[keyOf[i]!]!++] = i;
    return k;
  }

  /**
   * Per-key counts and weights of the sampled candidates, in one
   * sequential branch-free pass: a histogram over cells `key << 3 | flags`
   * (with F_MEMBER = 1, F_ELIGIBLE = 2, F_PANIC = 4 the members are the odd
   * cells, eligible members cells 3 and 7, panic-selectable members cells
   * 3, 5 and 7), then a few additions per key.
   */
  private sumKeys(k: number, withLocality: boolean): void {
    const n = this.n;
    const keyOf = this.keyOf;
    const flags = this.flags;
    const weight = this.weight;
    const hCount = this.hCount;
    const hWeight = this.hWeight;
    hCount.fill(0, 0, 8 * k);
    hWeight.fill(0, 0, 8 * k);
    this.kConflict = false;
    if (withLocality) {
      const locWeight = this.locWeight;
      const kLocW = this.kLocW;
      kLocW.fill(-1, 0, k);
      let conflict = false;
      for (let i = 0; i < n; i++) {
        const key = keyOf[i]!;
        const cell = (key << 3) | flags[i]!;
        hCount[cell]! += 1;
        hWeight[cell]! += weight[i]!;
        const lw = locWeight[i]!;
        const seen = kLocW[key]!;
        if (seen < 0) kLocW[key] = lw;
        else if (seen !== lw) conflict = true;
      }
      this.kConflict = conflict;
    } else {
      for (let i = 0; i < n; i++) {
        const cell = (keyOf[i]! << 3) | flags[i]!;
        hCount[cell]! += 1;
        hWeight[cell]! += weight[i]!;
      }
    }
    const M = F_MEMBER;
    const E = F_MEMBER | F_ELIGIBLE;
    const P = F_MEMBER | F_PANIC;
    const EP = F_MEMBER | F_ELIGIBLE | F_PANIC;
    for (let key = 0; key < k; key++) {
      const b = key << 3;
      this.kAllN[key] =
        hCount[b]! + hCount[b + 1]! + hCount[b + 2]! + hCount[b + 3]! + hCount[b + 4]! + hCount[b + 5]! + hCount[b + 6]! + hCount[b + 7]!;
      const eligibleN = hCount[b + E]! + hCount[b + EP]!;
      const eligibleW = hWeight[b + E]! + hWeight[b + EP]!;
      const panicN = eligibleN + hCount[b + P]!;
      const panicW = eligibleW + hWeight[b + P]!;
      this.kEligibleN[key] = eligibleN;
      this.kEligibleW[key] = eligibleW;
      this.kPanicN[key] = panicN;
      this.kPanicW[key] = panicW;
      this.kMemberN[key] = panicN + hCount[b + M]!;
      this.kMemberW[key] = panicW + hWeight[b + M]!;
    }
  }

  /**
   * The priority and locality groups from the per-key sums of
   * {@link bucketOrder}, folded in key order (after the placement loop,
   * `keyStart[key]` is where that key's range ends). Sums of integers below 2^53
   * are exact in any order, so every value equals what {@link group}'s
   * walk computes. Returns false — and {@link group} then walks the
   * candidates and throws the error it names, for the first offending
   * candidate in (priority, locality, index) order — when two members of
   * one key disagree on the locality weight or a member weight sum is past
   * MAX_WEIGHT_SUM (the sums only grow, so a total past it means a partial
   * sum of the walk is past it too).
   */
  private foldKeys(k: number, withLocality: boolean): boolean {
    if (this.kConflict) return false;
    const keyOrder = this.keys.order;
    const keyPrio = this.keys.prio;
    const end = this.keyStart;
    const { kAllN, kMemberN, kMemberW, kEligibleN, kEligibleW, kPanicN, kPanicW } = this;
    const { pValue, pStart, pEnd, pAllN, pMemberN, pMemberW, pEligibleN, pEligibleW, pPanicW, pLocStart } = this;
    let p = -1;
    let begin = 0;
    for (let r = 0; r < k; r++) {
      const key = keyOrder[r]!;
      const pv = keyPrio[key]!;
      if (p < 0 || pValue[p] !== pv) {
        if (p >= 0) pEnd[p] = begin;
        p++;
        pValue[p] = pv;
        pStart[p] = begin;
        pMemberW[p] = pEligibleW[p] = pPanicW[p] = 0;
        pAllN[p] = pMemberN[p] = pEligibleN[p] = 0;
        pLocStart[p] = r;
      }
      pAllN[p]! += kAllN[key]!;
      pMemberN[p]! += kMemberN[key]!;
      pMemberW[p]! += kMemberW[key]!;
      pEligibleN[p]! += kEligibleN[key]!;
      pEligibleW[p]! += kEligibleW[key]!;
      pPanicW[p]! += kPanicW[key]!;
      begin = end[key]!;
    }
    pEnd[p] = this.n;
    const pCount = p + 1;
    this.pCount = pCount;
    for (let q = 0; q < pCount; q++) if (pMemberW[q]! > MAX_WEIGHT_SUM) return false;
    const pLocEnd = this.pLocEnd;
    if (!withLocality) {
      this.lCount = 0;
      for (let q = 0; q < pCount; q++) pLocEnd[q] = pLocStart[q] = 0;
      return true;
    }
    // With locality every key is one locality group, in key order.
    const { lStart, lEnd, lWeight, lMemberW, lEligibleW, lPanicW, lMemberN, lEligibleN, lPanicN, kLocW } = this;
    begin = 0;
    for (let r = 0; r < k; r++) {
      const key = keyOrder[r]!;
      lStart[r] = begin;
      begin = lEnd[r] = end[key]!;
      lWeight[r] = kLocW[key]!;
      lMemberW[r] = kMemberW[key]!;
      lEligibleW[r] = kEligibleW[key]!;
      lPanicW[r] = kPanicW[key]!;
      lMemberN[r] = kMemberN[key]!;
      lEligibleN[r] = kEligibleN[key]!;
      lPanicN[r] = kPanicN[key]!;
    }
    this.lCount = k;
    for (let q = 0; q < pCount; q++) pLocEnd[q] = q + 1 < pCount ? pLocStart[q + 1]! : k;
    return true;
  }

  private group(withLocality: boolean): void {
    const order = this.order;
    let p = -1;
    let l = -1;
    for (let k = 0; k < this.n; k++) {
      const i = order[k]!;
      const pv = this.prio[i]!;
      if (p < 0 || this.pValue[p] !== pv) {
        if (p >= 0) this.pEnd[p] = k;
        p++;
        this.pValue[p] = pv;
        this.pStart[p] = k;
        this.pMemberW[p] = 0;
        this.pEligibleW[p] = 0;
        this.pPanicW[p] = 0;
        this.pAllN[p] = 0;
        this.pMemberN[p] = 0;
        this.pEligibleN[p] = 0;
        this.pLocStart[p] = l + 1;
        if (withLocality) {
          if (l >= 0) this.lEnd[l] = k;
          l = this.openLocality(l, k, i);
        }
      } else if (withLocality) {
        const first = order[this.lStart[l]!]!;
        if (this.loc[first] !== this.loc[i]) {
          this.lEnd[l] = k;
          l = this.openLocality(l, k, i);
        } else if (this.locWeight[first] !== this.locWeight[i]) {
          const a = Math.min(this.locWeight[first]!, this.locWeight[i]!);
          const b = Math.max(this.locWeight[first]!, this.locWeight[i]!);
          throw new PoiseError(
            'InconsistentTopology',
            `locality ${JSON.stringify(this.loc[i])} at priority ${pv} has contradictory locality weights ${a} and ${b}`,
          );
        }
      }
      const f = this.flags[i]!;
      const w = this.weight[i]!;
      this.pAllN[p]! += 1;
      if (withLocality) this.lAdd(l, f, w);
      if ((f & F_MEMBER) === 0) continue;
      this.pMemberN[p]! += 1;
      this.pMemberW[p] = checkedAdd(this.pMemberW[p]!, w);
      if ((f & F_ELIGIBLE) !== 0) {
        this.pEligibleN[p]! += 1;
        this.pEligibleW[p] = checkedAdd(this.pEligibleW[p]!, w);
      }
      if (panicSelectable(f)) this.pPanicW[p] = checkedAdd(this.pPanicW[p]!, w);
    }
    this.pEnd[p] = this.n;
    this.pCount = p + 1;
    if (withLocality) {
      this.lEnd[l] = this.n;
      this.lCount = l + 1;
      for (let q = 0; q < this.pCount; q++) {
        this.pLocEnd[q] = q + 1 < this.pCount ? this.pLocStart[q + 1]! : this.lCount;
      }
    } else {
      this.lCount = 0;
      for (let q = 0; q < this.pCount; q++) this.pLocEnd[q] = this.pLocStart[q] = 0;
    }
  }

  private openLocality(l: number, k: number, i: number): number {
    const m = l + 1;
    this.lStart[m] = k;
    this.lWeight[m] = this.locWeight[i]!;
    this.lMemberW[m] = 0;
    this.lEligibleW[m] = 0;
    this.lPanicW[m] = 0;
    this.lMemberN[m] = 0;
    this.lEligibleN[m] = 0;
    this.lPanicN[m] = 0;
    return m;
  }

  private lAdd(l: number, f: number, w: number): void {
    if ((f & F_MEMBER) === 0) return;
    this.lMemberN[l]! += 1;
    this.lMemberW[l] = checkedAdd(this.lMemberW[l]!, w);
    if ((f & F_ELIGIBLE) !== 0) {
      this.lEligibleN[l]! += 1;
      this.lEligibleW[l] = checkedAdd(this.lEligibleW[l]!, w);
    }
    if (panicSelectable(f)) {
      this.lPanicN[l]! += 1;
      this.lPanicW[l] = checkedAdd(this.lPanicW[l]!, w);
    }
  }
}
