/**
 * The fields of a backend spec, each declared once in {@link SPEC_FIELDS}:
 * its name, its meaning (the TSDoc), the rule a value follows (its kind),
 * and whether it may be left out and what it then means (its default).
 * Everything else a field is derives from that entry:
 *
 * - the types: {@link BackendSpec} (as written) and {@link ResolvedBackendSpec}
 *   (every default filled in);
 * - resolve (`resolveBackendSpec`): each field checked by its kind, in
 *   declaration order (the first refused field is the one named), a left-out
 *   field given its default;
 * - equality ({@link sameSpec}): field by field, every value being a string,
 *   a number or a boolean;
 * - the compact form ({@link compactSpec}: what a membership document stores
 *   and a delta notice sends): the required fields and every other field
 *   whose value is not its default;
 * - the spec blob ({@link specValues} / {@link specFromValues}): the values
 *   as a positional array, one place per field.
 *
 * The declaration order is part of two formats. The blob's positions are
 * read only by the threads of one process (one version), so they may move.
 * The compact form's key order is not: its JSON is the input of a membership
 * document's digest, which publishers and readers of different versions must
 * compute alike, so an existing field keeps its place. A new optional field
 * is left out of the compact form while it has its default, so documents that
 * do not use it keep their bytes and their digest.
 */
import { MAX_PRIORITY } from './candidate.js';
import { ADDRESS_RULE, addressDetail, addressReason } from './address.js';
import { isIPv4, isIPv6 } from './ip.js';
import { isIntegerIn } from './validate.js';
import { MAX_WEIGHT } from './weight.js';

/** What a field's value may be: a JSON primitive, compared with `===` and still `===` to itself after a JSON round trip. */
export type SpecValue = string | number | boolean;

/** The rule a field's value follows. */
export interface FieldKind<T extends SpecValue> {
  /** Whether `value` is valid (no allocation: it runs for every field of every new spec). */
  readonly accepts: (value: unknown) => value is T;
  /** Why a value {@link FieldKind.accepts} refused is refused: the words after `field: ` in the message. */
  readonly reason: (value: unknown) => string;
  /** The `PoiseError` code of a refusal. */
  readonly code: 'InvalidConfig' | 'InvalidWeight';
}

/** One field's declaration. */
export interface SpecField<T extends SpecValue, Optional extends boolean> {
  /** The rule its value follows. */
  readonly kind: FieldKind<T>;
  /** May it be left out? */
  readonly optional: Optional;
  /** The value a left-out field takes (none for a required field). */
  readonly default: Optional extends true ? T : undefined;
}

function required<T extends SpecValue>(kind: FieldKind<T>): SpecField<T, false> {
  return { kind, optional: false, default: undefined };
}

function optional<T extends SpecValue>(kind: FieldKind<T>, value: NoInfer<T>): SpecField<T, true> {
  if (!kind.accepts(value)) throw new TypeError(`a field's default must follow its rule: ${kind.reason(value)}`);
  return { kind, optional: true, default: value };
}

/** An integer in [min, max]; `note` says in parentheses what a special value means. */
function integer(min: number, max: number, opts: { code?: FieldKind<number>['code']; note?: string } = {}): FieldKind<number> {
  const reason = `must be an integer in [${min}, ${max}]${opts.note === undefined ? '' : ` (${opts.note})`}`;
  return { accepts: (v): v is number => isIntegerIn(v, min, max), reason: () => reason, code: opts.code ?? 'InvalidConfig' };
}

/** A string of `min` to `max` UTF-16 code units. */
function text(min: number, max: number): FieldKind<string> {
  const reason = min === 0 ? `must be a string of at most ${max} characters` : `must be a string of ${min} to ${max} characters`;
  return {
    accepts: (v): v is string => typeof v === 'string' && v.length >= min && v.length <= max,
    reason: () => reason,
    code: 'InvalidConfig',
  };
}

