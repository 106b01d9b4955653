/**
 * Helpers shared by the keyed policies (Rendezvous, Maglev): hash-seed option
 * validation and key hashing.
 *
 * Keyed policies hash with {@link DEFAULT_HASH_SEED} unless told otherwise, on
 * purpose: every worker, process and restart that uses the same seed maps a
 * key to the same backend. (Stochastic policies never use that constant.)
 */
import type { Candidate } from '../core/candidate.js';
import { invalidConfig } from '../core/errors.js';
import { DEFAULT_HASH_SEED, hash53Halves, murmur3Key32, toHashSeed, type HashSeed } from '../core/hash.js';
import { RoundRobin } from './round-robin.js';
import { throwEmpty, throwNoEligible } from './slice.js';
import type { PickContext, Policy, SeedOptions } from './types.js';

/** Options of the keyed policies. `seed` is accepted for a uniform interface and unused: they draw no randomness. */
export interface KeyedOptions extends SeedOptions {
  /** The 64-bit hash seed; default {@link DEFAULT_HASH_SEED}. Instances agree on keys only with equal seeds. */
  hashSeed?: bigint;
}

/** Validates `options.hashSeed` (a bigint, or a safe integer) and prepares it. @internal */
export function resolveHashSeed(value: unknown): HashSeed {
  if (value === undefined) return toHashSeed(DEFAULT_HASH_SEED);
  if (typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value))) return toHashSeed(value);
  return invalidConfig('options.hashSeed', 'must be a bigint or a safe integer', value);
}

/**
 * The 53-bit hash of a pick's key (core/hash.ts `hash53`) split into two int32
 * halves in `into` (`hash53Halves`: nothing boxed on the pick path);
 * `InvalidConfig` unless the key is a string or a finite number. @internal
 */
export function keyHashHalves(key: unknown, seed: HashSeed, into: Int32Array): void {
  if (typeof key === 'string' || (typeof key === 'number' && Number.isFinite(key))) {
    hash53Halves(key, seed, into);
    return;
  }
  invalidConfig('context.key', 'must be a string or a finite number', key);
}

/** The 32-bit per-pick key hash (`murmur3Key`) as an int32; `InvalidConfig` unless the key is a string or a finite number. @internal */
export function keyHash32(key: unknown, seed32: number): number {
  if (typeof key === 'string' || (typeof key === 'number' && Number.isFinite(key))) return murmur3Key32(key, seed32);
  return invalidConfig('context.key', 'must be a string or a finite number', key);
}

/** Options of the bounded-load forms of the keyed policies (Maglev, RingHash). */
export interface BoundedLoadOptions {
  /**
   * Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam
   * 2018; HAProxy `hash-balance-factor`, Envoy `hash_balance_factor`): a key
   * goes to its successor unless that member's `load()` would pass
   * ⌈c × (total + 1) / eligible⌉ — the average including the pick being
   * placed — then to the next member along the table or ring. A number
   * c > 1 (1.25 allows 25 % above the average); default: unbounded.
   */
  balanceFactor?: number;
  /**
   * Σ `load()` over the members, read in O(1): the runtime passes
   * `LoadTable.totalOutstanding()` (per-thread row totals, no backend scan).
   * Default: summed over the slice on every bounded pick (O(n); standalone use).
   */
  totalLoad?: () => number;
}

/** The option keys of {@link BoundedLoadOptions}. @internal */
export const BOUNDED_KEYS = ['balanceFactor', 'totalLoad'] as const;

/**
 * The walk shared by Maglev and RingHash: from a start position along a
 * circular array of member indices (Maglev's table, the ring's points), the
 * first member that is eligible and — when bounded — under capacity. A
 * per-pick stamp marks members already looked at, so the walk reads each
 * member's load once and stops after every eligible member was seen.
 * Allocation-free after prepare. @internal
 */
export class Successors {
  /** c, or 0 when unbounded. */
  readonly factor: number;
  private readonly totalLoad: (() => number) | undefined;
  private stamp = new Int32Array(0);
  private epoch = 0;
  private eligibleCount = 0;

