/**
 * The false-sharing audit of the LoadTable, computed from src/load/layout.ts:
 * no 64-byte cache line may hold words that two different threads write on
 * the hot path (acquire, release, an admission wait), nor one thread's own
 * words and a word every thread writes. Words every thread writes (a slot's
 * lease counts) are shared by nature; a thread's own words (its row's totals,
 * cells and admission line) must sit on lines of their own.
 *
 * Where the buffer starts: a SharedArrayBuffer's backing store comes from
 * malloc, which promises 16 bytes of alignment, not 64. On Linux, Node 20,
 * `%DebugPrint` showed stores at 0 mod 64 (small), 48 mod 64 and — every
 * table with a spec blob, over glibc's mmap threshold — 16 mod 64 (an mmap'd
 * chunk's header). So the audit runs at every start offset a 16-byte-aligned
 * buffer can have: 0, 16, 32 and 48 bytes into a line.
 */
import { describe, expect, it } from 'vitest';
import {
  A_GENERATION,
  A_ROW_COUNTED,
  A_ROW_OLDEST,
  A_TICKETS,
  A_WAITERS,
  ADMISSION_BANDS,
  H_CHANGE_EPOCH,
  H_HEALTH_EPOCH,
  KINDS,
  Layout,
  RETRY_WORDS,
  SLOT_WORDS,
} from '../../src/load/layout.js';

const LINE_WORDS = 16;
/** A word every thread may write on the hot path. */
const SHARED = -1;

/** Slot words a thread other than the owner writes: tag/leases/PeakEWMA/failures, share refusals, health counters, picks, the mean, ORCA reports. */
const HOT_SLOT_WORDS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 18, 20, 21, 22, 26, 27, 32, 33, 34, 35, 36, 37];

/** word → writer (a row, or SHARED) of every word some thread writes on the hot path; cold words are absent. */
function hotWriters(l: Layout): Map<number, number> {
  const w = new Map<number, number>();
  for (let h = H_CHANGE_EPOCH; h <= H_HEALTH_EPOCH; h++) w.set(h, SHARED);
  w.set(A_WAITERS, SHARED);
  w.set(A_GENERATION, SHARED);
  for (let b = 0; b < ADMISSION_BANDS; b++) w.set(A_TICKETS + b, SHARED);
  for (let k = 0; k < RETRY_WORDS; k++) w.set(l.retryBase + k, SHARED);
  for (let s = 0; s < l.capacity; s++) for (const k of HOT_SLOT_WORDS) w.set(l.slot(s) + k, SHARED);
  for (let r = 0; r < l.maxThreads; r++) {
    for (let k = 0; k < KINDS; k++) w.set(l.total(r, k), r);
    for (let s = 0; s < l.capacity; s++) for (let k = 0; k < KINDS; k++) w.set(l.cell(r, s, k), r);
    for (let b = 0; b < ADMISSION_BANDS; b++) w.set(l.admissionRow(r) + A_ROW_OLDEST + b, r);
    w.set(l.admissionRow(r) + A_ROW_COUNTED, r);
  }
  return w;
}

/** The lines (at start offset `shiftWords`) where two writers meet, described (at most 3); empty when none. */
function conflicts(writers: Map<number, number>, shiftWords: number): string[] {
  const line = new Map<number, number>();
  const out: string[] = [];
  const name = (w: number): string => (w === SHARED ? 'shared' : `row ${w}`);
  for (const [word, writer] of writers) {
    const at = Math.floor((word + shiftWords) / LINE_WORDS);
    const seen = line.get(at);
    if (seen === undefined) line.set(at, writer);
    else if (seen !== writer && out.length < 3) out.push(`line ${at}: ${name(seen)} and ${name(writer)} (word ${word})`);
  }
  return out;
}

const CAPACITIES = [1, 2, 3, 7, 8, 9, 16, 63, 64, 65, 100, 1000];
const THREADS = [1, 2, 3, 8, 17, 64];

describe('LoadTable false sharing (static audit of layout.ts)', () => {
  it("no 64-byte line holds two threads' hot words, at any 16-byte-aligned start of the buffer", () => {
    const bad: string[] = [];
    for (const capacity of CAPACITIES)
      for (const threads of THREADS)
        for (const unaligned of [false, true])
          for (const shift of [0, 4, 8, 12]) {
            const found = conflicts(hotWriters(Layout.plan(capacity, threads, 4096, unaligned)), shift);
            if (found.length > 0)
              bad.push(
                `capacity ${capacity}, ${threads} threads, ${unaligned ? 'unaligned' : 'padded'}, +${shift * 4} bytes: ${found.join('; ')}`,
              );
          }
    expect(bad.slice(0, 5)).toEqual([]);
  });

  it('a padded layout starts every slot on a line of a 64-byte-aligned buffer (what `unaligned` takes away)', () => {
    for (const capacity of CAPACITIES)
      for (const threads of THREADS) {
        expect(Layout.plan(capacity, threads, 4096, false).slot(0) % LINE_WORDS).toBe(0);
        expect(Layout.plan(capacity, threads, 4096, true).slot(0) % LINE_WORDS).not.toBe(0);
      }
    expect(SLOT_WORDS % LINE_WORDS).toBe(0);
  });

  it('the audit finds two writers on a line (the check can fail), also when only a shifted start puts them there', () => {
    // Two rows packed into one line.
    expect(
      conflicts(
        new Map([
          [0, 0],
          [1, 0],
          [2, 1],
          [3, 1],
        ]),
        0,
      ),
    ).not.toEqual([]);
    // Rows a line apart, but the first one's words fill 9 of its 16: fine at a 64-byte-aligned start, not at +32 bytes.
    const rows = new Map<number, number>();
    for (let w = 0; w < 9; w++) rows.set(w, 0);
    for (let w = 16; w < 25; w++) rows.set(w, 1);
    expect(conflicts(rows, 0)).toEqual([]);
    expect(conflicts(rows, 8)[0]).toBe('line 1: row 0 and row 1 (word 16)');
  });
});