/** One of `values`, listed in the message in their order. */
function oneOf<const V extends readonly string[]>(values: V): FieldKind<V[number]> {
  const reason = `must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}`;
  return { accepts: (v): v is V[number] => values.includes(v as string), reason: () => reason, code: 'InvalidConfig' };
}

/** `true` or `false`. */
const bool: FieldKind<boolean> = {
  accepts: (v): v is boolean => typeof v === 'boolean',
  reason: () => 'must be a boolean',
  code: 'InvalidConfig',
};

/** `host:port` (src/core/address.ts): the general rule, then the precise reason when there is one. */
const hostPort: FieldKind<string> = {
  accepts: (v): v is string => typeof v === 'string' && addressDetail(v) === undefined,
  reason: (v) => (typeof v === 'string' ? (addressReason(v) ?? ADDRESS_RULE) : ADDRESS_RULE),
  code: 'InvalidConfig',
};

/** `''` (none) or an IPv4 or IPv6 address (no brackets, no port). */
const optionalIp: FieldKind<string> = {
  accepts: (v): v is string => v === '' || (typeof v === 'string' && (isIPv4(v) || isIPv6(v))),
  reason: () => 'must be "" (none) or an IPv4 or IPv6 address without brackets or port',
  code: 'InvalidConfig',
};

/** `''` (none) or a host name (the host of a `host:port`, not an IP address). */
const hostName: FieldKind<string> = {
  accepts: (v): v is string => v === '' || (typeof v === 'string' && !/^[0-9.]+$/.test(v) && addressDetail(`${v}:1`) === undefined),
  reason: (v) =>
    typeof v === 'string' && addressReason(`${v}:1`) !== undefined
      ? `must be "" (none) or a host name: ${addressReason(`${v}:1`)}`
      : 'must be "" (none) or a host name of RFC 1123 labels (not an IP address)',
  code: 'InvalidConfig',
};

/** The largest accepted `maxInflight`. @internal */
export const MAX_INFLIGHT = 0x7fff_ffff;

/**
 * The fields of a backend spec, in their order (see the file comment for
 * what that order is part of). A field's TSDoc here is its documentation in
 * {@link BackendSpec}.
 */
export const SPEC_FIELDS = Object.freeze({
  /** Stable identity; unique within a cluster. 1–256 characters. */
  id: required(text(1, 256)),
  /** `host:port`; IPv6 hosts in brackets (`[::1]:5432`). */
  address: required(hostPort),
  /** Endpoint capacity, an integer in [1, 2^32 − 1]; default 1. */
  weight: optional(integer(1, MAX_WEIGHT, { code: 'InvalidWeight' }), 1),
  /** Failover priority, an integer in [0, 2^32 − 1]; 0 first; default 0. */
  priority: optional(integer(0, MAX_PRIORITY), 0),
  /** Locality (zone, region); default `""`. */
  locality: optional(text(0, 256), ''),
  /** The locality's configured weight in [1, 2^32 − 1]; default 1; equal across a (priority, locality) group. */
  localityWeight: optional(integer(1, MAX_WEIGHT, { code: 'InvalidWeight' }), 1),
  /**
   * Default `'ready'`. `'degraded'` is ready but used only when its priority
   * has no healthy backend left (Envoy's degraded hosts); candidates see it
   * as `'ready'`.
   */
  status: optional(oneOf(['ready', 'degraded', 'draining', 'unavailable']), 'ready'),
  /** Cap on concurrent in-flight requests (0 = unlimited); default 0. */
  maxInflight: optional(integer(0, MAX_INFLIGHT, { note: '0 = unlimited' }), 0),
  /** May use-all panic revive this backend? Default true. */
  panicEligible: optional(bool, true),
  /**
   * Database role: `'primary'`, `'replica'` or `'none'` (default). Routes
   * `acquire({ intent })`; a database health check (`postgres`, `mysql`)
   * overrides it with what the server says it is.
   */
  role: optional(oneOf(['none', 'primary', 'replica']), 'none'),
  /**
   * The backend's logical host name (the DNS name it was found under), or
   * `''` (default: none). When set, it is the HTTP `Host` and the TLS
   * `servername` of requests to this backend (`poise-lb/http`) and the host
   * name of `connect()`'s socket; `address` stays what is dialled.
   */
  hostname: optional(hostName, ''),
  /**
   * A second IP address of the same backend (the other family of a
   * dual-stack host), on `address`'s port, or `''` (default: none). Dialled
   * Happy-Eyeballs style (RFC 8305, gRPC A61): `address` first, this one
   * 250 ms later when the first has not connected; the first to connect is
   * kept.
   */
  fallbackIp: optional(optionalIp, ''),
});

