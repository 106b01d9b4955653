/**
 * A small, fast, seedable 32-bit PRNG: xoshiro128** (Blackman & Vigna).
 *
 * Every stochastic policy owns one. Without a seed it reads 128 bits from the
 * OS (`crypto.getRandomValues`) once, at construction — off the hot path — so
 * two policies, two workers or two processes never share a keystream even
 * when the process was started with `--random-seed` (which pins
 * the built-in Math random function, never used here). With `{ seed }` the sequence replays
 * exactly, for tests and simulations.
 *
 * Why this matters: a tie-break or sample drawn from a shared constant seed
 * resolves identically on every worker after a synchronised restart, which
 * is exactly the herding that per-worker randomness exists to prevent.
 */
import { webcrypto } from 'node:crypto';
import { invalidConfig } from './errors.js';

/** A replay seed: any safe integer, or a bigint (its low 64 bits are used). */
export type Seed = number | bigint;

const TWO_32 = 4294967296;
const TWO_53 = 9007199254740992;

/**
 * The rejection limit of a uniform draw in [0, n) from 32 random bits: the
 * largest multiple of n not above 2^32. A draw at or past it is redrawn (it
 * would favour small residues); below it, `r % n` is unbiased. For n ≤ 2^32.
 * Hot loops that must keep one `nextU32` call site cache this per n.
 * @internal
 */
export function rejectionLimit32(n: number): number {
  return TWO_32 - (TWO_32 % n);
}

/**
 * `r % n` for a uint32 `r` and 1 ≤ n ≤ 2^32, given `inv = 1 / n` (cache it
 * with the rejection limit): a multiply, a floor and one correction instead
 * of an integer division, which V8 emits for `%` by a variable (measured
 * ~5 ns of a ~12 ns draw on Node 20). Exact: r·inv is within 2^32·2^−51 < 1
 * of r / n, so the floor is the quotient or off by one, and the correction
 * puts the remainder back in [0, n); every product is an integer below 2^53.
 * @internal
 */
export function modRecip(r: number, n: number, inv: number): number {
  const m = r - Math.floor(r * inv) * n;
  return m >= n ? m - n : m < 0 ? m + n : m;
}

/** 128 bits from the OS random source, never all zero. @internal */
export function osSeedWords(): Uint32Array {
  const words = new Uint32Array(4);
  do webcrypto.getRandomValues(words);
  while ((words[0]! | words[1]! | words[2]! | words[3]!) === 0);
  return words;
}

/** splitmix32 step: expands one seed word into well-mixed state words. */
function splitmix32(state: { x: number }): number {
  state.x = (state.x + 0x9e3779b9) | 0;
  let z = state.x;
  z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
  z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
  return (z ^ (z >>> 15)) >>> 0;
}

/** Expands a replay seed into four non-zero state words. @internal */
export function seedWords(seed: Seed): Uint32Array {
  let lo: number;
  let hi: number;
  if (typeof seed === 'bigint') {
    const v = BigInt.asUintN(64, seed);
    lo = Number(v & 0xffffffffn);
    hi = Number(v >> 32n);
  } else {
    if (!Number.isSafeInteger(seed)) invalidConfig('seed', 'must be a safe integer or a bigint', seed);
    const v = seed < 0 ? seed + TWO_53 : seed;
    lo = v % TWO_32;
    hi = Math.floor(v / TWO_32);
  }
  const state = { x: lo ^ Math.imul(hi, 0x85ebca6b) };
  const words = new Uint32Array(4);
  words[0] = splitmix32(state) ^ hi;
  words[1] = splitmix32(state);
  words[2] = splitmix32(state);
  words[3] = splitmix32(state);
  if ((words[0]! | words[1]! | words[2]! | words[3]!) === 0) words[0] = 1;
  return words;
}

/**
 * xoshiro128** over four 32-bit words. `nextU32`, `below` and `float` allocate
 * nothing.
 *
 * @example
 * const rng = new Rng();            // OS-seeded
 * const replay = new Rng(42);       // exact replay
 * const i = replay.below(10);       // uniform in [0, 10)
 */
export class Rng {
  /**
   * The 32 bits of the last {@link step}, as an unsigned integer in a typed
   * array cell. Hot paths call `step()` and read `word[0]` instead of taking
   * `nextU32()`'s return value (why: docs/internals.md, "Numbers that do not allocate").
   */
  readonly word = new Uint32Array(1);
  /** xoshiro128** state: four 32-bit words. */
  private readonly s = new Int32Array(4);

  /** OS-seeded unless `seed` is given. */
  constructor(seed?: Seed) {
    const w = seed === undefined ? osSeedWords() : seedWords(seed);
    this.s.set(w);
  }

  /** Advances the generator one step; the step's 32 bits are in {@link word}[0]. */
  step(): void {
    const s = this.s;
    const s0 = s[0]!;
    const s1 = s[1]!;
    this.word[0] = Math.imul(rotl(Math.imul(s1, 5), 7), 9);
    const t = s1 << 9;
    const s2 = s[2]! ^ s0;
    const s3 = s[3]! ^ s1;
    s[1] = s1 ^ s2;
    s[0] = s0 ^ s3;
    s[2] = s2 ^ t;
    s[3] = rotl(s3, 11);
  }

  /** The next 32 random bits as an unsigned integer (hot paths: {@link step} + {@link word}). */
  nextU32(): number {
    this.step();
    return this.word[0]!;
  }

  /**
   * A uniform integer in [0, n), without modulo bias (rejection of the short
   * last bucket). `n` must be a positive safe integer; up to 2^32 one word is
   * drawn, above it 53 bits.
   */
  below(n: number): number {
    if (n <= TWO_32) {
      // Draws at or past the limit would favour small residues, so they are redrawn (p < 1/2).
      const limit = rejectionLimit32(n);
      for (;;) {
        this.step();
        const r = this.word[0]!;
        if (r < limit) return r % n;
      }
    }
    const limit = TWO_53 - (TWO_53 % n);
    for (;;) {
      const r = this.next53();
      if (r < limit) return r % n;
    }
  }

  /** A uniform float in [0, 1) with 53 bits of resolution. */
  float(): number {
    return this.next53() / TWO_53;
  }

  /** A fair coin. */
  coin(): boolean {
    this.step();
    return this.word[0]! >= 0x80000000;
  }

  private next53(): number {
    this.step();
    const hi = this.word[0]! >>> 11;
    this.step();
    return hi * TWO_32 + this.word[0]!;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
