/**
 * RoundRobin: a cursor over the slice, one step per pick, O(1).
 *
 * When the runtime hands over a different slice (membership or health
 * changed), the cursor continues after the last member served, found by
 * identity: if that member is still present the next pick is its successor in
 * the new slice; if it left, the next pick is the first member that followed
 * it in the old slice and is still present. So a shrinking or growing slice
 * neither skips a surviving member nor serves the last one twice in a row.
 * That lookup builds an id → index map once per slice change, never per pick.
 *
 * Weights are ignored (use {@link SmoothWeightedRoundRobin} for weights). An
 * ineligible member (standalone callers only) is stepped over.
 */
import type { Candidate } from '../core/candidate.js';
import { throwEmpty, throwNoEligible } from './slice.js';
import type { Policy, SeedOptions } from './types.js';
import { checkOptionKeys } from '../core/errors.js';

/**
 * Round robin.
 *
 * @example
 * const rr = new RoundRobin();
 * rr.pick(backends); // 0, then 1, 2, ..., n − 1, 0, ...
 */
export class RoundRobin implements Policy {
  private slice: readonly Candidate[] | undefined;
  private sliceLength = -1;
  private cursor = 0;
  /** Index in `slice` of the member served last, -1 before the first pick. */
  private last = -1;
  /** Ids of the prepared slice (robust to a caller mutating the array in place). */
  private ids: string[] = [];

  /** RoundRobin is deterministic; options are accepted for a uniform interface (`seed` is unused). */
  constructor(options: SeedOptions = {}) {
    checkOptionKeys(options, ['seed']);
  }

  /** Adopts `candidates` as the current slice, moving the cursor after the last-served member. */
  prepare(candidates: readonly Candidate[]): void {
    const old = this.ids;
    const last = this.last;
    const index = new Map<string, number>();
    const ids = new Array<string>(candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      ids[i] = candidates[i]!.id;
      index.set(ids[i]!, i);
    }
    this.slice = candidates;
    this.sliceLength = candidates.length;
    this.ids = ids;
    this.cursor = 0;
    this.last = -1;
    if (last < 0 || last >= old.length) return;
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

  /** The next eligible index in cyclic order; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[]): number {
    if (candidates !== this.slice || candidates.length !== this.sliceLength) this.prepare(candidates);
    const n = candidates.length;
    if (n === 0) throwEmpty();
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
