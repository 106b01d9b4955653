/**
 * BackendSpec: one backend as the control plane describes it, and its
 * validation. Pure: the membership document parser, the Balancer and the CLI
 * all validate through here, so every layer rejects the same input with the
 * same message, naming the exact path and the reason:
 *
 *     backends[3].weight: must be an integer in [1, 4294967295], got -2
 *
 * The fields themselves, their rules and defaults are declared in
 * src/core/spec-fields.ts; host:port validation is src/core/address.ts.
 */
import { PoiseError, describe } from './errors.js';
import { SPEC_FIELD_LIST, type BackendSpec, type ResolvedBackendSpec, type SpecValue } from './spec-fields.js';

export type { BackendSpec, ResolvedBackendSpec, SpecStatus } from './spec-fields.js';
/** host:port validation, for the modules that import it from here. @internal */
export { ADDRESS_RULE, addressDetail, addressReason, parseAddress } from './address.js';

/** A versioned membership: what a source hands the Balancer. */
export interface MembershipSnapshot {
  /** Monotonic version within one lineage; a source never applies an older one of the same lineage. */
  version: number;
  /**
   * The version line this snapshot belongs to (the Redis control plane sets
   * one when a cluster's first version is written into an empty Redis). A
   * snapshot of another lineage than the one in force replaces it whatever
   * its version; without one, only the version counts.
   */
  lineage?: string;
  /** Cluster name, when the source has one. */
  cluster?: string;
  /** The cluster's health block (`{ check?, outlier? }`, see docs/health.md); validated by the Balancer, which replaces its own with it. */
  health?: unknown;
  /** The cluster's retry budget (`{ ratio?, minRetriesPerSecond?, ttlMs? }` or `false`, see docs/resilience.md); validated by the Balancer, which replaces its own with it. */
  retryBudget?: unknown;
  /** The cluster's slow start (`{ windowMs, aggression?, minWeightPercent? }` or `false`, see docs/resilience.md); validated by the Balancer, which replaces its own with it. */
  slowStart?: unknown;
  /** The cluster's fleet connection budget (`{ limitPerBackend, reserve?, ttlMs? }` or `false`, see docs/connection-budget.md); validated by the Balancer, which replaces its own with it. */
  connectionBudget?: unknown;
  backends: readonly BackendSpec[];
}

/**
 * What a membership target (a Balancer) did with a snapshot: applied it, or
 * ignored it because its version is not newer than the one in force (and it
 * is not of another lineage). Sources log "membership applied" only for
 * `applied: true`.
 */
export type MembershipOutcome =
  | {
      readonly applied: true;
      /** The version now in force (the snapshot's). */
      readonly version: number;
      /** The version in force before. */
      readonly previous: number;
    }
  | {
      readonly applied: false;
      /** The version still in force. */
      readonly version: number;
      /** The version offered and ignored. */
      readonly offered: number;
      /** Why: `'not-newer'` (the offered version is <= the one in force, same or no lineage). */
      readonly reason: 'not-newer';
    };

/** The field names, for the unknown-field check. */
const FIELD_NAMES: ReadonlySet<string> = new Set(SPEC_FIELD_LIST.map((f) => f.name));

function fail(field: string, reason: string, got?: unknown, code: 'InvalidConfig' | 'InvalidWeight' = 'InvalidConfig'): never {
  const suffix = got === NO_VALUE ? '' : `, got ${describe(got)}`;
  throw new PoiseError(code, `${field}: ${reason}${suffix}`, { field });
}
const NO_VALUE = Symbol('none');

/**
 * Validates one spec and fills its defaults. `path` prefixes field names in
 * messages (`backends[3]`). Unknown fields are rejected: a typo such as
 * `wieght` must not silently mean "weight 1". The result is frozen, and
 * passing it back in returns it as it is (validated once).
 * @internal
 */
export function resolveBackendSpec(value: unknown, path = 'backend'): ResolvedBackendSpec {
  return resolveSpecAt(value, path, -1);
}

/** `path`, or `path[index]` for a list member: built only when a message needs it (validation runs on every membership change). */
function pathOf(path: string, index: number): string {
  return index < 0 ? path : `${path}[${index}]`;
}

/**
 * Every spec this module resolved. They are frozen, so one that comes back
 * (a membership re-applied with its unchanged members, as a delta notice's
 * result or a Balancer.update of a source's snapshot does) is still exactly
 * what was validated: it is accepted as it is, by identity.
 */
