/**
 * Rendezvous: weighted highest-random-weight (HRW) hashing.
 *
 * For a key k every member i gets the score `−wᵢ / ln(u)`, where `u` is a
 * hash of the pair (k, idᵢ) mapped strictly inside (0, 1); the highest score
 * wins (Schindelhauer & Schomaker's weighted HRW: member i wins with
 * probability wᵢ / Σw). The score depends only on the key, the member's id
 * and weight, and the hash seed — not on the slice's order or on any other
 * member — so:
 * - the same key lands on the same member in every instance, process and
 *   restart that uses the same seed ({@link DEFAULT_HASH_SEED} by default);
 * - removing a member moves only the keys it owned; adding one moves keys
 *   only to the new member. (An exact score tie, probability about 2^−52,
 *   goes to the larger member hash, still independent of order.)
 *
 * The pair hash: the key and every id are hashed once with the core's stable
 * 53-bit hash (ids when a slice is prepared); per member, their XOR (as two
 * 32-bit words) goes through a four-round Feistel network whose round
 * function is murmur3's fmix32 — a bijection of 64 bits — and the top 52 bits
 * of the result give `u = (x + ½) / 2^52`. It is integer arithmetic written
 * inline in the loop (no call that could box a double), so a pick allocates
 * nothing and costs a few nanoseconds per member. It is part of the
 * contract: changing it would remap keys.
 *
 * Cost: O(n) per pick — every member must be scored, which is inherent to
 * HRW. With equal weights the logarithm is skipped (the largest u wins, the
 * same order). Ineligible members are not scored, which is exactly
 * "removal" for their keys.
 *
 * Without `context.key` it falls back to round robin, as Sōzu does.
 */
import type { Candidate } from '../core/candidate.js';
import { hash53, type HashSeed } from '../core/hash.js';
import { validateWeight } from '../core/weight.js';
import { keyHashHalves, resolveHashSeed, KeyedSlicePolicy, type KeyedOptions } from './keyed.js';
import { throwNoEligible } from './slice.js';
import type { PickContext } from './types.js';
import { checkOptionKeys } from '../core/errors.js';

const TWO_32 = 4294967296;
const TWO_52 = 4503599627370496;

/**
 * Weighted rendezvous (HRW) hashing.
 *
 * @example
 * const hrw = new Rendezvous();
 * const i = hrw.pick(backends, { key: 'user-42' }); // same index for 'user-42' everywhere
 */
export class Rendezvous extends KeyedSlicePolicy {
  private readonly seed: HashSeed;
  /** The pick's key hash as two int32 halves (keyHashHalves): no 53-bit double crosses a call. */
  private readonly keyHalves = new Int32Array(2);
  private hashes = new Float64Array(0);
  private hashHi = new Int32Array(0);
  private hashLo = new Int32Array(0);
  private weights = new Float64Array(0);
  private equalWeights = true;

  /** `hashSeed` defaults to {@link DEFAULT_HASH_SEED}; throws `InvalidConfig` for a bad one. */
  constructor(options: KeyedOptions = {}) {
    super();
    // `seed` is accepted like every policy's, and means nothing here: keyed policies draw no random numbers.
    checkOptionKeys(options, ['hashSeed', 'seed']);
    this.seed = resolveHashSeed(options.hashSeed);
  }

  /** Hashes the members' ids and reads their weights (throws `InvalidWeight`; the old state stays then). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    const hashes = new Float64Array(n);
    const hashHi = new Int32Array(n);
    const hashLo = new Int32Array(n);
    const weights = new Float64Array(n);
    let equal = true;
    for (let i = 0; i < n; i++) {
      const c = candidates[i]!;
      weights[i] = validateWeight(c.weight, `candidates[${i}].weight`);
      const h = hash53(c.id, this.seed);
      hashes[i] = h;
      hashHi[i] = Math.floor(h / TWO_32);
      hashLo[i] = h % TWO_32;
      if (weights[i] !== weights[0]) equal = false;
    }
    this.hashes = hashes;
    this.hashHi = hashHi;
    this.hashLo = hashLo;
    this.weights = weights;
    this.equalWeights = equal;
    this.slice = candidates;
    this.sliceLength = n;
  }

  /** The eligible index with the highest score for `context.key`; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[], context?: PickContext): number {
    const key = this.keyOf(candidates, context);
    if (key === undefined) return this.fallback.pick(candidates);
    const n = candidates.length;
    keyHashHalves(key, this.seed, this.keyHalves);
    const kHi = this.keyHalves[0]!;
    const kLo = this.keyHalves[1]!;
    const { hashes, hashHi, hashLo, weights, equalWeights } = this;
    let best = -1;
    let bestScore = 0;
    for (let i = 0; i < n; i++) {
      if (!candidates[i]!.isEligible()) continue;
      // Four Feistel rounds, round function fmix32 (murmur3), over (key XOR member) as two words.
      let hi = kHi ^ hashHi[i]!;
      let lo = kLo ^ hashLo[i]!;
      let f = hi ^ 0x243f6a88;
      f = Math.imul(f ^ (f >>> 16), 0x85ebca6b);
      f = Math.imul(f ^ (f >>> 13), 0xc2b2ae35);
      lo ^= f ^ (f >>> 16);
      f = lo ^ 0x13198a2e;
      f = Math.imul(f ^ (f >>> 16), 0x85ebca6b);
      f = Math.imul(f ^ (f >>> 13), 0xc2b2ae35);
      hi ^= f ^ (f >>> 16);
      f = hi ^ 0x03707344;
      f = Math.imul(f ^ (f >>> 16), 0x85ebca6b);
      f = Math.imul(f ^ (f >>> 13), 0xc2b2ae35);
      lo ^= f ^ (f >>> 16);
      f = lo ^ 0x299f31d0;
      f = Math.imul(f ^ (f >>> 16), 0x85ebca6b);
      f = Math.imul(f ^ (f >>> 13), 0xc2b2ae35);
      hi ^= f ^ (f >>> 16);
      // Top 52 bits: all of hi, the top 20 of lo.
      const x = (hi >>> 0) * 1048576 + (lo >>> 12);
      const score = equalWeights ? x : -weights[i]! / Math.log((x + 0.5) / TWO_52);
      if (best < 0 || score > bestScore || (score === bestScore && hashes[i]! > hashes[best]!)) {
        best = i;
        bestScore = score;
      }
    }
    if (best < 0) throwNoEligible(n);
    return best;
  }
}
