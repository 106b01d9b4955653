/**
 * LeaseBook: a router's record of its open leases, so a release needs no
 * allocation and is exactly-once.
 *
 * A handle is a small integer (a V8 Smi, never boxed): entry index in the low
 * 20 bits, the entry's sequence number (10 bits) above. Closing an entry bumps
 * its sequence, so a second release of the same handle finds a different
 * sequence and does nothing. Freed entries are reused in FIFO order, so a
 * stale handle could only alias after its entry was reused 1024 times — and
 * the {@link Lease} object adds an absolute once-only flag on top.
 */
import { PoiseError } from '../core/errors.js';
import type { LeaseKindCode } from '../load/load-table.js';
import type { SlotCandidate } from './slot-candidate.js';

const INDEX_BITS = 20;
const INDEX_MASK = (1 << INDEX_BITS) - 1;
const SEQ_MASK = 0x3ff;
/** The most leases one router may hold open at once. */
export const MAX_OPEN_LEASES = 1 << INDEX_BITS;

/** Open leases of one router (single-threaded). */
export class LeaseBook {
  private cap = 0;
  /** The candidate each open entry leased (its slot and generation), undefined when closed. */
  private cand: (SlotCandidate | undefined)[] = [];
  private kind = new Uint8Array(0);
  private open = new Uint8Array(0);
  private seq = new Int32Array(0);
  private ring = new Int32Array(0);
  private head = 0;
  private free = 0;
  /** Leases open now. */
  count = 0;

  /** `initial` is rounded to a power of two (the ring index is masked). */
  constructor(initial = 64) {
    this.grow(initial);
  }

  /**
   * Makes sure one more lease can be recorded, growing the book if needed.
   * Called before the lease is counted in the table, so that a full book
   * (`CapacityExhausted`) never leaves a counted lease behind.
   */
  reserve(): void {
    if (this.free === 0) this.grow(this.cap * 2);
  }

  /** Records a lease (after {@link reserve}); returns its handle. */
  openLease(c: SlotCandidate, kind: LeaseKindCode): number {
    const i = this.ring[this.head]!;
    this.head = (this.head + 1) & (this.cap - 1);
    this.free--;
    this.cand[i] = c;
    this.kind[i] = kind;
    this.open[i] = 1;
    this.count++;
    return (this.seq[i]! << INDEX_BITS) | i;
  }

  /** The entry index of an open handle, or -1 (stale, released, or foreign). */
  find(handle: number): number {
    const i = handle & INDEX_MASK;
    if (i >= this.cap || this.open[i] !== 1 || this.seq[i] !== handle >>> INDEX_BITS) return -1;
    return i;
  }

  /** Closes entry `i` (from {@link find}). */
  close(i: number): void {
    this.open[i] = 0;
    // Drop the reference: a closed entry must not keep a replaced candidate alive.
    this.cand[i] = undefined;
    this.seq[i] = (this.seq[i]! + 1) & SEQ_MASK;
    this.ring[(this.head + this.free) & (this.cap - 1)] = i;
    this.free++;
    this.count--;
  }

  /** The candidate open entry `i` leased. */
  candidateOf(i: number): SlotCandidate {
    return this.cand[i]!;
  }
  kindOf(i: number): LeaseKindCode {
    return this.kind[i] as LeaseKindCode;
  }

  private grow(n: number): void {
    if (n > MAX_OPEN_LEASES) {
      throw new PoiseError(
        'CapacityExhausted',
        `acquire: this router already holds ${this.count} open leases, the most one router may hold (release some first)`,
      );
    }
    const old = this.cap;
    const copy = <T extends Int32Array | Uint8Array>(a: T, make: (k: number) => T): T => {
      const b = make(n);
      b.set(a);
      return b;
    };
    for (let k = old; k < n; k++) this.cand.push(undefined);
    this.kind = copy(this.kind, (k) => new Uint8Array(k));
    this.open = copy(this.open, (k) => new Uint8Array(k));
    this.seq = copy(this.seq, (k) => new Int32Array(k));
    // Only called when no entry is free: the new ring holds the new entries.
    const ring = new Int32Array(n);
    for (let k = 0; k < n - old; k++) ring[k] = old + k;
    this.ring = ring;
    this.head = 0;
    this.free = n - old;
    this.cap = n;
  }
}
