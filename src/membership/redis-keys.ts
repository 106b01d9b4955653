/**
 * The Redis layout of one cluster's membership, and the codec of the value
 * stored there and published on change.
 *
 *   {prefix}:{cluster}:snapshot   string  {"version":N,"document":{"cluster":...,"backends":[...]}}
 *   {prefix}:{cluster}:notices    channel the same JSON, published by the same script call
 *
 * The notice carries the whole snapshot, so a reader that holds version
 * N − 1 applies notice N without a round trip; any other gap is healed by
 * re-reading the snapshot key, which is the truth.
 */
import { PoiseError } from '../core/errors.js';
import { checkSize, parseText, resolveDocument, validateName, validateVersion, type ResolvedDocument } from './document.js';

/** Default key prefix. */
export const DEFAULT_PREFIX = 'poise';

/** The key and channel names of one cluster. */
export interface MembershipKeys {
  /** String key holding `{ version, document }`. */
  snapshot: string;
  /** Pub/sub channel carrying change notices. */
  channel: string;
}

/** Names the key and channel of `cluster` under `prefix` (both validated). */
export function membershipKeys(cluster: string, prefix = DEFAULT_PREFIX): MembershipKeys {
  validateName(cluster, 'cluster');
  validateName(prefix, 'prefix');
  return { snapshot: `${prefix}:${cluster}:snapshot`, channel: `${prefix}:${cluster}:notices` };
}

/** A decoded snapshot or notice. */
export interface Envelope {
  /** The stored version (>= 1). */
  version: number;
  /** The validated document. */
  document: ResolvedDocument;
}

/**
 * Decodes and validates a snapshot or notice: size first, then JSON, then
 * `{ version, document }` with the document validated in full and its
 * cluster required to be `cluster`. Throws {@link PoiseError} naming the
 * field (`notice.document.backends[2].weight: ...`).
 */
export function decodeEnvelope(text: string, opts: { cluster: string; maxBytes: number; what: 'snapshot' | 'notice' }): Envelope {
  const { what } = opts;
  checkSize(text, opts.maxBytes, what);
  const value = parseText(text, 'json', what);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new PoiseError('InvalidConfig', `${what}: must be an object { version, document }`, { field: what });
  }
  const env = value as Record<string, unknown>;
  for (const key of Object.keys(env)) {
    if (key !== 'version' && key !== 'document') {
      throw new PoiseError('InvalidConfig', `${what}.${key}: unknown field (accepted: version, document)`, { field: `${what}.${key}` });
    }
  }
  const version = validateVersion(env['version'], `${what}.version`);
  if (version < 1) throw new PoiseError('InvalidConfig', `${what}.version: must be >= 1, got 0`, { field: `${what}.version` });
  const document = resolveDocument(env['document'], `${what}.document`);
  if (document.cluster !== opts.cluster) {
    throw new PoiseError(
      'InvalidConfig',
      `${what}.document.cluster: must be ${JSON.stringify(opts.cluster)} (the cluster this reader follows), got ${JSON.stringify(document.cluster)}`,
      { field: `${what}.document.cluster` },
    );
  }
  return { version, document };
}
