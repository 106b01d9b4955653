/**
 * RingHash: ketama consistent hashing (libketama, the memcached clients,
 * npm `hashring`), with Envoy's ring-size bounds and optional bounded loads.
 *
 * The ring (built when a slice is prepared, never in a pick):
 * - member i of n with weight wᵢ (Σw = W) gets g = ⌊wᵢ/W × 40 × n⌋ groups;
 *   group k is the MD5 of `"<id>-<k>"`, and each 16-byte digest gives 4
 *   points, its little-endian 32-bit words — 160 points per member at equal
 *   weights, exactly libketama's continuum when the ids are the servers'
 *   `host:port` strings. The fraction is computed in doubles, as `hashring`
 *   does; libketama's C uses floats, which differ where the product lands
 *   on an integer: 7 equal members get 39 groups each here and in
 *   `hashring` (1/7 × 40 × 7 = 39.99… in doubles), 40 in libketama.
 * - Envoy's bounds: when the ring would have fewer than `minimumRingSize`
 *   points (default 1024) every member's group count is multiplied by the
 *   smallest integer that reaches it — the first groups are still ketama's,
 *   so the ring is a superset; above `maximumRingSize` (default and limit
 *   8,388,608) the counts are scaled down, keeping at least one group per
 *   member of nonzero share.
 * - Points sort ascending (a tie goes to the smaller id); a key goes to the
 *   first point at or after its hash, wrapping to the first point.
 *
 * The key's position: `keyHash: 'murmur3'` (the default) is the fleet-wide
 * 32-bit MurmurHash3 of the key's UTF-16 units (`murmur3Key`, the one
 * Maglev uses); `keyHash: 'md5'` is ketama's own (the first digest word of
 * the key's MD5), for the same key→server map as a memcached client — about
 * four times the cost per pick. Lookup is O(1): a bucket index over the top
 * bits of the position narrows the search to about one point, so a pick
 * costs the same at 3 members or 3,000.
 *
 * An ineligible owner (health moved and no new slice was prepared) passes
 * its keys to the next points' owners without a rebuild. With
 * `balanceFactor` the successor also has to be under ⌈c × (total + 1) / n⌉
 * ({@link BoundedLoadOptions}, `ring-hash:bounded` in the runtime).
 *
 * Without `context.key` it falls back to round robin, as Sōzu does.
 */
import type { Candidate } from '../core/candidate.js';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { seed32Of } from '../core/hash.js';
import { md5Word, md5Word32 } from '../core/md5.js';
import { integerIn } from '../core/validate.js';
import { checkedAdd, validateWeight } from '../core/weight.js';
import {
  BOUNDED_KEYS,
  keyHash32,
  resolveHashSeed,
  Successors,
  KeyedSlicePolicy,
  type BoundedLoadOptions,
  type KeyedOptions,
} from './keyed.js';
import type { PickContext } from './types.js';

/** Envoy's default `minimum_ring_size`. */
export const RING_HASH_DEFAULT_MIN_SIZE = 1024;
/** Envoy's default and largest `maximum_ring_size` (8M points). */
export const RING_HASH_MAX_SIZE = 8388608;
/** libketama's groups per member at equal weight (4 points each). */
const KETAMA_GROUPS = 40;
/**
 * At most 2^16 buckets (256 KiB, inside L2): past 65,536 points a bucket
 * holds a few points, scanned in one or two cache lines of the ring, which
 * costs less than a bucket table too big for the cache.
 */
const BUCKET_BITS_MAX = 16;
/** Flips the sign bit so unsigned 32-bit order becomes int32 order. */
const FLIP = 0x80000000 | 0;

/** Options of {@link RingHash}. */
export interface RingHashOptions extends KeyedOptions, BoundedLoadOptions {
  /** Fewest points on the ring, an integer in [1, 8388608]; default 1024 (Envoy's). */
  minimumRingSize?: number;
  /** Most points on the ring, an integer in [minimumRingSize, 8388608]; default 8388608 (Envoy's). */
  maximumRingSize?: number;
  /** How a key finds its place: `'murmur3'` (default, fast) or `'md5'` (ketama's own, for memcached-client agreement). */
  keyHash?: 'murmur3' | 'md5';
}

/**
 * Ketama ring hashing.
 *
 * @example
 * const ring = new RingHash({ keyHash: 'md5', minimumRingSize: 1 }); // libketama's map exactly
 * const i = ring.pick([new Backend('10.0.0.1:11211'), new Backend('10.0.0.2:11211')], { key: 'user:42' });
 */
export class RingHash extends KeyedSlicePolicy {
  /** Fewest points. */
  readonly minimumRingSize: number;
  /** Most points. */
  readonly maximumRingSize: number;
  private readonly md5: boolean;
  private readonly seed32: number;
  private readonly successors: Successors;
  /**
   * The ring as interleaved pairs, one cache line for both: `ring[2j]` the
   * j-th point in ascending order, sign-flipped (int32 order = unsigned
   * order), `ring[2j + 1]` its member index.
   */
  private ring = new Int32Array(0);
  /** bucket[k]: the first point whose position >= k << shift; bucket[B] = size. */
  private bucket = new Int32Array(1);
  private shift = 31;
  private size = 0;

