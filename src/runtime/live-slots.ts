/**
 * The owner's live backends read back from its slot records: as the health
 * workers watch them (their targets), and those still awaiting a first
 * verdict (what `Balancer.ready()` names while it waits).
 */
import { parseAddress } from '../core/spec.js';
import type { HealthTarget } from '../health/targets.js';
import type { LoadTable } from '../load/load-table.js';
import { verdictNames } from '../load/verdicts.js';
import type { SlotMap } from './slot-allocation.js';

/** The live slots, as the health workers watch them. @internal */
export function healthTargetsOf(map: SlotMap): HealthTarget[] {
  const targets: HealthTarget[] = [];
  for (const [id, slot] of map.byId) {
    const info = map.slots[slot]!;
    if (info.removed) continue;
    const a = parseAddress(info.spec.address);
    targets.push({
      slot,
      generation: info.generation,
      id,
      address: info.spec.address,
      host: a?.host ?? '',
      port: a?.port ?? 0,
      priority: info.spec.priority,
      role: info.spec.role,
    });
  }
  return targets;
}

/** Each live backend still awaiting a first verdict, with what it awaits: `pg-a (active check)`. @internal */
export function awaitingVerdicts(map: SlotMap, t: LoadTable): string[] {
  const out: string[] = [];
  for (const [id, slot] of map.byId) {
    if (map.slots[slot]!.removed) continue;
    const bits = t.verdicts.pending(slot);
    if (bits !== 0) out.push(`${id} (${verdictNames(bits)})`);
  }
  return out;
}
