/**
 * What a membership update offers the Balancer, read against the membership
 * held: an array of backends is the next version in the current line; a
 * snapshot brings its own version, lineage and cluster, and one not newer
 * in the line held is refused (the outcome says so) — except the very first.
 */
import { invalidConfig } from '../core/errors.js';
import type { BackendSpec, MembershipOutcome, MembershipSnapshot } from '../core/spec.js';
import { integerIn } from '../core/validate.js';

/** The membership in force, as an update is read against it. @internal */
export interface HeldMembership {
  readonly version: number;
  readonly lineage: string | undefined;
  readonly cluster: string | undefined;
  /** Whether any membership has been applied (a first snapshot may carry version 0). */
  readonly applied: boolean;
}

/** An update to apply: its version, its backends (not validated yet), its lineage and cluster. @internal */
export interface OfferedMembership {
  readonly version: number;
  readonly backends: unknown;
  readonly lineage: string | undefined;
  readonly cluster: string | undefined;
}

/**
 * The version, backends, lineage and cluster an update offers (an array:
 * the next version in the current line), or the outcome of one not newer
 * in its line; throws InvalidConfig naming a bad field.
 * @internal
 */
export function readMembershipInput(
  input: MembershipSnapshot | readonly BackendSpec[],
  held: HeldMembership,
): { outcome: Extract<MembershipOutcome, { applied: false }> } | OfferedMembership {
  if (Array.isArray(input)) return { version: held.version + 1, backends: input, lineage: held.lineage, cluster: held.cluster };
  if (typeof input === 'object' && input !== null) {
    const snapshot = input as MembershipSnapshot;
    const v = snapshot.version;
    integerIn(v, 'membership.version', 0);
    const l = snapshot.lineage;
    if (l !== undefined && (typeof l !== 'string' || l.length === 0 || l.length > 64))
      invalidConfig('membership.lineage', 'must be a string of 1 to 64 characters', l);
    const newLine = l !== undefined && l !== held.lineage;
    // Not newer in the same line: ignored — except that the very first
    // membership applies whatever its version, including 0 (a fallback file without one).
    if (held.applied && !newLine && v <= held.version)
      return { outcome: { applied: false, version: held.version, offered: v, reason: 'not-newer' } };
    const c = snapshot.cluster;
    if (c !== undefined && (typeof c !== 'string' || c.length === 0 || c.length > 256))
      invalidConfig('membership.cluster', 'must be a string of 1 to 256 characters', c);
    return { version: v as number, backends: snapshot.backends, lineage: l ?? held.lineage, cluster: c ?? held.cluster };
  }
  return invalidConfig('membership', 'must be a MembershipSnapshot or an array of BackendSpec', input);
}
