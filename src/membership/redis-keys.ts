/**
 * The Redis layout of one cluster's membership, and the codec of the value
 * stored there and published on change.
 *
 *   <prefix>:<cluster>:snapshot   string  {"version":N,"lineage":"<hex>","document":{"cluster":...,"backends":[...]}}
 *   <prefix>:<cluster>:notices    channel the same JSON, or a delta notice (below), published by the same script call
 *
 * On a Redis Cluster the cluster name is a hash tag, so the key and the
 * (sharded) channel hash to one slot and the write script, the SPUBLISH and
 * the SSUBSCRIBE all run on that slot's master:
 *
 *   <prefix>:{<cluster>}:snapshot   <prefix>:{<cluster>}:notices
 *
 * (names cannot contain braces, so the tag is exactly the cluster name).
 *
 * A notice is either the whole snapshot (what `apply` of a large change,
 * and every publisher before delta notices, sends) or a delta notice
 *
 *   {"version":N,"lineage":"<hex>","base":B,"ops":[...],"digest":"<40 hex>"}
 *
 * (delta.ts): a reader holding exactly version B of that lineage applies the
 * ops, validates the result as a snapshot and checks its digest. A reader
 * that holds version N − 1 (full) or B (delta) applies the notice without a
 * round trip; every other case is healed by re-reading the snapshot key,
 * which is the truth.
 *
 * The lineage names one version line: the write script draws a new one when
 * it writes a cluster's first version into an empty Redis (and keeps it on
 * every later write), so a reader can tell "Redis lost its data and was
 * re-seeded from version 1" from "an old notice".
 */
import { PoiseError } from '../core/errors.js';
import { checkSize, parseText, resolveDocument, validateVersion, type ResolvedDocument } from './document.js';
import { validateName } from './name.js';
import { DIGEST, resolveOps, type ResolvedDeltaOp } from './delta.js';

/** Default key prefix. @internal */
export const DEFAULT_PREFIX = 'poise';

/** A lineage id: 32 lowercase hex digits (128 random bits). @internal */
export const LINEAGE = /^[0-9a-f]{32}$/;

/** The key and channel names of one cluster. */
export interface MembershipKeys {
  /** String key holding `{ version, lineage, document }`. */
  snapshot: string;
  /** Pub/sub channel carrying change notices. */
  channel: string;
}

/**
 * Names the key and channel of `cluster` under `prefix` (both validated);
 * `hashTag` (Redis Cluster) wraps the cluster name in braces so both land in
 * one hash slot. @internal
 */
export function membershipKeys(cluster: string, prefix = DEFAULT_PREFIX, opts: { hashTag?: boolean } = {}): MembershipKeys {
  validateName(cluster, 'cluster');
  validateName(prefix, 'prefix');
  const c = opts.hashTag === true ? `{${cluster}}` : cluster;
  return { snapshot: `${prefix}:${c}:snapshot`, channel: `${prefix}:${c}:notices` };
}

/**
 * The fleet watcher's lease key and its token counter, beside the snapshot
 * key (`<prefix>:<cluster>:watcher`, `...:watcher-token`; with `hashTag`, in
 * the snapshot key's slot, since the write script reads the lease). @internal
 */
export function watcherKeys(cluster: string, prefix = DEFAULT_PREFIX, opts: { hashTag?: boolean } = {}): { lease: string; token: string } {
  const base = membershipKeys(cluster, prefix, opts).snapshot.replace(/:snapshot$/, '');
  return { lease: `${base}:watcher`, token: `${base}:watcher-token` };
}

/** A decoded snapshot or notice. @internal */
export interface Envelope {
  /** The stored version, in [1, 2^53 − 1]. */
  version: number;
  /** The lineage, when the value has one (values written before lineages existed do not). */
  lineage: string | undefined;
  /** The validated document. */
  document: ResolvedDocument;
}

const ENVELOPE_FIELDS = ['version', 'lineage', 'document'];
const DELTA_FIELDS = ['version', 'lineage', 'base', 'ops', 'digest'];

/** A decoded delta notice: ops that turn the document at `base` into the one at `version`. @internal */
export interface DeltaNotice {
  /** The new version, in [1, 2^53 − 1]. */
  version: number;
  /** The lineage of both versions. */
  lineage: string;
  /** The version the ops apply to, below `version`. */
  base: number;
  /** The validated operations. */
  ops: ResolvedDeltaOp[];
  /** SHA-1 (hex) of the canonical JSON of the resulting document. */
  digest: string;
}

/** A decoded notice: the whole snapshot, or a delta. @internal */
export type Notice = { kind: 'full'; envelope: Envelope } | { kind: 'delta'; delta: DeltaNotice };

/**
 * Decodes a notice: a delta notice when it has a `base` field, else the
 * whole snapshot ({@link decodeEnvelope}). Throws `Corrupt` naming the field.
 * @internal
 */
