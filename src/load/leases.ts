/**
 * Lease counts: how many leases of each kind every slot holds, over all
 * threads — the load every policy compares — and the per-thread records that
 * make those counts exact when a thread dies.
 *
 * **Why a read costs the same with 1 thread or 64.** A slot's count of a kind
 * is one shared word (the design before this one summed one cell per thread
 * row on every read: 364 ns per least-loaded pick with 1 thread attached,
 * 3,048 ns with 32). Policies read it with a plain (non-Atomics) load: an
 * aligned Int32 element of a shared array is tear-free in the ECMAScript
 * memory model, only unordered — it may show a count a few nanoseconds old.
 * That is harmless to a comparison between backends (power of two choices
 * degrades gracefully with stale loads, docs/benchmarks.md "balls into
 * bins"), and nothing that must never be exceeded reads it that way:
 * `maxInflight` is checked on the value the lease's own `Atomics.add`
 * returns (of two threads racing for the last unit, the later add sees
 * both), and the slot-reuse handshake reads the word with an SC load after
 * an SC tag store (slot-tags.ts). A full scan — least-loaded, rendezvous,
 * metrics — is O(backends).
 *
 * **The slot word.** Bits 0–19: the count (leases held now, all threads);
 * bits 20–31: a sequence that every lease operation advances (wrapping).
 * One `Atomics.add` moves both: `+1 + 2^20` takes a lease, `−1 + 2^20`
 * returns one. The sequence lets the owner tell that no operation touched
 * the word between two of its reads (below).
 *
 * **Exact when a thread dies.** A worker can be terminated between any two
 * operations — even two `Atomics` calls in one function, with no call or loop
 * edge between them (measured: a loop of paired adds, terminated 300 times
 * at random moments, was left with the pair apart 37 times). So each thread
 * also keeps its own record, one cell per (slot, kind) in its row, written
 * only by itself: bits 0–29 the leases it holds there, bit 30 PENDING. An
 * operation is (1) the cell's new count with PENDING, a plain store; (2) the
 * slot word's `Atomics.add`; (3) the new count without PENDING, an SC store.
 * The row's total (its leases of the kind over all slots) moves with them,
 * plainly, before (2) on a take and after it on a return.
 *
 * When a thread has exited, the owner reclaims its row (`reclaim`): a cell
 * without PENDING is exactly what the thread holds on that slot, and is
 * subtracted from the slot word. A cell with PENDING — the thread died inside
 * (1)–(3) — is ambiguous by one: did (2) happen? The owner then counts the
 * slot's other rows in a double collect: read the slot word, every other
 * row's cell, the slot word again; if the word (count and sequence) did not
 * move and no other cell was PENDING, no operation ran in between, so at the
 * first read the slot's count was exactly the other rows' cells plus the dead
 * row's true contribution — which is their difference. (1) is published by
 * the SC add in (2), and (3) is itself SC, so a cell read without PENDING is
 * ordered after its thread's last add.) The counts are then exactly the
 * leases of the living threads.
 *
 * Pool-wide totals are a sum over rows in use (at most `maxThreads` loads,
 * never a scan of the backends). Admission reads them on its own path; a
 * bounded-load hash reads them on every pick through {@link PoolTotal},
 * which sums the rows once per 64 reads and adds its own row's changes
 * since, so its cost does not grow with the threads either.
 */
import { PoiseError } from '../core/errors.js';
import { H_ROWS, KINDS, S_LEASES, S_PICKS, SLOT_WORDS, TOTAL_WORDS, type Layout } from './layout.js';
import { spinPause } from '../core/pause.js';

/** The count field of a slot word. */
export const COUNT_MASK = (1 << 20) - 1;
/** One step of a slot word's sequence field. */
const SEQ_ONE = 1 << 20;
/** A cell's PENDING bit: its thread is between its cell and its slot-word update. */
const PENDING = 1 << 30;
const CELL_COUNT = PENDING - 1;
/** Double-collect attempts before the owner settles an ambiguous cell without one (then it logs). */
const COLLECT_ATTEMPTS = 10_000;

/** Lease kinds: which counter a lease holds. */
export const LeaseKind = { Request: 0, Connection: 1 } as const;
/** A lease kind code. */
export type LeaseKindCode = (typeof LeaseKind)[keyof typeof LeaseKind];

