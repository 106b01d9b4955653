/**
 * 64-bit counters in shared memory, as two 32-bit words (low at `p`, high
 * at `p + 1`) of an `Int32Array` over a SharedArrayBuffer: the one
 * primitive ProxyCounters, HttpCounters and the generation-keyed row table
 * (./slot-rows.ts) count with. JavaScript has no 64-bit `Atomics.add` on
 * an Int32Array, and a BigInt64Array would allocate a BigInt per read; two
 * words and the rules below give exact counts without either.
 *
 * Why this is enough (written once, here):
 *
 * - **Writers.** `Atomics.add` (or `sub`) on the low word returns the old
 *   value, so exactly the one operation that crossed 2^32 (or went below 0)
 *   sees it, and it alone carries into (borrows from) the high word with a
 *   second `Atomics` operation. No carry is lost or doubled, whether one
 *   thread writes a pair or several do: additions commute, so once every
 *   operation is done the pair is exact.
 * - **Readers.** Between a writer's two operations the pair is a carry
 *   short (the low word wrapped, the high word not yet moved). A reader
 *   loads high, low, high again (SC loads, in that order) and retries while
 *   the high word moved, so it never returns a pair whose carry is half
 *   done — at worst it reads the value just before the carry's operation,
 *   which is a value the counter held.
 * - **Range.** One add is below 2^32; a pair reads as a double, exact below
 *   2^53, beyond any count this process makes.
 *
 * The functions allocate nothing: they are called on the proxy's and the
 * HTTP dispatcher's hot paths.
 */

/** 2^32. */
export const TWO_32 = 4294967296;

/** Adds `n` (an integer in [0, 2^32)) to the pair at `p` of `i32`. */
export function add64(i32: Int32Array, p: number, n: number): void {
  // The old low word tells whether this add crossed 2^32 (see the file comment).
  const before = Atomics.add(i32, p, n) >>> 0;
  if (before + n >= TWO_32) Atomics.add(i32, p + 1, 1);
}

/** Subtracts `v` (a count below 2^53, at most what the pair holds) from the pair at `p` of `i32`. */
export function sub64(i32: Int32Array, p: number, v: number): void {
  const lo = v % TWO_32;
  const hi = Math.floor(v / TWO_32);
  // As in add64: the subtraction that went below 0 borrows from the high word.
  const before = Atomics.sub(i32, p, lo | 0) >>> 0;
  if (before < lo) Atomics.sub(i32, p + 1, 1);
  if (hi > 0) Atomics.sub(i32, p + 1, hi | 0);
}

/** The pair at `p` of `i32`, read without a torn carry (see the file comment). */
export function read64(i32: Int32Array, p: number): number {
  for (;;) {
    const hi = Atomics.load(i32, p + 1);
    const lo = Atomics.load(i32, p) >>> 0;
    if (Atomics.load(i32, p + 1) === hi) return (hi >>> 0) * TWO_32 + lo;
  }
}
