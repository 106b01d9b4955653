/**
 * Backend addresses: `host:port`, the host a hostname of RFC 1123 labels, a
 * dotted-quad IPv4 address or a bracketed IPv6 address with an optional zone
 * id. Pure; the spec's `address` field and every flag that takes an address
 * validate through here, with the same words:
 *
 *     backends[2].address: must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"); "999.999.999.999" is not an IPv4 address ...
 */
import { isIPv4, isIPv6 } from './ip.js';

/** One DNS label (RFC 1123), with `_` allowed as SRV and many internal names use it. */
const LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;
/** An IPv6 zone id (RFC 6874 unreserved characters): `eth0`, `en0`, `3`. */
const ZONE = /^[A-Za-z0-9._~-]{1,64}$/;

/**
 * Why `host` (of `host:port`, brackets removed) is not a valid host, or
 * undefined when it is. Accepted: a hostname of RFC 1123 labels (1–63
 * characters of `[A-Za-z0-9_-]`, no leading or trailing hyphen, at most 253
 * characters in all), a dotted-quad IPv4 address with every octet in
 * [0, 255], and (bracketed) an IPv6 address with an optional zone id.
 */
function hostProblem(host: string, bracketed: boolean): string | undefined {
  if (bracketed) {
    const pct = host.indexOf('%');
    const ip = pct < 0 ? host : host.slice(0, pct);
    if (!isIPv6(ip)) return `${JSON.stringify(host)} is not an IPv6 address`;
    if (pct >= 0 && !ZONE.test(host.slice(pct + 1)))
      return `${JSON.stringify(host)} has a zone id that is not 1 to 64 characters of [A-Za-z0-9._~-]`;
    return undefined;
  }
  if (host.includes(':')) return 'an IPv6 host must be in brackets';
  // All digits and dots: an IPv4 address or nothing (never a hostname: no top-level domain is numeric).
  if (/^[0-9.]+$/.test(host) && /[0-9]/.test(host)) {
    return isIPv4(host) ? undefined : `${JSON.stringify(host)} is not an IPv4 address (four decimal octets, each in [0, 255])`;
  }
  if (host.length > 253) return `host is ${host.length} characters, more than 253`;
  for (const label of host.split('.')) {
    if (!LABEL.test(label)) {
      return `host ${JSON.stringify(host)} has the label ${JSON.stringify(label)}, not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`;
    }
  }
  return undefined;
}

/** A URL scheme at the start of an address (`http://`, `redis://`, `tcp://`). */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

/**
 * Why an address that starts with a URL scheme is refused, with the
 * address to give instead when the rest (up to a path) is one.
 */
function schemeProblem(address: string, scheme: string): string {
  const rest = address.slice(scheme.length).split('/')[0]!;
  const instead = typeof splitAddress(rest) === 'string' ? '' : ` (${JSON.stringify(rest)})`;
  return `${JSON.stringify(scheme)} is a URL scheme: give HOST:PORT without it${instead}`;
}

/**
 * Splits and checks `host:port`: the parts, or the reason it is refused
 * (`''` when the shape itself is wrong: no port, a port outside [1, 65535]).
 */
function splitAddress(address: string): { host: string; port: number } | string {
  const scheme = SCHEME.exec(address);
  if (scheme !== null) return schemeProblem(address, scheme[0]);
  const colon = address.lastIndexOf(':');
  const portText = address.slice(colon + 1);
  if (colon < 0 || !/^\d{1,5}$/.test(portText)) return '';
  const port = Number(portText);
  if (port < 1 || port > 65535) return '';
  const raw = address.slice(0, colon);
  const bracketed = raw.startsWith('[') && raw.endsWith(']') && raw.length >= 2;
  const host = bracketed ? raw.slice(1, -1) : raw;
  if (host.length === 0) return '';
  const problem = hostProblem(host, bracketed);
  return problem ?? { host, port };
}

/**
 * Parses `host:port` (IPv6 as `[addr]:port` or `[addr%zone]:port`); returns
 * undefined when malformed. The host is returned without brackets.
 *
 * @example
 * parseAddress('[fe80::1%eth0]:5432'); // { host: 'fe80::1%eth0', port: 5432 }
 * parseAddress('999.999.999.999:80');  // undefined
 * @internal
 */
export function parseAddress(address: string): { host: string; port: number } | undefined {
  if (typeof address !== 'string') return undefined;
  const parts = splitAddress(address);
  return typeof parts === 'string' ? undefined : parts;
}

/** The general rule an address must follow, as messages state it. @internal */
export const ADDRESS_RULE = 'must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port")';

/**
 * Why `address` is refused: undefined when it is valid, `''` when its shape
 * is wrong (no port, a port outside [1, 65535], an empty host), else the
 * precise reason (`"999.999.999.999" is not an IPv4 address ...`).
 * @internal
 */
export function addressDetail(address: string): string | undefined {
  if (VALID_ADDRESSES.has(address)) return undefined;
  const parts = splitAddress(address);
  if (typeof parts === 'string') return parts;
  // Validity is a function of the string alone: remember it (bounded), since
  // every membership change re-validates every backend's address.
  if (VALID_ADDRESSES.size >= MAX_REMEMBERED_ADDRESSES) VALID_ADDRESSES.clear();
  VALID_ADDRESSES.add(address);
  return undefined;
}

/** Addresses {@link splitAddress} accepted, so that re-validating an unchanged membership is a set lookup. */
const VALID_ADDRESSES = new Set<string>();
const MAX_REMEMBERED_ADDRESSES = 65_536;

/** The message of a refused address ({@link ADDRESS_RULE}, then the precise reason when there is one), or undefined when it is valid. @internal */
export function addressReason(address: string): string | undefined {
  const detail = addressDetail(address);
  if (detail === undefined) return undefined;
  return `${ADDRESS_RULE}${detail === '' ? '' : `; ${detail}`}`;
}
