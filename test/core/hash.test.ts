import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DEFAULT_HASH_SEED, hash53, hash64, mix53, murmur3Key, seed32Of, toHashSeed } from '../../src/core/hash.js';
import { md5Hex, md5Word } from '../../src/core/md5.js';
import { createHash } from 'node:crypto';

const MASK = (1n << 64n) - 1n;

/** Reference: FNV-1a 64 (basis XOR seed) + splitmix64 finaliser, in BigInt. */
function reference(key: string, seed: bigint): bigint {
  let h = (0xcbf29ce484222325n ^ seed) & MASK;
  for (const byte of new TextEncoder().encode(key)) {
    h ^= BigInt(byte);
    h = (h * 0x100000001b3n) & MASK;
  }
  h ^= h >> 30n;
  h = (h * 0xbf58476d1ce4e5b9n) & MASK;
  h ^= h >> 27n;
  h = (h * 0x94d049bb133111ebn) & MASK;
  h ^= h >> 31n;
  return h;
}

describe('hash64', () => {
  it('equals the BigInt reference for any string and seed (UTF-8, surrogates included)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.bigInt({ min: 0n, max: MASK }), (key, seed) => {
        expect(hash64(key, seed)).toBe(reference(key, seed));
      }),
      { numRuns: 2000 },
    );
  });

  it('is pinned: these values must never change across machines or versions', () => {
    // Changing them moves every key of every Rendezvous/Maglev deployment.
    expect(hash64('', DEFAULT_HASH_SEED)).toBe(reference('', DEFAULT_HASH_SEED));
    expect(hash64('backend-1').toString(16)).toBe(reference('backend-1', DEFAULT_HASH_SEED).toString(16));
    expect(hash64('user:42').toString(16)).toMatchInlineSnapshot(`"7ef6b93e047cc136"`);
  });

  it('hashes numbers as their decimal string', () => {
    expect(hash64(5)).toBe(hash64('5'));
  });

  it('derives hash53 from the same 64 bits', () => {
    const seed = toHashSeed(DEFAULT_HASH_SEED);
    for (const key of ['a', 'b', 'user:1', 'ü']) {
      const h = hash64(key);
      expect(hash53(key, seed)).toBe(Number(h >> 11n));
    }
  });

  it('depends on the seed', () => {
    expect(hash64('key', 1n)).not.toBe(hash64('key', 2n));
  });
});

describe('mix53', () => {
  it('stays inside its range', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (a, b) => {
        const m = mix53(a, b);
        expect(Number.isSafeInteger(m) && m >= 0).toBe(true);
      }),
    );
  });

  it('spreads: the top bit of mix53 over 20,000 inputs is set 50% ± 5σ', () => {
    // σ = sqrt(n·p·(1−p)) = sqrt(20000·0.25) ≈ 70.7; band ±5σ ≈ ±354.
    let set = 0;
    for (let i = 0; i < 20000; i++) if (mix53(i, 12345) >= 2 ** 52) set++;
    expect(Math.abs(set - 10000)).toBeLessThan(354);
  });
});

/** Reference: MurmurHash3_x86_32 over a byte array (Appleby's SMHasher algorithm, byte-wise). */
function murmurBytes(bytes: Uint8Array, seed: number): number {
  const rotl = (x: number, r: number): number => (x << r) | (x >>> (32 - r));
  let h = seed | 0;
  const blocks = bytes.length >>> 2;
  for (let b = 0; b < blocks; b++) {
    let k = bytes[4 * b]! | (bytes[4 * b + 1]! << 8) | (bytes[4 * b + 2]! << 16) | (bytes[4 * b + 3]! << 24);
    k = Math.imul(rotl(Math.imul(k, 0xcc9e2d51), 15), 0x1b873593);
    h = (Math.imul(rotl(h ^ k, 13), 5) + 0xe6546b64) | 0;
  }
  const tail = blocks * 4;
  const rest = bytes.length & 3;
  if (rest > 0) {
    let k = bytes[tail]!;
    if (rest > 1) k ^= bytes[tail + 1]! << 8;
    if (rest > 2) k ^= bytes[tail + 2]! << 16;
    h ^= Math.imul(rotl(Math.imul(k, 0xcc9e2d51), 15), 0x1b873593);
  }
  h ^= bytes.length;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function utf16le(s: string): Uint8Array {
  const out = new Uint8Array(s.length * 2);
  for (let i = 0; i < s.length; i++) {
    out[2 * i] = s.charCodeAt(i) & 0xff;
    out[2 * i + 1] = s.charCodeAt(i) >>> 8;
  }
  return out;
}

describe('murmur3Key (the per-pick key hash of Maglev and RingHash)', () => {
  it('the byte reference reproduces the published MurmurHash3_x86_32 vectors', () => {
    const ascii = (s: string): Uint8Array => new TextEncoder().encode(s);
    expect(murmurBytes(ascii(''), 0)).toBe(0);
    expect(murmurBytes(ascii(''), 1)).toBe(0x514e28b7);
    expect(murmurBytes(ascii(''), 0xffffffff)).toBe(0x81f16f39);
    expect(murmurBytes(ascii('test'), 0)).toBe(0xba6bd213);
    expect(murmurBytes(ascii('Hello, world!'), 0)).toBe(0xc0363e43);
    expect(murmurBytes(ascii('The quick brown fox jumps over the lazy dog'), 0)).toBe(0x2e4ff723);
  });

  it("is MurmurHash3_x86_32 of the key's UTF-16LE bytes, for every string and seed", () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), (s, seed) => {
        expect(murmur3Key(s, seed)).toBe(murmurBytes(utf16le(s), seed));
      }),
      { numRuns: 2000 },
    );
  });

  it('pins the default-seed values (a change here remaps every Maglev and ring-hash key: say so in CHANGELOG.md)', () => {
    const seed = seed32Of(toHashSeed(DEFAULT_HASH_SEED));
    expect(seed).toBe((0x9e3779b9 ^ 0x7f4a7c15) | 0);
    expect(['', 'a', 'session-00000042', 'user:42'].map((k) => murmur3Key(k, seed))).toEqual(
      ['', 'a', 'session-00000042', 'user:42'].map((k) => murmurBytes(utf16le(k), seed)),
    );
    expect(murmur3Key(5, seed)).toBe(murmur3Key('5', seed));
  });
});

describe('md5 (ketama points)', () => {
  it('equals node:crypto md5 of the UTF-8 bytes, lone surrogates as U+FFFD, across block boundaries', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 150 }), (s) => {
        expect(md5Hex(s)).toBe(
          createHash('md5')
            .update(Buffer.from(new TextEncoder().encode(s)))
            .digest('hex'),
        );
      }),
      { numRuns: 1000 },
    );
    for (const len of [55, 56, 63, 64, 65, 119, 120])
      expect(md5Hex('x'.repeat(len))).toBe(createHash('md5').update('x'.repeat(len)).digest('hex'));
  });

  it("md5Word gives the digest's little-endian words, as libketama reads its four points", () => {
    const d = createHash('md5').update('10.0.0.1:11211-0').digest();
    const words = [0, 1, 2, 3].map((w) => md5Word('10.0.0.1:11211-0', w));
    expect(words).toEqual([0, 1, 2, 3].map((w) => d.readUInt32LE(4 * w)));
  });
});
