/**
 * The slot tag codec (src/load/slot-tags.ts): a tag decodes to the
 * generation (modulo 2^28) and state it was encoded from, stays a
 * non-negative int32, and is what SlotTags stores; the next generation
 * wraps where tags wrap.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoadTable } from '../../src/load/load-table.js';
import {
  GENERATION_MASK,
  SlotState,
  encodeTag,
  nextGeneration,
  tagGeneration,
  tagState,
  type SlotStateCode,
} from '../../src/load/slot-tags.js';

const STATES = Object.values(SlotState) as SlotStateCode[];

describe('slot tags', () => {
  it('decode what they encode: generation modulo 2^28 and state, as a non-negative int32', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.constantFrom(...STATES), (generation, state) => {
        const tag = encodeTag(generation, state);
        expect(tagGeneration(tag)).toBe(generation % 2 ** 28);
        expect(tagState(tag)).toBe(state);
        expect(tag).toBe(tag | 0);
        expect(tag).toBeGreaterThanOrEqual(0);
      }),
    );
  });

  it('the next generation wraps to 0 after 2^28 - 1', () => {
    expect(nextGeneration(1)).toBe(2);
    expect(nextGeneration(GENERATION_MASK)).toBe(0);
    expect(GENERATION_MASK).toBe(2 ** 28 - 1);
  });

  it('SlotTags stores the encoded tag, and the table reads it back decoded', () => {
    const t = LoadTable.create({ capacity: 4 });
    t.tags.setTag(3, 2 ** 28 + 5, SlotState.Draining);
    expect(t.tag(3)).toBe(encodeTag(5, SlotState.Draining));
    expect([t.stats(3).generation, t.stats(3).state]).toEqual([5, SlotState.Draining]);
  });
});
