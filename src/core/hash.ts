/**
 * A stable, seeded 64-bit hash for keyed policies (Rendezvous, Maglev).
 *
 * FNV-1a 64 over the key's UTF-8 bytes, starting from the offset basis XOR
 * the seed, finished with the splitmix64 mixer — the construction Sōzu uses.
 * It is pure integer arithmetic on 32-bit halves (Math.imul and exact double
 * products below 2^53), so it gives the same value on every machine and Node
 * version. Numbers are hashed as their decimal string: `5` and `"5"` agree.
 *
 * Keyed policies share {@link DEFAULT_HASH_SEED} fleet-wide on purpose: that
 * is what makes every worker, process and restart agree on where a key lands.
 * Stochastic policies never use it as an RNG seed.
 */

/** The fleet-wide default hash seed (the 64-bit golden ratio), shared on purpose. */
export const DEFAULT_HASH_SEED = 0x9e3779b97f4a7c15n;

const TWO_32 = 4294967296;
const FNV_BASIS_HI = 0xcbf29ce4;
const FNV_BASIS_LO = 0x84222325;

/** A 64-bit hash seed split into 32-bit halves, prepared once. */
export interface HashSeed {
  readonly hi: number;
  readonly lo: number;
}

/** Splits a bigint (or safe integer) seed into halves. @internal */
export function toHashSeed(seed: bigint | number | HashSeed = DEFAULT_HASH_SEED): HashSeed {
  if (typeof seed === 'object') return seed;
  const v = BigInt.asUintN(64, BigInt(seed));
  return { hi: Number(v >> 32n), lo: Number(v & 0xffffffffn) };
}

const DEFAULT_SEED = toHashSeed(DEFAULT_HASH_SEED);

/**
 * The 64-bit state and output of the allocation-free entry points, [hi, lo].
 * Operands travel through it rather than as arguments (why: docs/internals.md, "Numbers that do not allocate").
 */
const out = new Uint32Array(2);

/**
 * `out` × (bhi:blo) mod 2^64, in place. The low product is done in 16-bit
 * limbs so every intermediate stays an exact double below 2^53.
 */
function mul64(bhi: number, blo: number): void {
  const ahi = out[0]!;
  const alo = out[1]!;
  const a0 = alo & 0xffff;
  const a1 = alo >>> 16;
  const b0 = blo & 0xffff;
  const b1 = blo >>> 16;
  const mid = a0 * b1 + a1 * b0;
  // mid < 2^33: `& 0xffff` keeps its low 16 bits exactly (ToInt32 is modular) without a double fmod.
  const low = a0 * b0 + (mid & 0xffff) * 65536;
  const hiPart = a1 * b1 + Math.floor(mid / 65536) + Math.floor(low / TWO_32);
  out[0] = hiPart + Math.imul(alo, bhi) + Math.imul(ahi, blo);
  out[1] = low;
}

/** The splitmix64 finaliser applied to `out`, in place. */
function mix(): void {
  let hi = out[0]!;
  let lo = out[1]!;
  // z ^= z >>> 30; z *= 0xbf58476d1ce4e5b9
  out[1] = lo ^ ((lo >>> 30) | (hi << 2));
  out[0] = hi ^ (hi >>> 30);
  mul64(0xbf58476d, 0x1ce4e5b9);
  hi = out[0]!;
  lo = out[1]!;
  // z ^= z >>> 27; z *= 0x94d049bb133111eb
  out[1] = lo ^ ((lo >>> 27) | (hi << 5));
  out[0] = hi ^ (hi >>> 27);
  mul64(0x94d049bb, 0x133111eb);
  hi = out[0]!;
  lo = out[1]!;
  // z ^= z >>> 31
  out[1] = lo ^ ((lo >>> 31) | (hi << 1));
  out[0] = hi ^ (hi >>> 31);
}

/**
 * Hashes `key` into `out` (hi, lo). Allocates nothing for string keys.
 *
 * FNV-1a 64 step: h ^= byte; h ×= 0x100000001b3 (mod 2^64). Since
 * 0x100000001b3 = 0x1b3 + 2^40, the 2^40 term only adds lo << 8 to hi; the
 * carry of lo × 0x1b3 into hi comes from 16-bit halves (ph·2^16 + pl), so
 * every operation is int32 arithmetic (`| 0` and Math.imul reduce mod 2^32).
 */