type Fields = typeof SPEC_FIELDS;
type ValueOf<F> = F extends SpecField<infer T, boolean> ? T : never;
/** The fields as written: the required ones and the optional ones (both keep the table's TSDoc). */
type WrittenFields = { -readonly [K in keyof Fields as Fields[K]['optional'] extends true ? never : K]: ValueOf<Fields[K]> } & {
  -readonly [K in keyof Fields as Fields[K]['optional'] extends true ? K : never]?: ValueOf<Fields[K]>;
};

/** One backend of a membership snapshot. Only `id` and `address` are required; the fields are declared in {@link SPEC_FIELDS}. */
export interface BackendSpec extends WrittenFields {}

/** A BackendSpec with every default filled in. */
export type ResolvedBackendSpec = Required<BackendSpec>;

/** A backend's status in a membership: a candidate `Status`, or `'degraded'`. */
export type SpecStatus = ResolvedBackendSpec['status'];

/** A field name. */
export type SpecFieldName = keyof ResolvedBackendSpec;

/** One field of {@link SPEC_FIELDS} with its name, for the loops that derive from the table. @internal */
export interface SpecFieldEntry {
  readonly name: SpecFieldName;
  readonly kind: FieldKind<SpecValue>;
  readonly optional: boolean;
  readonly default: SpecValue | undefined;
}

/** {@link SPEC_FIELDS} in declaration order. @internal */
export const SPEC_FIELD_LIST: readonly SpecFieldEntry[] = Object.freeze(
  (Object.keys(SPEC_FIELDS) as SpecFieldName[]).map((name) => Object.freeze({ name, ...SPEC_FIELDS[name] })),
);

/** Field-by-field equality of two resolved specs; the same object is equal at once. @internal */
export function sameSpec(a: ResolvedBackendSpec, b: ResolvedBackendSpec): boolean {
  if (a === b) return true;
  for (let f = 0; f < SPEC_FIELD_LIST.length; f++) {
    const name = SPEC_FIELD_LIST[f]!.name;
    if (a[name] !== b[name]) return false;
  }
  return true;
}

/** A spec with its default-valued fields left out, the others in declaration order: what is stored and sent. @internal */
export function compactSpec(spec: ResolvedBackendSpec): BackendSpec {
  const out: Record<string, SpecValue> = {};
  for (let f = 0; f < SPEC_FIELD_LIST.length; f++) {
    const field = SPEC_FIELD_LIST[f]!;
    const value = spec[field.name];
    if (!field.optional || value !== field.default) out[field.name] = value;
  }
  return out as unknown as BackendSpec;
}

/** The spec's values in declaration order (the spec blob's positional form). @internal */
export function specValues(spec: ResolvedBackendSpec): SpecValue[] {
  const values = new Array<SpecValue>(SPEC_FIELD_LIST.length);
  for (let f = 0; f < values.length; f++) values[f] = spec[SPEC_FIELD_LIST[f]!.name];
  return values;
}

/** The spec {@link specValues} gave these values for (not validated again: the blob holds only resolved specs). @internal */
export function specFromValues(values: readonly SpecValue[]): ResolvedBackendSpec {
  const spec: Record<string, SpecValue> = {};
  for (let f = 0; f < SPEC_FIELD_LIST.length; f++) spec[SPEC_FIELD_LIST[f]!.name] = values[f]!;
  return spec as unknown as ResolvedBackendSpec;
}