/** The lease counters, row cells, row totals and row owners of one table. */
export class Leases {
  private readonly i32: Int32Array;
  private readonly layout: Layout;
  private readonly slotBase: number;
  private readonly cellsBase: number;
  private readonly cellStride: number;
  private readonly totalsBase: number;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
    this.slotBase = layout.slotBase;
    this.cellsBase = layout.cellsBase;
    this.cellStride = layout.cellStride;
    this.totalsBase = layout.totalsBase;
  }

  // --- the hot path (the caller's own row) -------------------------------------

  /**
   * Takes one lease of `kind` on `slot` for row `row` (the caller's own);
   * returns the slot's count of that kind including it — the value a
   * `maxInflight` check compares, exact against concurrent takers.
   */
  up(slot: number, kind: number, row: number): number {
    const i = this.i32;
    const s = this.slotBase + slot * SLOT_WORDS + S_LEASES + kind;
    const c = this.cellsBase + row * this.cellStride + slot * KINDS + kind;
    const t = this.totalsBase + row * TOTAL_WORDS + kind;
    // This row's words have one writer, this thread: plain reads see its own stores.
    const v = i[c]! + 1;
    // The total first: a gauge summing rows never reads less than a lease
    // granted (the add below orders this store before the lease exists).
    i[t] = i[t]! + 1;
    // (1) intent, plain: the SC add publishes it to whoever reads the add.
    i[c] = v | PENDING;
    // (2) every thread adds here and none may be lost; SC also orders this
    // lease before the caller's SC load of the slot's tag.
    const n = (Atomics.add(i, s, SEQ_ONE + 1) + 1) & COUNT_MASK;
    // (3) done, SC: a reader that sees it sees the add.
    Atomics.store(i, c, v);
    return n;
  }

  /** Returns one lease of `kind` on `slot` held by row `row` (the caller's own). */
  down(slot: number, kind: number, row: number): void {
    const i = this.i32;
    const s = this.slotBase + slot * SLOT_WORDS + S_LEASES + kind;
    const c = this.cellsBase + row * this.cellStride + slot * KINDS + kind;
    const t = this.totalsBase + row * TOTAL_WORDS + kind;
    // A cell never goes below zero: a lease is returned by the thread that took it.
    const v = i[c]! - 1;
    i[c] = v | PENDING;
    // Count −1, sequence +1.
    Atomics.add(i, s, SEQ_ONE - 1);
    Atomics.store(i, c, v);
    // The total last: never below the leases still held.
    i[t] = i[t]! - 1;
  }

  /** Adds `n` granted leases to the slot's pick counter (routers batch them; statistics). */
  countPicks(slot: number, n: number): void {
    // add: concurrent batches on one slot are never lost.
    Atomics.add(this.i32, this.slotBase + slot * SLOT_WORDS + S_PICKS, n);
  }

  // --- reads -----------------------------------------------------------------------

  /** Leases of `kind` on `slot`, all threads: one SC load. */
  count(slot: number, kind: number): number {
    return Atomics.load(this.i32, this.slotBase + slot * SLOT_WORDS + S_LEASES + kind) & COUNT_MASK;
  }

  /** Both kinds on `slot`. */
  outstanding(slot: number): number {
    const o = this.slotBase + slot * SLOT_WORDS + S_LEASES;
    return (Atomics.load(this.i32, o) & COUNT_MASK) + (Atomics.load(this.i32, o + 1) & COUNT_MASK);
  }

  /** Leases granted on `slot` (wraps at 2^32). */
  picks(slot: number): number {
    return Atomics.load(this.i32, this.slotBase + slot * SLOT_WORDS + S_PICKS) >>> 0;
  }

  /** Leases of `kind` that row `row` holds on `slot` (its cell). */
  rowLeases(row: number, slot: number, kind: number): number {
    return Atomics.load(this.i32, this.layout.cell(row, slot, kind)) & CELL_COUNT;
  }

  /** Leases of `kind` on all slots, all threads: a sum over the rows in use (SC loads). */
  total(kind: number): number {
    const i = this.i32;
    const rows = Atomics.load(i, H_ROWS);
    let n = 0;
    for (let r = 0; r < rows; r++) n += Atomics.load(i, this.totalsBase + r * TOTAL_WORDS + kind);
    return n;
  }

  /** Both kinds on all slots. */
  totalOutstanding(): number {
    const i = this.i32;
    const rows = Atomics.load(i, H_ROWS);
    let n = 0;
    for (let r = 0; r < rows; r++) {
      const p = this.totalsBase + r * TOTAL_WORDS;
      n += Atomics.load(i, p) + Atomics.load(i, p + 1);
    }
    return n;
  }

  /** Rows in use (one more than the highest row ever claimed). */
  rowsInUse(): number {
    return Atomics.load(this.i32, H_ROWS);
  }

  // --- rows ----------------------------------------------------------------------------

  /**
   * Claims (or finds) the attribution row of thread `threadId`, lowest free
   * first; throws `PoiseError` `CapacityExhausted` when all rows are taken.
   */
  claimRow(threadId: number): number {
    const i = this.i32;
    const me = threadId + 1;
    const owners = this.layout.ownerBase;
    const max = this.layout.maxThreads;
    for (let r = 0; r < max; r++) if (Atomics.load(i, owners + r) === me) return r;
    for (let r = 0; r < max; r++) {
      // CAS from 0: two threads racing for one free row cannot both win.
      if (Atomics.compareExchange(i, owners + r, 0, me) === 0) {
        // Raise rows-in-use to cover r before the caller can take a lease on
        // it (CAS loop: concurrent claims only ever raise it).
        for (;;) {
          const n = Atomics.load(i, H_ROWS);
          if (n > r || Atomics.compareExchange(i, H_ROWS, n, r + 1) === n) break;
          spinPause();
        }
        return r;
      }
    }
    throw new PoiseError('CapacityExhausted', `LoadTable: all ${max} thread rows are taken (raise options.maxThreads)`, {
      field: 'options.maxThreads',
    });
  }

  /** The row claimed by `threadId`, or -1. */
  rowOf(threadId: number): number {
    const owners = this.layout.ownerBase;
    for (let r = 0; r < this.layout.maxThreads; r++) if (Atomics.load(this.i32, owners + r) === threadId + 1) return r;
    return -1;
  }

  /**
   * Owner, after the thread of row `row` has exited: subtracts from every
   * slot word what the row held there (a PENDING cell settled by a double
   * collect, file comment), and zeroes its cells and totals. Returns the
   * leases reclaimed and how many cells were PENDING (`uncertain` counts
   * those the double collect could not settle within its attempts — then the
   * cell's pending operation is taken as done). The caller frees the row
   * afterwards ({@link freeRow}).
   */
  reclaim(row: number): { leases: number; pending: number; uncertain: number } {
    const i = this.i32;
    let leases = 0;
    let pending = 0;
    let uncertain = 0;
    const base = this.cellsBase + row * this.cellStride;
    for (let slot = 0; slot < this.layout.capacity; slot++) {
      for (let k = 0; k < KINDS; k++) {
        const cell = base + slot * KINDS + k;
        const v = Atomics.load(i, cell);
        if (v === 0) continue;
        const word = this.slotBase + slot * SLOT_WORDS + S_LEASES + k;
        let held = v & CELL_COUNT;
        if ((v & PENDING) !== 0) {
          pending++;
          const settled = this.settle(row, slot, k);
          if (settled < 0) uncertain++;
          else held = settled;
        }
        Atomics.store(i, cell, 0);
        // sub on the count field only: the living rows' counts are never below zero, so nothing borrows.
        if (held !== 0) Atomics.sub(i, word, held);
        leases += held;
      }
    }
    for (let k = 0; k < KINDS; k++) Atomics.store(i, this.totalsBase + row * TOTAL_WORDS + k, 0);
    return { leases, pending, uncertain };
  }

  /**
   * The dead row's true contribution to slot `slot`'s count of kind `k`, by a
   * double collect over the other rows in use; -1 when the slot never stood
   * still within the attempts.
   */
  private settle(dead: number, slot: number, k: number): number {
    const i = this.i32;
    const word = this.slotBase + slot * SLOT_WORDS + S_LEASES + k;
    for (let attempt = 0; attempt < COLLECT_ATTEMPTS; attempt++) {
      const rows = Atomics.load(i, H_ROWS);
      const before = Atomics.load(i, word);
      let others = 0;
      let busy = false;
      for (let r = 0; r < rows; r++) {
        if (r === dead) continue;
        const v = Atomics.load(i, this.cellsBase + r * this.cellStride + slot * KINDS + k);
        if ((v & PENDING) !== 0) busy = true;
        others += v & CELL_COUNT;
      }
      if (!busy && Atomics.load(i, word) === before) return (before & COUNT_MASK) - others;
      spinPause();
    }
    return -1;
  }

  /** Owner: frees row `row` for the next thread (after {@link reclaim}). */
  freeRow(row: number): void {
    // Last, once its cells are zero: a thread that claims it starts from nothing.
    Atomics.store(this.i32, this.layout.ownerBase + row, 0);
  }
}