export function decodeNotice(text: string, opts: { cluster: string; maxBytes: number }): Notice {
  // A delta notice has "base" right after the lineage; anything else is decoded (and refused) as a snapshot.
  const delta = /^\{"version":\d+,"lineage":"[0-9a-f]{32}","base":/.test(text);
  if (!delta) return { kind: 'full', envelope: decodeEnvelope(text, { ...opts, what: 'notice' }) };
  try {
    return { kind: 'delta', delta: decodeDelta(text, opts.maxBytes) };
  } catch (err) {
    if (!(err instanceof PoiseError)) throw err;
    throw new PoiseError('Corrupt', err.message, { field: err.field ?? 'notice', cause: err });
  }
}

function decodeDelta(text: string, maxBytes: number): DeltaNotice {
  checkSize(text, maxBytes, 'notice');
  const value = parseText(text, 'json', 'notice') as Record<string, unknown>;
  for (const key of Object.keys(value)) {
    if (!DELTA_FIELDS.includes(key)) {
      throw new PoiseError('InvalidConfig', `notice.${key}: unknown field of a delta notice (accepted: ${DELTA_FIELDS.join(', ')})`, {
        field: `notice.${key}`,
      });
    }
  }
  const version = validateVersion(value['version'], 'notice.version');
  const base = validateVersion(value['base'], 'notice.base');
  if (base < 1 || base >= version) {
    throw new PoiseError('InvalidConfig', `notice.base: must be in [1, version − 1] = [1, ${version - 1}], got ${base}`, {
      field: 'notice.base',
    });
  }
  const digest = value['digest'];
  if (typeof digest !== 'string' || !DIGEST.test(digest)) {
    throw new PoiseError('InvalidConfig', `notice.digest: must be 40 lowercase hex digits, got ${JSON.stringify(digest)}`, {
      field: 'notice.digest',
    });
  }
  // The prefix test above guarantees a valid lineage string.
  return { version, lineage: value['lineage'] as string, base, ops: resolveOps(value['ops'], 'notice.ops'), digest };
}

/** The JSON of an envelope, in the field order the write script reads back. @internal */
export function envelopeJson(version: number, lineage: string | undefined, documentJson: string): string {
  return `{"version":${version},${lineage === undefined ? '' : `"lineage":"${lineage}",`}"document":${documentJson}}`;
}

/**
 * Decodes and validates a snapshot or notice: size first, then JSON, then
 * `{ version, lineage?, document }` with the document validated in full and
 * its cluster required to be `cluster`. Throws `Corrupt` naming the field
 * (`notice.document.backends[2].weight: ...`); the validation error that
 * found it is the `cause`.
 * @internal
 */
export function decodeEnvelope(text: string, opts: { cluster: string; maxBytes: number; what: 'snapshot' | 'notice' }): Envelope {
  try {
    return decode(text, opts);
  } catch (err) {
    if (!(err instanceof PoiseError)) throw err;
    throw new PoiseError('Corrupt', err.message, { field: err.field ?? opts.what, cause: err });
  }
}

function decode(text: string, opts: { cluster: string; maxBytes: number; what: 'snapshot' | 'notice' }): Envelope {
  const { what } = opts;
  checkSize(text, opts.maxBytes, what);
  const value = parseText(text, 'json', what);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new PoiseError('InvalidConfig', `${what}: must be an object { version, lineage, document }`, { field: what });
  }
  const env = value as Record<string, unknown>;
  for (const key of Object.keys(env)) {
    if (!ENVELOPE_FIELDS.includes(key)) {
      throw new PoiseError('InvalidConfig', `${what}.${key}: unknown field (accepted: ${ENVELOPE_FIELDS.join(', ')})`, {
        field: `${what}.${key}`,
      });
    }
  }
  const version = validateVersion(env['version'], `${what}.version`);
  if (version < 1) throw new PoiseError('InvalidConfig', `${what}.version: must be >= 1, got 0`, { field: `${what}.version` });
  const lineage = env['lineage'];
  if (lineage !== undefined && (typeof lineage !== 'string' || !LINEAGE.test(lineage))) {
    throw new PoiseError('InvalidConfig', `${what}.lineage: must be 32 lowercase hex digits, got ${JSON.stringify(lineage)}`, {
      field: `${what}.lineage`,
    });
  }
  const document = resolveDocument(env['document'], `${what}.document`);
  if (document.cluster !== opts.cluster) {
    throw new PoiseError(
      'InvalidConfig',
      `${what}.document.cluster: must be ${JSON.stringify(opts.cluster)} (the cluster this reader follows), got ${JSON.stringify(document.cluster)}`,
      { field: `${what}.document.cluster` },
    );
  }
  return { version, lineage, document };
}

/**
 * The hash of `cluster`'s fleet connection budget (redis-script.ts,
 * `BUDGET_SCRIPT`): `<prefix>:{<cluster>}:budget:v1`. Versioned, so a later
 * layout of the hash takes a new key instead of misreading this one; the
 * cluster is a hash tag, as for the retry budget. @internal
 */
export function budgetKey(cluster: string, prefix = DEFAULT_PREFIX): string {
  validateName(cluster, 'cluster');
  validateName(prefix, 'prefix');
  return `${prefix}:{${cluster}}:budget:v1`;
}
