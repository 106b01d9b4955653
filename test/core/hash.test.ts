import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DEFAULT_HASH_SEED, hash32, hash53, hash64, mix53, toHashSeed, unitInterval } from '../../src/core/hash.js';

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
    expect(hash32(1234567)).toBe(hash32('1234567'));
  });

  it('derives hash32 and hash53 from the same 64 bits', () => {
    const seed = toHashSeed(DEFAULT_HASH_SEED);
    for (const key of ['a', 'b', 'user:1', 'ü']) {
      const h = hash64(key);
      expect(hash32(key, seed)).toBe(Number(h & 0xffffffffn));
      expect(hash53(key, seed)).toBe(Number(h >> 11n));
    }
  });

  it('depends on the seed', () => {
    expect(hash64('key', 1n)).not.toBe(hash64('key', 2n));
  });
});

describe('mix53 and unitInterval', () => {
  it('stay inside their ranges', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (a, b) => {
        const m = mix53(a, b);
        expect(Number.isSafeInteger(m) && m >= 0).toBe(true);
        const u = unitInterval(m);
        expect(u > 0 && u < 1).toBe(true);
      }),
    );
    expect(unitInterval(0)).toBeGreaterThan(0);
    expect(unitInterval(Number.MAX_SAFE_INTEGER)).toBeLessThan(1);
  });

  it('spreads: the top bit of mix53 over 20,000 inputs is set 50% ± 5σ', () => {
    // σ = sqrt(n·p·(1−p)) = sqrt(20000·0.25) ≈ 70.7; band ±5σ ≈ ±354.
    let set = 0;
    for (let i = 0; i < 20000; i++) if (mix53(i, 12345) >= 2 ** 52) set++;
    expect(Math.abs(set - 10000)).toBeLessThan(354);
  });
});
