/**
 * The spec blob: the owner's UTF-8 spec text for every live slot (the
 * runtime's spec-blob.ts defines its lines), published under a seqlock in
 * the header's sequence word. Single writer: the owner.
 *
 * Only the words that differ from the previous publication are stored (one
 * membership change touches the version line and one backend's line), in at
 * most two ranges named in the header; a reader holding that previous
 * publication copies its own bytes and loads only those ranges. Every shared
 * word is read with `Atomics.load` inside the seqlock: plain reads would not
 * be ordered with the sequence word, and a copy must be one publication,
 * never a mix (`Atomics.load/store` cost ~22 ns a word, which is why only
 * changed words move).
 */
import { PoiseError } from '../core/errors.js';
import { H_SPEC_LEN, H_SPEC_RANGES, H_SPEC_SEQ, type Layout } from './layout.js';

/** The spec blob region of one table. */
export class SpecRegion {
  private readonly i32: Int32Array;
  private readonly base: number;
  private readonly words: number;
  /** Owner: the words of the blob as last published by this instance (the single writer), to store only what changed. */
  private published = new Int32Array(0);
  /** Reader: the last blob copy this instance returned (its first `heldWords` words), and the sequence number it was read at. */
  private held: Int32Array | undefined;
  private heldWords = 0;
  private heldSeq = 0;
  /** Reader: the buffer the next copy goes into (the one before `held`): two buffers alternate, so a copy allocates nothing. */
  private spare: Int32Array | undefined;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.base = layout.specBase;
    this.words = layout.specWords;
  }

  /** Bytes available for the spec blob. */
  get capacityBytes(): number {
    return this.words * 4;
  }

  /**
   * Owner: publishes the spec blob under the seqlock (odd while writing) and
   * wakes readers that waited on it. Throws `PoiseError` `CapacityExhausted` when it does not fit.
   */
  publish(bytes: Uint8Array): void {
    const words = Math.ceil(bytes.length / 4);
    if (words > this.words) {
      throw new PoiseError('CapacityExhausted', `spec blob of ${bytes.length} bytes exceeds options.specBytes (${this.words * 4})`, {
        field: 'options.specBytes',
      });
    }
    const i = this.i32;
    const padded = new Uint8Array(words * 4);
    padded.set(bytes);
    const src = new Int32Array(padded.buffer);
    // Only the words that differ from the last publication are stored (one
    // membership change touches the version line and one backend's line),
    // in at most two ranges that readers holding that publication patch.
    const [a0, a1, b0, b1] = changedRanges(this.published, src);
    const seq = Atomics.load(i, H_SPEC_SEQ);
    // Odd = writing. SC stores: a reader that sees the final even value sees
    // every word stored before it.
    Atomics.store(i, H_SPEC_SEQ, (seq + 1) | 0);
    const base = this.base;
    for (let w = a0; w < a1; w++) Atomics.store(i, base + w, src[w]!);
    for (let w = b0; w < b1; w++) Atomics.store(i, base + w, src[w]!);
    Atomics.store(i, H_SPEC_RANGES, a0);
    Atomics.store(i, H_SPEC_RANGES + 1, a1);
    Atomics.store(i, H_SPEC_RANGES + 2, b0);
    Atomics.store(i, H_SPEC_RANGES + 3, b1);
    Atomics.store(i, H_SPEC_LEN, bytes.length);
    Atomics.store(i, H_SPEC_SEQ, (seq + 2) | 0);
    this.published = src;
    Atomics.notify(i, H_SPEC_SEQ);
  }

  /** The spec blob sequence number (even when stable). */
  seq(): number {
    return Atomics.load(this.i32, H_SPEC_SEQ);
  }

  /**
   * A private copy of the current spec blob (empty before the first publish).
   * Waits with `Atomics.wait` while the owner is writing (never spins), and
   * retries when the sequence moved during the copy. When this instance's
   * last copy is of the publication just before (sequence − 2), it copies
   * that one and loads only the ranges the owner changed; otherwise every
   * word. Either way every shared word is read with `Atomics.load` inside
   * the seqlock. Two buffers of this instance alternate: the result must not
   * be modified, and it holds its bytes until the next call but one (decode
   * it at once).
   */
  read(): Uint8Array {
    const i = this.i32;
    const base = this.base;
    for (;;) {
      const seq = Atomics.load(i, H_SPEC_SEQ);
      if ((seq & 1) === 1) {
        // The owner is mid-write; it notifies when done. The timeout only
        // bounds the wait if a notify is missed between load and wait.
        Atomics.wait(i, H_SPEC_SEQ, seq, 10);
        continue;
      }
      const len = Atomics.load(i, H_SPEC_LEN);
      const words = Math.ceil(len / 4);
      const held = this.held;
      if (held !== undefined && seq === this.heldSeq && this.heldWords === words) return new Uint8Array(held.buffer, 0, len);
      let out = this.spare;
      // Room for some growth, so a membership that grows by a few backends reuses the buffers.
      if (out === undefined || out.length < words) out = new Int32Array(Math.min(this.words, words + (words >> 2) + 16));
      if (held !== undefined && seq === ((this.heldSeq + 2) | 0)) {
        out.set(held.subarray(0, Math.min(this.heldWords, words)));
        // Ranges are clamped to the copy: a torn read of them (the sequence moved) is retried below anyway.
        const a1 = Math.min(Atomics.load(i, H_SPEC_RANGES + 1), words);
        for (let w = Atomics.load(i, H_SPEC_RANGES); w < a1; w++) out[w] = Atomics.load(i, base + w);
        const b1 = Math.min(Atomics.load(i, H_SPEC_RANGES + 3), words);
        for (let w = Atomics.load(i, H_SPEC_RANGES + 2); w < b1; w++) out[w] = Atomics.load(i, base + w);
      } else {
        for (let w = 0; w < words; w++) out[w] = Atomics.load(i, base + w);
      }
      if (Atomics.load(i, H_SPEC_SEQ) === seq) {
        this.spare = held;
        this.held = out;
        this.heldWords = words;
        this.heldSeq = seq;
        return new Uint8Array(out.buffer, 0, len);
      }
      this.spare = out;
    }
  }
}

/** Equal words that end a changed range: closer changes are stored as one range. */
const RANGE_GAP = 16;

/**
 * The words of `next` that differ from `prev` (the same blob one
 * publication earlier), as at most two ranges `[a0, a1)` and `[b0, b1)`:
 * the first run of changes (gaps shorter than {@link RANGE_GAP} words
 * included), then everything from the next change to the last. Every word
 * of `next` outside them equals `prev`'s. @internal
 */
export function changedRanges(prev: Int32Array, next: Int32Array): [number, number, number, number] {
  const n = next.length;
  const common = Math.min(prev.length, n);
  let last = n - 1;
  if (prev.length === n) while (last >= 0 && next[last] === prev[last]) last--;
  let a0 = 0;
  while (a0 < common && next[a0] === prev[a0]) a0++;
  if (a0 > last) return [0, 0, 0, 0];
  let a1 = a0 + 1;
  for (let w = a1; w <= last && w - a1 < RANGE_GAP; w++) if (w >= common || next[w] !== prev[w]) a1 = w + 1;
  let b0 = a1;
  while (b0 <= last && b0 < common && next[b0] === prev[b0]) b0++;
  return b0 > last ? [a0, a1, 0, 0] : [a0, a1, b0, last + 1];
}
