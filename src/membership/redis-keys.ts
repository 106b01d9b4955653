/**
 * The Redis layout of one cluster's membership, and the codec of the value
 * stored there and published on change.
 *
 *   <prefix>:<cluster>:snapshot   string  {"version":N,"lineage":"<hex>","document":{"cluster":...,"backends":[...]}}
 *   <prefix>:<cluster>:notices    channel the same JSON, published by the same script call
 *
 * On a Redis Cluster the cluster name is a hash tag, so the key and the
 * (sharded) channel hash to one slot and the write script, the SPUBLISH and
 * the SSUBSCRIBE all run on that slot's master:
 *
 *   <prefix>:{<cluster>}:snapshot   <prefix>:{<cluster>}:notices
 *
 * (names cannot contain braces, so the tag is exactly the cluster name).
 *
 * The notice carries the whole snapshot, so a reader that holds version
 * N − 1 applies notice N without a round trip; any other gap is healed by
 * re-reading the snapshot key, which is the truth.
 *
 * The lineage names one version line: the write script draws a new one when
 * it writes a cluster's first version into an empty Redis (and keeps it on
 * every later write), so a reader can tell "Redis lost its data and was
 * re-seeded from version 1" from "an old notice".
 */
import { PoiseError } from '../core/errors.js';
import { checkSize, parseText, resolveDocument, validateVersion, type ResolvedDocument } from './document.js';
import { validateName } from './name.js';

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
