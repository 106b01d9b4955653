/**
 * Rendezvous: weighted highest-random-weight (HRW) hashing.
 *
 * For a key k every member i gets the score `−wᵢ / ln(u)`, where
 * `u = unitInterval(mix53(hash(k), hash(idᵢ)))` lies strictly inside (0, 1);
 * the highest score wins (Schindelhauer & Schomaker's weighted HRW: member i
 * wins with probability wᵢ / Σw). The score depends only on the key, the
 * member's id and weight, and the hash seed — not on the slice's order or on
 * any other member — so:
 * - the same key lands on the same member in every instance, process and
 *   restart that uses the same seed ({@link DEFAULT_HASH_SEED} by default);
 * - removing a member moves only the keys it owned; adding one moves keys
 *   only to the new member. (An exact score tie, probability about 2^−52,
 *   goes to the larger member hash, still independent of order.)
 *
 * Cost: O(n) per pick — every member must be scored, which is inherent to
 * HRW — and allocation-free: member hashes and weights are computed when a
 * slice is prepared (a different array or length). With equal weights the
 * logarithm is skipped (the largest u wins, the same order). Ineligible
 * members are not scored, which is exactly "removal" for their keys.
 *
 * Without `context.key` it falls back to round robin, as Sōzu does.
 */
import type { Candidate } from '../core/candidate.js';
import type { HashSeed } from '../core/hash.js';
import { mix53, hash53, unitInterval } from '../core/hash.js';
import { validateWeight } from '../core/weight.js';
import { keyHash, resolveHashSeed, type KeyedOptions } from './keyed.js';
import { RoundRobin } from './round-robin.js';
import { throwEmpty, throwNoEligible } from './slice.js';
import type { PickContext, Policy } from './types.js';

/**
 * Weighted rendezvous (HRW) hashing.
 *
 * @example
 * const hrw = new Rendezvous();
 * const i = hrw.pick(backends, { key: 'user-42' }); // same index for 'user-42' everywhere
 */
export class Rendezvous implements Policy {
  private readonly seed: HashSeed;
  private readonly fallback = new RoundRobin();
  private slice: readonly Candidate[] | undefined;
  private sliceLength = -1;
  private hashes = new Float64Array(0);
  private weights = new Float64Array(0);
  private equalWeights = true;

  /** `hashSeed` defaults to {@link DEFAULT_HASH_SEED}; throws `InvalidConfig` for a bad one. */
  constructor(options: KeyedOptions = {}) {
    this.seed = resolveHashSeed(options.hashSeed);
  }

  /** Hashes the members' ids and reads their weights (throws `InvalidWeight`; the old state stays then). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    const hashes = new Float64Array(n);
    const weights = new Float64Array(n);
    let equal = true;
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      weights[i] = validateWeight(c.weight, `candidates[${i}].weight`);
      hashes[i] = hash53(c.id, this.seed);
      if (weights[i] !== weights[0]) equal = false;
    }
    this.hashes = hashes;
    this.weights = weights;
    this.equalWeights = equal;
    this.slice = candidates;
    this.sliceLength = n;
  }

  /** The eligible index with the highest score for `context.key`; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[], context?: PickContext): number {
    if (candidates !== this.slice || candidates.length !== this.sliceLength) this.prepare(candidates);
    const n = candidates.length;
    if (n === 0) throwEmpty();
    const key = context?.key;
    if (key === undefined) return this.fallback.pick(candidates);
    const kh = keyHash(key, this.seed);
    const hashes = this.hashes;
    let best = -1;
    let bestScore = 0;
    for (let i = 0; i < n; i++) {
      if (!candidates[i]!.isEligible()) continue;
      const u = unitInterval(mix53(kh, hashes[i]!));
      const score = this.equalWeights ? u : -this.weights[i]! / Math.log(u);
      if (best < 0 || score > bestScore || (score === bestScore && hashes[i]! > hashes[best]!)) {
        best = i;
        bestScore = score;
      }
    }
    if (best < 0) throwNoEligible(n);
    return best;
  }
}