function hashInto(key: string | number, seed: HashSeed): void {
  const s = typeof key === 'string' ? key : String(key);
  let hi = (FNV_BASIS_HI ^ seed.hi) | 0;
  let lo = (FNV_BASIS_LO ^ seed.lo) | 0;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    // Encode UTF-8 on the fly into up to four bytes, first byte in the low bits of `bytes`.
    let bytes: number;
    let count: number;
    if (c < 0x80) {
      // ASCII fast path: one step, all in int32 arithmetic.
      lo ^= c;
      const pl = (lo & 0xffff) * 0x1b3;
      const ph = (lo >>> 16) * 0x1b3;
      hi = (Math.imul(hi, 0x1b3) + ((ph + (pl >>> 16)) >>> 16) + (lo << 8)) | 0;
      lo = Math.imul(lo, 0x1b3);
      continue;
    } else {
      if (c >= 0xd800 && c <= 0xdfff) {
        // A surrogate pair is one code point; a lone surrogate becomes U+FFFD as in TextEncoder.
        c = surrogatePoint(c, i + 1 < s.length ? s.charCodeAt(i + 1) : 0);
        if (c >= 0x10000) i++;
      }
      if (c < 0x800) {
        bytes = 0xc0 | (c >> 6) | ((0x80 | (c & 0x3f)) << 8);
        count = 2;
      } else if (c < 0x10000) {
        bytes = 0xe0 | (c >> 12) | ((0x80 | ((c >> 6) & 0x3f)) << 8) | ((0x80 | (c & 0x3f)) << 16);
        count = 3;
      } else {
        bytes = 0xf0 | (c >> 18) | ((0x80 | ((c >> 12) & 0x3f)) << 8) | ((0x80 | ((c >> 6) & 0x3f)) << 16) | ((0x80 | (c & 0x3f)) << 24);
        count = 4;
      }
    }
    for (let k = 0; k < count; k++) {
      lo ^= (bytes >>> (k << 3)) & 0xff;
      const pl = (lo & 0xffff) * 0x1b3;
      const ph = (lo >>> 16) * 0x1b3;
      hi = (Math.imul(hi, 0x1b3) + ((ph + (pl >>> 16)) >>> 16) + (lo << 8)) | 0;
      lo = Math.imul(lo, 0x1b3);
    }
  }
  out[0] = hi;
  out[1] = lo;
  mix();
}

/** The 64-bit hash of `key` as a bigint (convenient for tests and tools; allocates). @internal */
export function hash64(key: string | number, seed: bigint | number | HashSeed = DEFAULT_SEED): bigint {
  hashInto(key, toHashSeed(seed));
  return (BigInt(out[0]!) << 32n) | BigInt(out[1]!);
}

/** The top 53 bits (h >> 11) of the 64-bit hash of `key`, as a safe integer. Allocation-free. @internal */
export function hash53(key: string | number, seed: HashSeed = DEFAULT_SEED): number {
  hashInto(key, seed);
  return out[0]! * 2097152 + (out[1]! >>> 11);
}

/**
 * {@link hash53} of `key` split at bit 32, written into `into` as two int32s
 * (`into[0]` = the top 21 bits, `into[1]` = the low 32, signed): the same
 * value with no double in between. A 53-bit return value is a heap number
 * whenever V8 does not inline the call (Node 26: 16 bytes per Rendezvous
 * pick); docs/internals.md, "No boxed numbers on the hot path".
 * Allocation-free. @internal
 */
export function hash53Halves(key: string | number, seed: HashSeed, into: Int32Array): void {
  hashInto(key, seed);
  const hi = out[0]!;
  into[0] = hi >>> 11;
  into[1] = ((hi & 0x7ff) << 21) | (out[1]! >>> 11);
}

/**
 * Mixes two 53-bit values (say a key hash and a backend hash) into a fresh
 * 53-bit value with the splitmix64 finaliser. Allocation-free.
 * @internal
 */
export function mix53(a: number, b: number): number {
  const ahi = Math.floor(a / TWO_32);
  const alo = a >>> 0;
  const bhi = Math.floor(b / TWO_32);
  const blo = b >>> 0;
  out[0] = ahi ^ Math.imul(bhi, 0x9e3779b9) ^ 0x7f4a7c15;
  out[1] = alo ^ blo;
  mix();
  return out[0]! * 2097152 + (out[1]! >>> 11);
}

/**
 * MurmurHash3 (x86, 32-bit) of `key`'s UTF-16LE bytes with a 32-bit seed:
 * the keyed policies' per-pick key hash. It reads two UTF-16 units per
 * 32-bit block straight from `charCodeAt` (no UTF-8 encoding, no 64-bit
 * arithmetic), so a 16-character key costs 8 multiply-rotate rounds and
 * the finaliser; allocation-free. Numbers are hashed as their decimal
 * string: `5` and `"5"` agree. Part of the keyed contract: the same key and
 * seed give the same value on every machine, process and Node version.
 * @internal
 */
export function murmur3Key(key: string | number, seed32: number): number {
  return murmur3Key32(key, seed32) >>> 0;
}

/**
 * {@link murmur3Key} as an int32 (the same 32 bits, signed), for the per-pick
 * path: an int32 return value is a small integer, while an unsigned value
 * above 2^31 − 1 is allocated as a heap number whenever V8 does not inline the
 * call (seen as 8 bytes per Maglev pick in some runs: half the keys hash above
 * 2^31). docs/internals.md, "No boxed numbers on the hot path".
 * @internal
 */
export function murmur3Key32(key: string | number, seed32: number): number {
  const s = typeof key === 'string' ? key : String(key);
  const n = s.length;
  let h = seed32 | 0;
  let i = 0;
  for (; i + 1 < n; i += 2) {
    let k = s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  if (i < n) {
    let k = s.charCodeAt(i);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
  }
  h ^= n << 1; // the length in bytes
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** The 32-bit seed of {@link murmur3Key} derived from a 64-bit hash seed (its halves XORed). @internal */
export function seed32Of(seed: HashSeed): number {
  return (seed.hi ^ seed.lo) | 0;
}

/**
 * The code point of a UTF-16 surrogate `c` followed by the unit `next`: the
 * pair's code point (at least 0x10000: the caller then skips `next`), or
 * U+FFFD for a lone surrogate, as TextEncoder writes it. @internal
 */
export function surrogatePoint(c: number, next: number): number {
  return c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff ? 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00) : 0xfffd;
}
