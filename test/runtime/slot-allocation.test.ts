import { threadId } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { resolveBackendSpecs } from '../../src/core/spec.js';
import { LeaseKind, LoadTable, SlotState } from '../../src/load/load-table.js';
import { assignSlots, reserveSlots, type SlotInfo } from '../../src/runtime/slot-allocation.js';
import { blobLine, specJson } from '../../src/runtime/spec-blob.js';
import { thrown } from '../helpers/thrown.js';

/** Specs for `ids` (each id's address is its own); `weight2` marks ids whose weight is 2. */
const specs = (...ids: string[]) =>
  resolveBackendSpecs(
    ids.map((id) => ({ id: id.replace('*', ''), address: `127.0.0.1:${7000 + id.charCodeAt(0)}`, weight: id.endsWith('*') ? 2 : 1 })),
  );

/** A slot map with `ids` live in slots 0.., and `gone` as tombstones after them. */
function owner(capacity: number, live: string[], gone: string[] = []) {
  const t = LoadTable.create({ capacity, maxThreads: 2 });
  const slots: (SlotInfo | undefined)[] = new Array(capacity).fill(undefined);
  const byId = new Map<string, number>();
  [...live, ...gone].forEach((id, s) => {
    const spec = specs(id)[0]!;
    const removed = gone.includes(id);
    slots[s] = { id, generation: 3, removed, spec, json: specJson(spec), line: blobLine(s, 3, specJson(spec)) };
    byId.set(id, s);
    t.tags.setTag(s, 3, removed ? SlotState.Removed : SlotState.Ready);
  });
  return { t, map: { slots, byId } };
}

describe('slot allocation', () => {
  it('keeps a known id in its slot and generation, marks an unchanged spec as nothing to write, and gives newcomers free slots first', () => {
    const { t, map } = owner(4, ['a', 'b'], ['z']);
    const next = specs('b*', 'a', 'c');
    const r = reserveSlots(t, map, next);
    expect(r.reserved).toEqual([3]);
    expect(r.closing).toEqual([]);
    const a = assignSlots(map, next, r);
    expect([...a.slotOf]).toEqual([1, 0, 3]);
    expect([...a.generationOf]).toEqual([3, 3, 1]);
    // b's weight changed: rewritten; a is unchanged; c is new.
    expect([...a.same]).toEqual([0, 1, 0]);
    expect(a.jsons[1]).toBe(map.slots[0]!.json);
    expect(t.tag(2)).toBe((3 << 3) | SlotState.Removed);
  });

  it('reuses a drained tombstone with the generation bumped, never one that still holds a lease, and refuses when slots run out', () => {
    const { t, map } = owner(3, ['a'], ['y', 'z']);
    t.leases.up(1, LeaseKind.Request, t.leases.claimRow(threadId)); // y still holds a lease
    const next = specs('a', 'c');
    const r = reserveSlots(t, map, next);
    expect(r.reserved).toEqual([2]);
    expect(r.closing).toEqual([2]);
    expect(t.tag(1)).toBe((3 << 3) | SlotState.Removed);
    expect(t.tag(2)).toBe((3 << 3) | SlotState.Closing);
    expect([...assignSlots(map, next, r).generationOf]).toEqual([3, 4]);
    r.rollback();
    expect(t.tag(2)).toBe((3 << 3) | SlotState.Removed);

    const err = thrown(() => reserveSlots(t, map, specs('a', 'c', 'd')));
    expect(err).toMatchObject({ code: 'CapacityExhausted', field: 'backends' });
    expect(err.message).toBe(
      'backends: 2 new backends need free slots but only 1 are free (options.capacity 3; removed backends keep their slot until their leases end)',
    );
    // The refusal reopened the tombstone it had closed.
    expect(t.tag(2)).toBe((3 << 3) | SlotState.Removed);
  });

  it('a rejoining id is a newcomer: its own drained tombstone back with the generation bumped, else another slot, never the old generation', () => {
    const { t, map } = owner(3, ['a'], ['z']);
    const next = specs('z', 'a');
    const r = reserveSlots(t, map, next);
    expect(r.reserved).toEqual([]);
    expect([...r.own]).toEqual([['z', 1]]);
    expect(r.closing).toEqual([1]);
    const a = assignSlots(map, next, r);
    expect([...a.slotOf]).toEqual([1, 0]);
    expect([...a.generationOf]).toEqual([4, 3]);
    expect([...a.same]).toEqual([0, 1]);
    expect([...a.fresh]).toEqual([1, 0]);
    r.rollback();

    // z's tombstone still holds a lease: z comes back in a free slot, and the tombstone stays Removed for that lease.
    t.leases.up(1, LeaseKind.Connection, t.leases.claimRow(threadId));
    const r2 = reserveSlots(t, map, next);
    expect([...r2.own]).toEqual([]);
    expect(r2.reserved).toEqual([2]);
    expect(r2.closing).toEqual([]);
    expect(t.tag(1)).toBe((3 << 3) | SlotState.Removed);
    const a2 = assignSlots(map, next, r2);
    expect([...a2.slotOf]).toEqual([2, 0]);
    expect([...a2.generationOf]).toEqual([1, 3]);
    expect([...a2.fresh]).toEqual([1, 0]);
  });
});
