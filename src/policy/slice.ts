/**
 * Helpers shared by the single-tier policies: the two "nothing to choose"
 * errors and a retained scratch list of eligible indices for the slow path.
 *
 * The runtime hands policies slices whose members are all eligible, so the
 * fast path of every policy checks only the member it chose. Standalone users
 * may pass ineligible members; then a policy falls back to a slower path that
 * collects the eligible indices into an {@link EligibleIndices} buffer kept
 * across picks (it grows on a bigger slice, never per pick).
 */
import type { Candidate } from '../core/candidate.js';
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { AliasTable } from './alias.js';
import type { Policy, SeedOptions } from './types.js';

/** Throws `Empty`. */
export function throwEmpty(): never {
  throw new PoiseError('Empty', 'pick: the candidate slice is empty');
}

/** Throws `NoEligibleCandidates` for a slice of `n` members. */
export function throwNoEligible(n: number): never {
  throw new PoiseError('NoEligibleCandidates', `pick: none of the ${n} candidates is eligible`);
}

/** A retained Int32Array of the eligible indices of a slice. */
export class EligibleIndices {
  private buf = new Int32Array(8);
  /** How many indices the last {@link collect} found. */
  count = 0;

  /** Grows the buffer to hold `n` indices (call it when a slice is prepared). */
  reserve(n: number): void {
    if (this.buf.length < n) this.buf = new Int32Array(Math.max(n, this.buf.length * 2));
  }

  /**
   * Collects the eligible indices of `candidates`; throws `Empty` or
   * `NoEligibleCandidates` when there are none. Returns the count.
   */
  collect(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    if (n === 0) throwEmpty();
    this.reserve(n);
    let count = 0;
    for (let i = 0; i < n; i++) if (candidates[i]!.isEligible()) this.buf[count++] = i;
    if (count === 0) throwNoEligible(n);
    this.count = count;
    return count;
  }

  /** The `k`-th collected index (0 <= k < count). */
  at(k: number): number {
    return this.buf[k]!;
  }
}

/**
 * The policy's own RNG from `{ seed }` options: OS-seeded without a seed.
 * Refuses unknown option keys (`options.sed: unknown option ...`).
 */
export function rngFromOptions(options: SeedOptions, extra: readonly string[] = []): Rng {
  if (typeof options !== 'object' || options === null) invalidConfig('options', 'must be an object', options);
  checkOptionKeys(options, ['seed', ...extra]);
  return new Rng(options.seed);
}

/**
 * The common body of the policies that draw among eligible indices with a
 * stream of their own (`Random`, `PowerOfTwo`): the seeded stream, the
 * retained eligible-index scratch, and `prepare`, which reserves it and
 * reads the weights: when they differ, an alias table draws by weight.
 */
export abstract class EligibleDraw implements Policy {
  /** This policy's own stream. */
  protected readonly rng: Rng;
  /** Scratch for the slow path (some candidate ineligible). */
  protected readonly eligible = new EligibleIndices();
  /** The slice adopted last (`prepare`), and its length then. */
  protected slice: readonly Candidate[] | undefined;
  protected n = -1;
  /** The adopted slice's weights differ: draw through the alias table. */
  protected weighted = false;
  /** The alias table of the adopted slice's weights. @internal */
  protected readonly alias = new AliasTable();

  /** OS-seeded unless `seed` is given (never seed it from a shared constant in production). */
  constructor(options: SeedOptions = {}) {
    this.rng = rngFromOptions(options);
  }

  /** Adopts a slice: reserves scratch and reads its weights (throws `InvalidWeight` / `WeightOverflow` for unequal bad weights). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    this.eligible.reserve(n);
    let weighted = false;
    for (let i = 1; i < n && !weighted; i++) weighted = candidates[i]!.weight !== candidates[0]!.weight;
    if (weighted) this.alias.build(candidates);
    this.weighted = weighted;
    this.n = n;
    this.slice = candidates;
  }

  /** An index into `candidates`. */
  abstract pick(candidates: readonly Candidate[]): number;
}
