/**
 * GenerationRows: one row of 64-bit counters (./counter64.ts) per LoadTable
 * slot in shared memory, keyed by (slot, generation), so that a slot reused
 * by a new backend starts from zero and a reader asking for a backend that
 * no longer (or not yet) owns the row reads nothing. HttpCounters is one
 * (src/http/counters.ts); any per-backend figure counted across threads can
 * be another.
 *
 * The row's first word names the generation whose counts it holds. Every
 * count is written while the writer holds a lease on (slot, generation),
 * and the owner reuses a slot only once its lease counts read zero, so by
 * the time a new generation exists, every write of the older ones has
 * happened. The first writer of a new generation takes the old counts out:
 * it reads them, moves the generation word from the old value to the new
 * one with a compare-and-swap, and, if it won, subtracts what it read. No
 * writer of the new generation can have added before the swap (they add
 * only once the word names their generation), so exactly the old counts
 * are removed, and writers never wait for one another.
 *
 * Row layout (words): 0 the generation of the counts (bit 30: being reset),
 * 1 reserved, then counter k at `2 + 2k, 3 + 2k` (low, high).
 */
import { add64, read64, sub64 } from './counter64.js';
import { invalidConfig } from './errors.js';

const HEAD = 2;
const BUSY = 1 << 30;
const GEN_MASK = BUSY - 1;

/** Counter rows keyed by (slot, generation) over part of an `Int32Array` (see the file comment). */
export class GenerationRows {
  /** Rows (slots). */
  readonly capacity: number;
  private readonly i32: Int32Array;
  private readonly base: number;
  private readonly rowWords: number;
  private readonly counters: number;
  /** The reset's snapshot of the old counts, reused: a reset runs start to end in one thread. */
  private readonly old: Float64Array;

  /**
   * Rows `0 .. capacity − 1` of `rowWords` words each, the first at word
   * `base` of `i32`, each with `counters` counters (`2 + 2 × counters <=
   * rowWords`). The words start at zero (a fresh SharedArrayBuffer).
   */
  constructor(i32: Int32Array, base: number, capacity: number, rowWords: number, counters: number) {
    if (HEAD + 2 * counters > rowWords)
      invalidConfig('rowWords', `must hold ${HEAD + 2 * counters} words (${counters} counters)`, rowWords);
    this.i32 = i32;
    this.base = base;
    this.capacity = capacity;
    this.rowWords = rowWords;
    this.counters = counters;
    this.old = new Float64Array(counters);
  }

  // --- writers (a thread holding a lease on (slot, generation)) -------------

  /** The row of (slot, generation) to add to, an older generation's counts taken out first; -1 out of range. */
  writable(slot: number, generation: number): number {
    if (slot < 0 || slot >= this.capacity) return -1;
    const row = this.base + slot * this.rowWords;
    const gen = generation & GEN_MASK;
    // SC load: pairs with the compare-and-swap in reset(), so a writer that
    // sees its generation here adds after the reset took the old counts out.
    const held = Atomics.load(this.i32, row);
    if (held !== gen && held !== (gen | BUSY)) this.reset(row, held, gen);
    return row;
  }

  /** Adds `n` (an integer in [0, 2^32)) to counter `k` of `row` (from {@link writable}). */
  add(row: number, k: number, n: number): void {
    add64(this.i32, row + HEAD + 2 * k, n);
  }

  /**
   * Takes an older generation's counts out of a row (see the file comment):
   * they are final (no lease of that generation is open), so they are read
   * first; the swap names the new generation, and only its winner subtracts.
   * Writers that see the new word meanwhile add at once: additions commute.
   */
  private reset(row: number, held: number, gen: number): void {
    const old = this.old;
    for (let k = 0; k < this.counters; k++) old[k] = read64(this.i32, row + HEAD + 2 * k);
    // Only one writer moves the word from `held`; a loser's snapshot is discarded.
    if (Atomics.compareExchange(this.i32, row, held, gen | BUSY) !== held) return;
    for (let k = 0; k < this.counters; k++) if (old[k]! > 0) sub64(this.i32, row + HEAD + 2 * k, old[k]!);
    // Readers skip a row marked BUSY; the store publishes the finished reset.
    Atomics.store(this.i32, row, gen);
  }

  // --- readers (any thread) -------------------------------------------------

  /**
   * The row holding (slot, generation)'s counts, or -1: out of range, still
   * holding an older generation's counts (nothing was counted for this one
   * yet), or being reset.
   */
  readable(slot: number, generation: number): number {
    if (slot < 0 || slot >= this.capacity) return -1;
    const row = this.base + slot * this.rowWords;
    // SC load: a row whose word names this generation (without BUSY) has had its reset finished.
    return Atomics.load(this.i32, row) === (generation & GEN_MASK) ? row : -1;
  }

  /** Counter `k` of `row` (from {@link readable}), read without a torn carry. */
  read(row: number, k: number): number {
    return read64(this.i32, row + HEAD + 2 * k);
  }
}
