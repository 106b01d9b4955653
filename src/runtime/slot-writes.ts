/**
 * The owner's writes of one membership into the table's slots: each changed
 * backend's words and tag (a new occupant starts cold: health, reports,
 * database state, verdicts awaited, a slow-start ramp beside warm members),
 * and a tombstone tag for each backend that left. The Balancer publishes the
 * spec blob and the epoch after these (balancer.ts: the order of publication).
 */
import type { ResolvedBackendSpec } from '../core/spec.js';
import { dbRoleCode } from '../load/db-state.js';
import { HealthFlag, SlotState, type LoadTable, type SlotStateCode } from '../load/load-table.js';
import type { Assignment, Reservation, SlotInfo } from './slot-allocation.js';

const STATE_OF: Record<ResolvedBackendSpec['status'], SlotStateCode> = {
  ready: SlotState.Ready,
  degraded: SlotState.Ready,
  unavailable: SlotState.Unavailable,
  draining: SlotState.Draining,
};

/** The owner's slot records, which {@link writeSlots} keeps in step with the table. @internal */
export interface OwnedSlots {
  readonly slots: (SlotInfo | undefined)[];
  readonly byId: Map<string, number>;
}

/** What one membership writes: its specs, the ids it keeps, and the slots planned for it. @internal */
export interface SlotPlan {
  readonly specs: readonly ResolvedBackendSpec[];
  readonly keep: ReadonlySet<string>;
  readonly reservation: Reservation;
  readonly assignment: Assignment;
  /** The verdict sources a new occupant awaits (load/verdicts.ts bits). */
  readonly sources: number;
}

/** Writes each changed slot's words and tag, and marks the backends that left as tombstones. @internal */
export function writeSlots(t: LoadTable, owned: OwnedSlots, plan: SlotPlan, now: number): void {
  const { specs, keep, reservation, assignment, sources } = plan;
  const { slots, byId } = owned;
  const { slotOf, generationOf, same, fresh, jsons, lines } = assignment;
  // A new backend ramps (slow start) only beside one already serving: when every member is new, nobody is ramped.
  let warm = false;
  for (const spec of specs) if (byId.has(spec.id) && !slots[byId.get(spec.id)!]!.removed) warm = true;
  // A reused tombstone leaves the map, unless its id already took another slot (a rejoin that left it holding leases).
  for (const s of reservation.closing) {
    const id = slots[s]!.id;
    if (byId.get(id) === s) byId.delete(id);
  }
  for (let k = 0; k < specs.length; k++) {
    // Unchanged, live, same generation: its words and tag already say so.
    // Keep the new (equal) spec object, so that the next membership that
    // brings this object back is recognised by identity.
    if (same[k] === 1) {
      slots[slotOf[k]!]!.spec = specs[k]!;
      continue;
    }
    const spec = specs[k]!;
    const slot = slotOf[k]!;
    const generation = generationOf[k]!;
    // A live backend whose spec changed keeps its state; a new occupant —
    // an id never seen or one that rejoins after its removal (a restarted
    // pod) — starts cold: PeakEWMA prior, passive health, reports, database
    // state, and a slow-start ramp beside warm members.
    const before = fresh[k] === 1 ? undefined : slots[slot]!.spec;
    if (fresh[k] === 1) {
      t.resetHealth(slot, now);
      t.reported.clear(slot);
      t.db.clear(slot);
      // Before the epoch that announces it: whoever sees the new backend sees what it awaits (its sources mark it again when they start).
      t.verdicts.reset(slot, sources);
      if (warm) t.slowStart.markEligible(slot, now);
      else t.slowStart.clear(slot);
    }
    t.health.setHealth(slot, HealthFlag.MemberDegraded, spec.status === 'degraded' ? HealthFlag.MemberDegraded : 0);
    // The configured role, for a new occupant or a changed one (a roles check overrides it at its next result).
    if (before?.role !== spec.role) t.db.setRole(slot, dbRoleCode(spec.role));
    t.tags.setTag(slot, generation, STATE_OF[spec.status]);
    slots[slot] = { id: spec.id, generation, removed: false, spec, json: jsons[k]!, line: lines[k]! };
    byId.set(spec.id, slot);
  }
  for (const [id, slot] of byId) {
    const info = slots[slot]!;
    if (keep.has(id) || info.removed) continue;
    t.tags.setTag(slot, info.generation, SlotState.Removed);
    info.removed = true;
  }
}