  /** Throws `InvalidConfig` naming the option for a bad ring size, `keyHash`, `hashSeed` or `balanceFactor`. */
  constructor(options: RingHashOptions = {}) {
    super();
    checkOptionKeys(options, ['hashSeed', 'seed', 'minimumRingSize', 'maximumRingSize', 'keyHash', ...BOUNDED_KEYS]);
    this.minimumRingSize = integerIn(
      options.minimumRingSize ?? RING_HASH_DEFAULT_MIN_SIZE,
      'options.minimumRingSize',
      1,
      RING_HASH_MAX_SIZE,
    );
    this.maximumRingSize = integerIn(
      options.maximumRingSize ?? RING_HASH_MAX_SIZE,
      'options.maximumRingSize',
      this.minimumRingSize,
      RING_HASH_MAX_SIZE,
    );
    const keyHash = options.keyHash ?? 'murmur3';
    if (keyHash !== 'murmur3' && keyHash !== 'md5') invalidConfig('options.keyHash', 'must be "murmur3" or "md5"', keyHash);
    this.md5 = keyHash === 'md5';
    this.seed32 = seed32Of(resolveHashSeed(options.hashSeed));
    this.successors = new Successors(options);
  }

  /** Points on the ring built for the last prepared slice. */
  get ringSize(): number {
    return this.size;
  }

  /** Builds the ring for `candidates` (throws `InvalidWeight` / `WeightOverflow`; the old ring stays then). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    let total = 0;
    for (let i = 0; i < n; i++) total = checkedAdd(total, validateWeight(candidates[i]!.weight, `candidates[${i}].weight`));
    const groups = new Float64Array(n);
    let sum = 0;
    for (let i = 0; i < n; i++) {
      groups[i] = Math.floor((candidates[i]!.weight / total) * KETAMA_GROUPS * n);
      sum += groups[i]!;
    }
    let points = sum * 4;
    if (points > 0 && points < this.minimumRingSize) {
      const factor = Math.ceil(this.minimumRingSize / points);
      for (let i = 0; i < n; i++) groups[i]! *= factor;
      points *= factor;
    }
    if (points > this.maximumRingSize) {
      const scale = this.maximumRingSize / points;
      points = 0;
      for (let i = 0; i < n; i++) {
        if (groups[i]! > 0) groups[i] = Math.max(1, Math.floor(groups[i]! * scale));
        points += groups[i]! * 4;
      }
      // The floor of one group per member can overshoot by a little: trim the largest.
      while (points > this.maximumRingSize) {
        let big = 0;
        for (let i = 1; i < n; i++) if (groups[i]! > groups[big]!) big = i;
        groups[big]!--;
        points -= 4;
      }
    }
    // Members in id order, so ties and the ring are the same however the slice is ordered.
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => compareIds(candidates[a]!.id, candidates[b]!.id));
    const rank = new Int32Array(n);
    for (let r = 0; r < n; r++) rank[order[r]!] = r;
    // point × 2^21 + rank < 2^53: one native numeric sort orders by point, then id.
    const packed = new Float64Array(points);
    let at = 0;
    for (const i of order) {
      const id = candidates[i]!.id;
      for (let k = 0; k < groups[i]!; k++) {
        const name = `${id}-${k}`;
        for (let w = 0; w < 4; w++) packed[at++] = md5Word(name, w) * 2097152 + rank[i]!;
      }
    }
    packed.sort();
    const ring = new Int32Array(points * 2);
    for (let j = 0; j < points; j++) {
      const v = packed[j]!;
      const r = v % 2097152;
      ring[2 * j] = ((v - r) / 2097152) ^ FLIP;
      ring[2 * j + 1] = order[r]!;
    }
    // Bucket index: about one point per bucket, 2^8 .. 2^16 buckets.
    const bits = Math.min(BUCKET_BITS_MAX, Math.max(8, Math.ceil(Math.log2(Math.max(1, points)))));
    const shift = 32 - bits;
    const buckets = 1 << bits;
    const bucket = new Int32Array(buckets + 1);
    let j = 0;
    for (let k = 0; k < buckets; k++) {
      // First point whose unsigned position >= k << shift.
      const lo = ((k << shift) | 0) ^ FLIP;
      while (j < points && ring[2 * j]! < lo) j++;
      bucket[k] = j;
    }
    bucket[buckets] = points;
    this.ring = ring;
    this.bucket = bucket;
    this.shift = shift;
    this.size = points;
    this.successors.prepare(candidates);
    this.slice = candidates;
    this.sliceLength = n;
  }

  /** The ring successor of `context.key` (past ineligible or, when bounded, full owners); `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[], context?: PickContext): number {
    const key = this.keyOf(candidates, context);
    if (key === undefined) return this.fallback.pick(candidates);
    if (this.size === 0) return this.fallback.pick(candidates);
    const h = this.md5 ? md5Key(key) : keyHash32(key, this.seed32);
    const start = this.find(h);
    return this.successors.pick(candidates, this.ring, 2, this.size, start);
  }

  /** Index of the first point at or after unsigned position `h` (an int32), wrapping to 0. */
  private find(h: number): number {
    const b = h >>> this.shift;
    const flipped = h ^ FLIP;
    const ring = this.ring;
    let j = this.bucket[b]!;
    const end = this.bucket[b + 1]!;
    while (j < end && ring[2 * j]! < flipped) j++;
    return j === this.size ? 0 : j;
  }
}

/** ketama's key position: the first little-endian word of the key's MD5, as an int32. */
function md5Key(key: unknown): number {
  if (typeof key === 'string') return md5Word32(key, 0);
  if (typeof key === 'number' && Number.isFinite(key)) return md5Word32(String(key), 0);
  return invalidConfig('context.key', 'must be a string or a finite number', key);
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
