/**
 * RoundRobin: a rotation over the slice that honours weights.
 *
 * Equal weights (the usual case): a cursor over the slice, one step per
 * pick, O(1). Unequal weights: an earliest-deadline-first rotation
 * (Envoy's EDF scheduler, edf.ts) — member i is due every 1/wᵢ of virtual
 * time, so any Σw consecutive picks from a fresh start choose it exactly
 * wᵢ times — O(log n) per pick over a binary heap in typed arrays, where
 * nginx's smooth weighted rotation ({@link SmoothWeightedRoundRobin}) scans
 * every member on every pick.
 *
 * When the runtime hands over a different slice (membership or health
 * changed), the rotation continues: with equal weights the cursor moves
 * after the last member served, found by identity (if that member is still
 * present the next pick is its successor in the new slice; if it left, the
 * first member that followed it in the old slice and is still present), so
 * a shrinking or growing slice neither skips a surviving member nor serves
 * the last one twice in a row; with weights every surviving member keeps
 * how long it had before it was due, and a new member is due after one
 * period. That lookup builds an id → index map once per slice change,
 * never per pick.
 *
 * Start: by default the first pick is the first member (or the member due
 * first). `start: 'random'` begins a fresh rotation at an offset drawn from
 * the policy's own stream — `below(n)` steps in — as Envoy does per worker,
 * so that N workers that start together do not all send their first
 * requests to the same backend; `{ seed }` makes that offset exact. An
 * ineligible member (standalone callers only) is stepped over.
 */
import type { Candidate } from '../core/candidate.js';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { validateWeight } from '../core/weight.js';
import { EdfRotation } from './edf.js';
import { throwEmpty, throwNoEligible } from './slice.js';
import type { Policy, SeedOptions } from './types.js';

/** Options of {@link RoundRobin}. */
export interface RoundRobinOptions extends SeedOptions {
  /** `'first'` (default): start at the first member. `'random'`: start a fresh rotation at a seeded random offset. */
  start?: 'first' | 'random';
}

/**
 * Round robin, weighted when the weights differ.
 *
 * @example
 * const rr = new RoundRobin();
 * rr.pick(backends); // 0, then 1, 2, ..., n − 1, 0, ... (equal weights)
 */
export class RoundRobin implements Policy {
  private slice: readonly Candidate[] | undefined;
  private sliceLength = -1;
  private cursor = 0;
  /** Index in `slice` of the member served last, -1 before the first pick. */
  private last = -1;
  /** Ids of the prepared slice (robust to a caller mutating the array in place). */
  private ids: string[] = [];
  /** The weighted rotation, in use when the prepared slice's weights differ. */
  private readonly edf = new EdfRotation();
  private weighted = false;
  private weights = new Float64Array(0);
  private dueIn = new Float64Array(0);
  /** The start-offset stream (`start: 'random'`), else undefined. */
  private readonly rng: Rng | undefined;

  /** `seed` is used only with `start: 'random'` (the offset); throws `InvalidConfig` for a bad option. */
  constructor(options: RoundRobinOptions = {}) {
    checkOptionKeys(options, ['seed', 'start']);
    const start = options.start ?? 'first';
    if (start !== 'first' && start !== 'random') invalidConfig('options.start', "must be 'first' or 'random'", start);
    this.rng = start === 'random' ? new Rng(options.seed) : undefined;
  }

  /** Adopts `candidates` as the current slice, continuing the rotation (throws `InvalidWeight` for a bad weight; the old state stays then). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    const weights = this.weights.length >= n ? this.weights : new Float64Array(Math.max(n, 2 * this.weights.length));
    let weighted = false;
    for (let i = 0; i < n; i++) {
      weights[i] = validateWeight(candidates[i]!.weight, `candidates[${i}].weight`);
      if (weights[i] !== weights[0]) weighted = true;
    }
    const old = this.ids;
    const last = this.last;
    const wasWeighted = this.weighted && old.length > 0;
    const index = new Map<string, number>();
    const ids = new Array<string>(n);
    for (let i = 0; i < n; i++) {
      ids[i] = candidates[i]!.id;
      index.set(ids[i]!, i);
    }
    this.weights = weights;
    this.slice = candidates;
    this.sliceLength = n;
    this.ids = ids;
    this.weighted = weighted;
    this.cursor = 0;
    this.last = -1;
    if (weighted) {
      this.startRotation(index, old, wasWeighted);
      return;
    }
    if (last < 0 || last >= old.length || wasWeighted) {
      if (this.rng !== undefined && n > 0) this.cursor = this.rng.below(n);
      return;
    }
    const served = index.get(old[last]!);
    if (served !== undefined) {
      this.cursor = served + 1;
      this.last = served;
      return;
    }
    for (let k = 1; k < old.length; k++) {
      const next = index.get(old[(last + k) % old.length]!);
      if (next !== undefined) {
        this.cursor = next;
        // Position (not service) marker: its predecessor, so a second change before any pick continues from here.
        this.last = next === 0 ? candidates.length - 1 : next - 1;
        return;
      }
    }
  }

  /** A weighted rotation over the adopted slice: survivors of a weighted one keep when they are due; a fresh one starts at the offset. */
  private startRotation(index: Map<string, number>, old: readonly string[], carry: boolean): void {
    const n = this.sliceLength;
    if (this.dueIn.length < n) this.dueIn = new Float64Array(this.weights.length);
    const dueIn = this.dueIn;
    dueIn.fill(-1, 0, n);
    if (carry) {
      for (let j = 0; j < old.length; j++) {
        const i = index.get(old[j]!);
        if (i !== undefined) dueIn[i] = this.edf.dueIn(j);
      }
    }
    this.edf.reset(this.weights, n, dueIn);
    if (!carry && this.rng !== undefined) for (let k = this.rng.below(n); k > 0; k--) this.edf.next();
  }

  /** The next eligible index of the rotation; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    if (candidates !== this.slice || candidates.length !== this.sliceLength) this.prepare(candidates);
    const n = candidates.length;
    if (n === 0) throwEmpty();
    if (this.weighted) {
      // An ineligible member (standalone callers) sits out its turn.
      for (let tried = 0; tried < n; tried++) {
        const i = this.edf.next();
        if (candidates[i]!.isEligible()) return i;
      }
      for (let i = 0; i < n; i++) if (candidates[i]!.isEligible()) return i;
      throwNoEligible(n);
    }
    let i = this.cursor >= n ? 0 : this.cursor;
    for (let tried = 0; tried < n; tried++) {
      if (candidates[i]!.isEligible()) {
        this.cursor = i + 1;
        this.last = i;
        return i;
      }
      i = i + 1 === n ? 0 : i + 1;
    }
    throwNoEligible(n);
  }
}
