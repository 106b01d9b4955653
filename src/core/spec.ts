/**
 * BackendSpec: one backend as the control plane describes it, and its
 * validation. Pure: the membership document parser, the Balancer and the CLI
 * all validate through here, so every layer rejects the same input with the
 * same message, naming the exact path and the reason:
 *
 *     backends[3].weight: must be an integer in [1, 4294967295], got -2
 */
import { MAX_PRIORITY, isStatus, type Status } from './candidate.js';
import { PoiseError, describe } from './errors.js';
import { MAX_WEIGHT, isValidWeight } from './weight.js';

/** One backend of a membership snapshot. Only `id` and `address` are required. */
export interface BackendSpec {
  /** Stable identity; unique within a cluster. 1–256 characters. */
  id: string;
  /** `host:port`; IPv6 hosts in brackets (`[::1]:5432`). */
  address: string;
  /** Endpoint capacity, an integer in [1, 2^32 − 1]; default 1. */
  weight?: number;
  /** Failover priority, an integer in [0, 2^32 − 1]; 0 first; default 0. */
  priority?: number;
  /** Locality (zone, region); default `""`. */
  locality?: string;
  /** The locality's configured weight in [1, 2^32 − 1]; default 1; equal across a (priority, locality) group. */
  localityWeight?: number;
  /** Default `'ready'`. */
  status?: Status;
  /** Cap on concurrent in-flight requests (0 = unlimited); default 0. */
  maxInflight?: number;
  /** May use-all panic revive this backend? Default true. */
  panicEligible?: boolean;
}

/** A BackendSpec with every default filled in. */
export type ResolvedBackendSpec = Required<BackendSpec>;

/** A versioned membership: what a source hands the Balancer. */
export interface MembershipSnapshot {
  /** Monotonic version; a source never applies an older one. */
  version: number;
  /** Cluster name, when the source has one. */
  cluster?: string;
  backends: readonly BackendSpec[];
}

const SPEC_FIELDS: ReadonlySet<string> = new Set([
  'id',
  'address',
  'weight',
  'priority',
  'locality',
  'localityWeight',
  'status',
  'maxInflight',
  'panicEligible',
]);

/** The largest accepted `maxInflight`. */
export const MAX_INFLIGHT = 0x7fff_ffff;

function fail(field: string, reason: string, got?: unknown, code: 'InvalidConfig' | 'InvalidWeight' = 'InvalidConfig'): never {
  const suffix = got === NO_VALUE ? '' : `, got ${describe(got)}`;
  throw new PoiseError(code, `${field}: ${reason}${suffix}`, { field });
}
const NO_VALUE = Symbol('none');

/** Parses `host:port`; returns undefined when malformed. */
export function parseAddress(address: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(address);
  if (m === null) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  return { host: (m[1] ?? m[2])!, port };
}

/**
 * Validates one spec and fills its defaults. `path` prefixes field names in
 * messages (`backends[3]`). Unknown fields are rejected: a typo such as
 * `wieght` must not silently mean "weight 1".
 */
export function resolveBackendSpec(value: unknown, path = 'backend'): ResolvedBackendSpec {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(path, 'must be an object', value);
  const spec = value as Record<string, unknown>;
  for (const key of Object.keys(spec)) {
    if (!SPEC_FIELDS.has(key)) fail(`${path}.${key}`, `unknown field (accepted: ${[...SPEC_FIELDS].join(', ')})`, NO_VALUE);
  }
  const { id, address } = spec;
  if (typeof id !== 'string' || id.length === 0 || id.length > 256) {
    fail(`${path}.id`, 'must be a string of 1 to 256 characters', id);
  }
  if (typeof address !== 'string' || parseAddress(address) === undefined) {
    fail(`${path}.address`, 'must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port")', address);
  }
  const weight = spec['weight'] ?? 1;
  if (!isValidWeight(weight)) fail(`${path}.weight`, `must be an integer in [1, ${MAX_WEIGHT}]`, weight, 'InvalidWeight');
  const priority = spec['priority'] ?? 0;
  if (typeof priority !== 'number' || !Number.isInteger(priority) || priority < 0 || priority > MAX_PRIORITY) {
    fail(`${path}.priority`, `must be an integer in [0, ${MAX_PRIORITY}]`, priority);
  }
  const locality = spec['locality'] ?? '';
  if (typeof locality !== 'string' || locality.length > 256) fail(`${path}.locality`, 'must be a string of at most 256 characters', locality);
  const localityWeight = spec['localityWeight'] ?? 1;
  if (!isValidWeight(localityWeight)) {
    fail(`${path}.localityWeight`, `must be an integer in [1, ${MAX_WEIGHT}]`, localityWeight, 'InvalidWeight');
  }
  const status = spec['status'] ?? 'ready';
  if (!isStatus(status)) fail(`${path}.status`, 'must be one of "ready", "draining", "unavailable"', status);
  const maxInflight = spec['maxInflight'] ?? 0;
  if (typeof maxInflight !== 'number' || !Number.isInteger(maxInflight) || maxInflight < 0 || maxInflight > MAX_INFLIGHT) {
    fail(`${path}.maxInflight`, `must be an integer in [0, ${MAX_INFLIGHT}] (0 = unlimited)`, maxInflight);
  }
  const panicEligible = spec['panicEligible'] ?? true;
  if (typeof panicEligible !== 'boolean') fail(`${path}.panicEligible`, 'must be a boolean', panicEligible);
  return { id, address, weight, priority, locality, localityWeight, status, maxInflight, panicEligible };
}

/**
 * Validates a whole backend list: each spec, then the cross-member laws —
 * unique ids (`DuplicateIdentity`) and one locality weight per (priority,
 * locality) group (`InconsistentTopology`). `path` names the list in messages.
 */
export function resolveBackendSpecs(value: unknown, path = 'backends'): ResolvedBackendSpec[] {
  if (!Array.isArray(value)) fail(path, 'must be an array', value);
  const resolved = value.map((v, i) => resolveBackendSpec(v, `${path}[${i}]`));
  const seen = new Map<string, number>();
  const groupWeight = new Map<string, { weight: number; index: number }>();
  resolved.forEach((spec, i) => {
    const first = seen.get(spec.id);
    if (first !== undefined) {
      throw new PoiseError('DuplicateIdentity', `${path}[${i}].id: duplicate id ${JSON.stringify(spec.id)} (first at ${path}[${first}])`, {
        field: `${path}[${i}].id`,
      });
    }
    seen.set(spec.id, i);
    const group = `${spec.priority}\u0000${spec.locality}`;
    const g = groupWeight.get(group);
    if (g === undefined) groupWeight.set(group, { weight: spec.localityWeight, index: i });
    else if (g.weight !== spec.localityWeight) {
      throw new PoiseError(
        'InconsistentTopology',
        `${path}[${i}].localityWeight: ${spec.localityWeight} contradicts ${g.weight} at ${path}[${g.index}] for priority ${spec.priority}, locality ${JSON.stringify(spec.locality)}`,
        { field: `${path}[${i}].localityWeight` },
      );
    }
  });
  return resolved;
}
