/**
 * Slot tags: which backend occupies a slot (its generation) and in what
 * state, in one word the owner writes and every router checks.
 *
 * A router's lease stands only if, after its SC increment of the slot's
 * lease counter (leases.ts), an SC load of the tag still shows the
 * generation it drew and a leasable state. The owner changes the tag (SC
 * store) before it reads the counter to decide whether a slot can be reused:
 * of two SC operations on each side, one side always sees the other's — so
 * either the owner sees the lease and keeps the slot, or the router sees the
 * new tag and gives the lease back. That handshake is what keeps a lease
 * from landing on a slot's next occupant.
 */
import { S_TAG, type Layout } from './layout.js';

/** Slot states (the low 3 bits of the tag word; {@link tagState} reads them). */
export const SlotState = {
  Free: 0,
  Ready: 1,
  Unavailable: 2,
  Draining: 3,
  Removed: 4,
  Closing: 5,
} as const;
/** A slot state code. */
export type SlotStateCode = (typeof SlotState)[keyof typeof SlotState];

/** Bits of the state at the bottom of a tag; the generation is above them. */
const STATE_BITS = 3;
const STATE_MASK = (1 << STATE_BITS) - 1;
/** Generations wrap within 28 bits, so `generation << 3` stays a non-negative int32. */
export const GENERATION_MASK = 0x0fffffff;

/** The tag word of `generation` (taken modulo 2^28) in `state`: `generation << 3 | state`. */
export function encodeTag(generation: number, state: SlotStateCode): number {
  return ((generation & GENERATION_MASK) << STATE_BITS) | state;
}

/** The generation a tag names: compare it with a candidate's or a lease's to know the slot still holds that backend. */
export function tagGeneration(tag: number): number {
  return tag >>> STATE_BITS;
}

/** The state a tag names. */
export function tagState(tag: number): SlotStateCode {
  return (tag & STATE_MASK) as SlotStateCode;
}

/** The generation after `generation`, wrapped as tags hold it. */
export function nextGeneration(generation: number): number {
  return (generation + 1) & GENERATION_MASK;
}

/** The tag words of one table. */
export class SlotTags {
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /** The tag word `generation << 3 | state`, ordered (the lease handshake above). */
  tag(slot: number): number {
    // Written only by the owner with Atomics.store; an SC load sees the old or the new tag, never a mix.
    return Atomics.load(this.i32, this.layout.slot(slot) + S_TAG);
  }

  /**
   * The tag as a plain read, for checks an open lease already makes true: a
   * lease pins its slot's generation (the owner reuses a slot only once its
   * counters read zero), so a release only confirms what it knows. Tear-free,
   * unordered.
   */
  tagHint(slot: number): number {
    return this.i32[this.layout.slot(slot) + S_TAG]!;
  }

  /** Owner: sets the tag (generation and state) of a slot. */
  setTag(slot: number, generation: number, state: SlotStateCode): void {
    // Single writer (the owner thread); an SC store publishes it to every reader (the handshake above).
    Atomics.store(this.i32, this.layout.slot(slot) + S_TAG, encodeTag(generation, state));
  }
}
