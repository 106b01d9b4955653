/**
 * MD5 (RFC 1321) of a string's UTF-8 bytes, in pure TypeScript: what the
 * ketama ring needs to place its points exactly as libketama and the
 * memcached clients do. It is not used for security. Pure integer
 * arithmetic on a reused state, so it loads nothing (no `node:crypto`) and
 * keeps the root entry free of I/O modules; a 16-byte key costs one block.
 */

import { surrogatePoint } from './hash.js';

/** Per-round shift amounts. */
const S = Int32Array.from([
  7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11,
  16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
]);
/** K[i] = ⌊2^32 · |sin(i + 1)|⌋. */
const K = new Int32Array(64);
for (let i = 0; i < 64; i++) K[i] = Math.floor(Math.abs(Math.sin(i + 1)) * 4294967296) | 0;

/** The message, padded, as little-endian words (grown when a longer key comes). */
let words = new Int32Array(16);
/** The digest of the last call, four little-endian words. */
const digestWords = new Int32Array(4);

/** Writes the UTF-8 bytes of `s` into `words` with MD5 padding; returns the number of words used. */
function load(s: string): number {
  // Upper bound of UTF-8 bytes: 3 per UTF-16 unit.
  const maxBytes = s.length * 3;
  const need = (((maxBytes + 8) >>> 6) + 1) << 4;
  if (words.length < need) words = new Int32Array(need);
  else words.fill(0, 0, need);
  let n = 0;
  const put = (b: number): void => {
    words[n >>> 2]! |= b << ((n & 3) << 3);
    n++;
  };
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      words[n >>> 2]! |= c << ((n & 3) << 3);
      n++;
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      c = surrogatePoint(c, i + 1 < s.length ? s.charCodeAt(i + 1) : 0);
      if (c >= 0x10000) i++;
    }
    if (c < 0x800) {
      put(0xc0 | (c >> 6));
    } else if (c < 0x10000) {
      put(0xe0 | (c >> 12));
      put(0x80 | ((c >> 6) & 0x3f));
    } else {
      put(0xf0 | (c >> 18));
      put(0x80 | ((c >> 12) & 0x3f));
      put(0x80 | ((c >> 6) & 0x3f));
    }
    put(0x80 | (c & 0x3f));
  }
  const used = (((n + 8) >>> 6) + 1) << 4;
  words[n >>> 2]! |= 0x80 << ((n & 3) << 3);
  // Bit length, low word then high word (keys are far below 2^29 bytes).
  words[used - 2] = n << 3;
  words[used - 1] = n >>> 29;
  return used;
}

/** MD5 of `s` (UTF-8) into `digestWords`. */
function run(s: string): void {
  const used = load(s);
  let a0 = 0x67452301;
  let b0 = 0xefcdab89 | 0;
  let c0 = 0x98badcfe | 0;
  let d0 = 0x10325476;
  for (let off = 0; off < used; off += 16) {
    let a = a0;
    let b = b0;
    let c = c0;
    let d = d0;
    for (let i = 0; i < 64; i++) {
      let f: number;
      let g: number;
      if (i < 16) {
        f = (b & c) | (~b & d);
        g = i;
      } else if (i < 32) {
        f = (d & b) | (~d & c);
        g = (5 * i + 1) & 15;
      } else if (i < 48) {
        f = b ^ c ^ d;
        g = (3 * i + 5) & 15;
      } else {
        f = c ^ (b | ~d);
        g = (7 * i) & 15;
      }
      const t = d;
      d = c;
      c = b;
      const x = (a + f + K[i]! + words[off + g]!) | 0;
      const r = S[i]!;
      b = (b + ((x << r) | (x >>> (32 - r)))) | 0;
      a = t;
    }
    a0 = (a0 + a) | 0;
    b0 = (b0 + b) | 0;
    c0 = (c0 + c) | 0;
    d0 = (d0 + d) | 0;
  }
  digestWords[0] = a0;
  digestWords[1] = b0;
  digestWords[2] = c0;
  digestWords[3] = d0;
}

/**
 * Word `w` (0..3) of the MD5 digest of `s`, read little-endian: digest
 * bytes 4w..4w+3 as `b[4w] | b[4w+1] << 8 | ...`, unsigned — exactly the
 * 32-bit points libketama takes from a digest. Computes the digest when `w`
 * is 0 and reads the same digest for 1..3 (call them in order, one string).
 * @internal
 */
export function md5Word(s: string, w: number): number {
  return md5Word32(s, w) >>> 0;
}

/**
 * {@link md5Word} as an int32 (the same 32 bits, signed): what the per-pick
 * path uses, because an int32 is returned as a small integer while an
 * unsigned word above 2^31 − 1 is a heap number whenever the call is not
 * inlined (docs/internals.md, "No boxed numbers on the hot path").
 * @internal
 */
export function md5Word32(s: string, w: number): number {
  if (w === 0) run(s);
  return digestWords[w & 3]!;
}

/** The MD5 digest of `s` (UTF-8) as 32 lowercase hex digits. Allocates; for tests and tools. @internal */
export function md5Hex(s: string): string {
  run(s);
  let out = '';
  for (let w = 0; w < 4; w++) {
    const v = digestWords[w]!;
    for (let b = 0; b < 4; b++) out += ((v >>> (b << 3)) & 0xff).toString(16).padStart(2, '0');
  }
  return out;
}