  constructor(options: BoundedLoadOptions) {
    const { balanceFactor, totalLoad } = options;
    if (balanceFactor !== undefined && (typeof balanceFactor !== 'number' || !(balanceFactor > 1) || !Number.isFinite(balanceFactor))) {
      invalidConfig('options.balanceFactor', 'must be a finite number > 1', balanceFactor);
    }
    if (totalLoad !== undefined && typeof totalLoad !== 'function') invalidConfig('options.totalLoad', 'must be a function', totalLoad);
    this.factor = balanceFactor ?? 0;
    this.totalLoad = totalLoad;
  }

  /** Sizes the stamp and counts the eligible members (the average's denominator). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    if (this.stamp.length < n) this.stamp = new Int32Array(n);
    let e = 0;
    for (let i = 0; i < n; i++) if (candidates[i]!.isEligible()) e++;
    this.eligibleCount = e;
  }

  /** ⌈c × (total + 1) / eligible⌉: the most load a member may reach by taking this pick. */
  capacity(candidates: readonly Candidate[]): number {
    let total: number;
    if (this.totalLoad !== undefined) total = this.totalLoad();
    else {
      total = 0;
      for (let i = 0; i < candidates.length; i++) if (candidates[i]!.isEligible()) total += candidates[i]!.load();
    }
    return Math.ceil((this.factor * (total + 1)) / Math.max(1, this.eligibleCount));
  }

  /**
   * The first acceptable member at or after position `start` of a circular
   * list of `length` positions whose member index at position p is
   * `owners[p * stride + stride - 1]` (Maglev's table: stride 1; the ring's
   * interleaved point/owner pairs: stride 2).
   * Unbounded: the first eligible one. Bounded: the first eligible one whose
   * load is below capacity; if none is (loads moved under the walk), the
   * first eligible one. Throws `NoEligibleCandidates` when no member is.
   */
  pick(candidates: readonly Candidate[], owners: Int32Array, stride: number, length: number, start: number): number {
    const first = owners[start * stride + stride - 1]!;
    const c = candidates[first]!;
    if (this.factor === 0) {
      if (c.isEligible()) return first;
    } else if (c.isEligible() && c.load() + 1 <= this.capacity(candidates)) return first;
    return this.walk(candidates, owners, stride, length, start);
  }

  private walk(candidates: readonly Candidate[], owners: Int32Array, stride: number, length: number, start: number): number {
    const bounded = this.factor > 0;
    const cap = bounded ? this.capacity(candidates) : 0;
    if (++this.epoch === 0x7fffffff) {
      this.stamp.fill(0);
      this.epoch = 1;
    }
    const epoch = this.epoch;
    const stamp = this.stamp;
    const n = candidates.length;
    let fallback = -1;
    let seen = 0;
    let distinct = 0;
    for (let p = 0, at = start; p < length; p++, at = at + 1 === length ? 0 : at + 1) {
      const i = owners[at * stride + stride - 1]!;
      if (stamp[i] === epoch) continue;
      stamp[i] = epoch;
      distinct++;
      const cand = candidates[i]!;
      if (cand.isEligible()) {
        if (!bounded || cand.load() + 1 <= cap) return i;
        if (fallback < 0) fallback = i;
        if (++seen >= this.eligibleCount) break;
      }
      if (distinct === n) break;
    }
    if (fallback >= 0) return fallback;
    return throwNoEligible(n);
  }
}

/**
 * The common body of the keyed policies (Rendezvous, Maglev, RingHash): the
 * slice their tables were prepared for, and the pick prelude — re-prepare
 * when handed another array (or another length), `Empty` for none, and the
 * key, or undefined when there is none (then {@link fallback} picks).
 */
export abstract class KeyedSlicePolicy implements Policy {
  /** Picks for a context without a key. */
  protected readonly fallback = new RoundRobin();
  /** The array the tables were prepared for, and its length then. */
  protected slice: readonly Candidate[] | undefined;
  protected sliceLength = -1;

  /** Builds the tables for `candidates` (and records them as {@link slice}). */
  abstract prepare(candidates: readonly Candidate[]): void;
  /** An index into `candidates` for `context.key`. */
  abstract pick(candidates: readonly Candidate[], context?: PickContext): number;

  /** The pick prelude: prepares for a new slice, throws `Empty` for none, returns the key (undefined: use the fallback). */
  protected keyOf(candidates: readonly Candidate[], context: PickContext | undefined): PickContext['key'] {
    if (candidates !== this.slice || candidates.length !== this.sliceLength) this.prepare(candidates);
    if (candidates.length === 0) throwEmpty();
    return context?.key;
  }
}