/** Reads a PoolTotal refreshes after: one sum over the rows per this many reads. */
const POOL_TOTAL_REFRESH = 64;

/**
 * One router's per-pick view of the pool-wide outstanding count (what a
 * bounded-load hash compares against): the rows' totals summed once per
 * {@link POOL_TOTAL_REFRESH} reads, plus this row's own changes since the
 * sum. Exact for the calling thread's own leases at every read, and at most
 * 64 of its picks behind other threads' — the bound is "c × average" with
 * the average of a moving pool, not a count that must never be exceeded. The
 * amortised cost is one row total per read, whatever the number of threads.
 */
export class PoolTotal {
  private readonly leases: Leases;
  private readonly i32: Int32Array;
  private readonly own: number;
  private reads = 0;
  private sum = 0;
  private ownAtSum = 0;

  constructor(leases: Leases, i32: Int32Array, layout: Layout, row: number) {
    this.leases = leases;
    this.i32 = i32;
    this.own = layout.total(row, 0);
  }

  /** Connection plus request leases on all slots, all threads (see the class comment). */
  read(): number {
    // This row's words are written by this thread only: a plain read sees its own writes.
    const mine = this.i32[this.own]! + this.i32[this.own + 1]!;
    if (this.reads-- === 0) {
      this.reads = POOL_TOTAL_REFRESH - 1;
      this.sum = this.leases.totalOutstanding();
      this.ownAtSum = mine;
    }
    return this.sum + mine - this.ownAtSum;
  }
}
