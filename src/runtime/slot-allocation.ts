/**
 * Slot allocation for the Balancer: which LoadTable slot and generation each
 * backend of a new membership gets, decided before anything is written.
 *
 * Slots are stable per id while the id stays. A newcomer — an id never
 * seen, or one that left and comes back (a restarted pod: a rejoin is a new
 * backend, never the old one resumed) — takes its own tombstone first when
 * its leases have all ended, then a never-used slot, then another removed
 * backend's tombstone whose leases have ended. Reusing a slot bumps its
 * generation, so a stale lease can never touch the new occupant. A rejoin
 * whose tombstone still holds leases leaves it behind (no longer mapped by
 * id): those leases end on it normally, and it is reused like any other
 * tombstone once they have.
 */
import { PoiseError } from '../core/errors.js';
import { sameSpec, type ResolvedBackendSpec } from '../core/spec-fields.js';
import { SlotState, type LoadTable } from '../load/load-table.js';
import { nextGeneration } from '../load/slot-tags.js';
import { blobLine, specJson } from './spec-blob.js';

/** What the owner remembers about a slot it has used. */
export interface SlotInfo {
  id: string;
  generation: number;
  removed: boolean;
  spec: ResolvedBackendSpec;
  /** `specJson(spec)`, kept so an unchanged spec is not serialised again. */
  json: string;
  /** `blobLine(slot, generation, json)`, kept so an unchanged slot's blob line is not built again. */
  line: string;
}

/** The owner's slot bookkeeping: by slot, and slot by live or tombstoned id. */
export interface SlotMap {
  readonly slots: readonly (SlotInfo | undefined)[];
  readonly byId: ReadonlyMap<string, number>;
}

/** Slots reserved for the newcomers of one membership. */
export interface Reservation {
  /** Rejoining ids that take their own tombstone back (its leases have ended), by id. */
  readonly own: ReadonlyMap<string, number>;
  /** One slot for each other newcomer, in the order they are met. */
  readonly reserved: readonly number[];
  /** Of those, the tombstones closed for reuse (their ids leave the map when the membership is written). */
  readonly closing: readonly number[];
  /** Reopens the closed tombstones, when the membership is refused after all. */
  rollback(): void;
}

/** Where each spec of a membership goes, and its blob line. */
export interface Assignment {
  readonly slotOf: Int32Array;
  readonly generationOf: Int32Array;
  /** Per spec: 1 when its slot already holds exactly this spec, live, in this generation (nothing to write). */
  readonly same: Uint8Array;
  /** Per spec: 1 for a new occupant (an id never seen or one that rejoins), whose slot state starts afresh. */
  readonly fresh: Uint8Array;
  /** Per spec: its `specJson`. */
  readonly jsons: readonly string[];
  /** Per spec: its blob line. */
  readonly lines: readonly string[];
}

/** Whether `id` is live in the map (known and not removed): the only ids that keep their slot and state. */
function isLive(map: SlotMap, id: string): boolean {
  const s = map.byId.get(id);
  return s !== undefined && !map.slots[s]!.removed;
}

/**
 * Reserves a slot for every id of `specs` not live in the map: a rejoining
 * id's own tombstone when its leases have ended, then free slots, then other
 * tombstones whose leases have ended. Throws `CapacityExhausted` (with every
 * tombstone reopened) when there are too few.
 */
export function reserveSlots(t: LoadTable, map: SlotMap, specs: readonly ResolvedBackendSpec[]): Reservation {
  const own = new Map<string, number>();
  const reserved: number[] = [];
  const closing: number[] = [];
  /** Tombstones already tried (closed, or found holding leases). */
  const tried = new Set<number>();
  let newcomers = 0;
  // Close the tombstone before reading its counters: a router that leases
  // it after this store sees Closing and backs off; one that leased it
  // before is visible in the counters (both sides are SC).
  const close = (s: number): boolean => {
    tried.add(s);
    const info = map.slots[s]!;
    t.tags.setTag(s, info.generation, SlotState.Closing);
    if (t.connections(s) === 0 && t.requests(s) === 0) {
      closing.push(s);
      return true;
    }
    t.tags.setTag(s, info.generation, SlotState.Removed);
    return false;
  };
  for (const spec of specs) {
    if (isLive(map, spec.id)) continue;
    const s = map.byId.get(spec.id);
    if (s !== undefined && close(s)) own.set(spec.id, s);
    else newcomers++;
  }
  for (let s = 0; s < t.capacity && reserved.length < newcomers; s++) {
    if (map.slots[s] === undefined) reserved.push(s);
  }
  for (let s = 0; s < t.capacity && reserved.length < newcomers; s++) {
    const info = map.slots[s];
    if (info === undefined || !info.removed || tried.has(s)) continue;
    if (close(s)) reserved.push(s);
  }
  const rollback = (): void => {
    for (const s of closing) t.tags.setTag(s, map.slots[s]!.generation, SlotState.Removed);
  };
  if (reserved.length < newcomers) {
    rollback();
    throw new PoiseError(
      'CapacityExhausted',
      `backends: ${newcomers + own.size} new backends need free slots but only ${reserved.length + own.size} are free (options.capacity ${t.capacity}; removed backends keep their slot until their leases end)`,
      { field: 'backends' },
    );
  }
  return { own, reserved, closing, rollback };
}

/**
 * Gives every spec its slot and generation — its own for a live id, its
 * reserved one (generation + 1) for a newcomer — and its blob line.
 * Writes nothing.
 */
export function assignSlots(map: SlotMap, specs: readonly ResolvedBackendSpec[], reservation: Reservation): Assignment {
  const n = specs.length;
  const slotOf = new Int32Array(n);
  const generationOf = new Int32Array(n);
  const same = new Uint8Array(n);
  const fresh = new Uint8Array(n);
  const jsons: string[] = new Array<string>(n);
  const lines: string[] = new Array<string>(n);
  let next = 0;
  for (let k = 0; k < n; k++) {
    const spec = specs[k]!;
    const existing = map.byId.get(spec.id);
    let json: string | undefined;
    let line: string | undefined;
    if (existing !== undefined && !map.slots[existing]!.removed) {
      const info = map.slots[existing]!;
      slotOf[k] = existing;
      generationOf[k] = info.generation;
      if (sameSpec(info.spec, spec)) {
        json = info.json;
        line = info.line;
        same[k] = 1;
      }
    } else {
      fresh[k] = 1;
      const slot = reservation.own.get(spec.id) ?? reservation.reserved[next++]!;
      const prev = map.slots[slot];
      slotOf[k] = slot;
      generationOf[k] = prev === undefined ? 1 : nextGeneration(prev.generation);
    }
    json ??= specJson(spec);
    jsons[k] = json;
    lines[k] = line ?? blobLine(slotOf[k]!, generationOf[k]!, json);
  }
  return { slotOf, generationOf, same, fresh, jsons, lines };
}