const RESOLVED = new WeakSet<object>();

/** Whether `value` is a spec {@link resolveBackendSpec} returned (frozen, so unchanged since). @internal */
export function isResolvedSpec(value: unknown): value is ResolvedBackendSpec {
  return typeof value === 'object' && value !== null && RESOLVED.has(value);
}

/** {@link resolveBackendSpec} for `path` (a list member when `index` ≥ 0). */
function resolveSpecAt(value: unknown, path: string, index: number): ResolvedBackendSpec {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(pathOf(path, index), 'must be an object', value);
  if (RESOLVED.has(value)) return value as ResolvedBackendSpec;
  const spec = value as Record<string, unknown>;
  for (const key of Object.keys(spec)) {
    if (!FIELD_NAMES.has(key)) fail(`${pathOf(path, index)}.${key}`, `unknown field (accepted: ${[...FIELD_NAMES].join(', ')})`, NO_VALUE);
  }
  const resolved: Record<string, SpecValue> = {};
  for (let f = 0; f < SPEC_FIELD_LIST.length; f++) {
    const field = SPEC_FIELD_LIST[f]!;
    const given = spec[field.name];
    // An optional field is either absent (undefined: the default) or valid; `null` is not "absent".
    const v = given === undefined ? field.default : given;
    if (!field.kind.accepts(v)) fail(`${pathOf(path, index)}.${field.name}`, field.kind.reason(v), v, field.kind.code);
    resolved[field.name] = v;
  }
  RESOLVED.add(Object.freeze(resolved));
  return resolved as unknown as ResolvedBackendSpec;
}

/**
 * Validates a whole backend list: each spec, then the cross-member laws —
 * unique ids (`DuplicateIdentity`) and one locality weight per (priority,
 * locality) group (`InconsistentTopology`). `path` names the list in messages.
 * @internal
 */
export function resolveBackendSpecs(value: unknown, path = 'backends'): ResolvedBackendSpec[] {
  if (!Array.isArray(value)) fail(path, 'must be an array', value);
  // An index loop, not map(): map() skips the holes of a sparse array, which must be refused like any non-object.
  const resolved: ResolvedBackendSpec[] = new Array<ResolvedBackendSpec>(value.length);
  for (let i = 0; i < value.length; i++) resolved[i] = resolveSpecAt(value[i], path, i);
  checkBackendSet(resolved, path);
  return resolved;
}

/**
 * The cross-member laws of a list of already validated specs: unique ids
 * (`DuplicateIdentity`) and one locality weight per (priority, locality)
 * group (`InconsistentTopology`). What {@link resolveBackendSpecs} checks
 * after validating each spec; a delta notice's result runs only this, since
 * each of its specs was validated when it arrived. @internal
 */
export function checkBackendSet(resolved: readonly ResolvedBackendSpec[], path = 'backends'): void {
  const seen = new Map<string, number>();
  // The first member's group is checked without a key (most memberships
  // have one priority and one locality); other groups through the map.
  const head = resolved[0];
  let groupWeight: Map<string, { weight: number; index: number }> | undefined;
  for (let i = 0; i < resolved.length; i++) {
    const spec = resolved[i]!;
    const first = seen.get(spec.id);
    if (first !== undefined) {
      throw new PoiseError('DuplicateIdentity', `${path}[${i}].id: duplicate id ${JSON.stringify(spec.id)} (first at ${path}[${first}])`, {
        field: `${path}[${i}].id`,
      });
    }
    seen.set(spec.id, i);
    let weight: number;
    let index: number;
    if (spec.priority === head!.priority && spec.locality === head!.locality) {
      weight = head!.localityWeight;
      index = 0;
    } else {
      groupWeight ??= new Map();
      const group = `${spec.priority}\u0000${spec.locality}`;
      const g = groupWeight.get(group);
      if (g === undefined) {
        groupWeight.set(group, { weight: spec.localityWeight, index: i });
        continue;
      }
      weight = g.weight;
      index = g.index;
    }
    if (weight !== spec.localityWeight) {
      throw new PoiseError(
        'InconsistentTopology',
        `${path}[${i}].localityWeight: ${spec.localityWeight} contradicts ${weight} at ${path}[${index}] for priority ${spec.priority}, locality ${JSON.stringify(spec.locality)}`,
        { field: `${path}[${i}].localityWeight` },
      );
    }
  }
}
