/**
 * The PROXY protocol (HAProxy's proxy-protocol.txt), versions 1 and 2: the
 * header a balancer puts in front of a TCP stream so the next hop learns the
 * original client address. {@link encodeProxyV1} / {@link encodeProxyV2} build
 * it for `--send-proxy` / `--send-proxy-v2`; {@link parseProxyHeader} reads it
 * for `--accept-proxy` (either version, detected by the first bytes).
 *
 * The parser accepts exactly the specification's grammar and nothing more:
 * v1 addresses in the text form of their family (no zone id, no leading
 * zeros), ports in [0, 65535] without leading zeros, a line of at most 107
 * bytes; v2 address blocks at least as long as their family needs. Addresses
 * come out in canonical text, so nothing of a client's text reaches a
 * backend verbatim.
 */
import { PoiseError } from '../core/errors.js';

/** An endpoint of a proxied connection. */
export interface ProxyEndpoint {
  /** IPv4 dotted quad or IPv6 text (no brackets); IPv4-mapped IPv6 is written as IPv4. */
  address: string;
  port: number;
}

/** What a header said. `source` is absent for v1 `UNKNOWN` and v2 `LOCAL` / unspecified family (use the real peer). */
export interface ProxyHeader {
  version: 1 | 2;
  source?: ProxyEndpoint;
  destination?: ProxyEndpoint;
  /** Bytes the header took (the stream's payload starts after them). */
  length: number;
}

/** v1 lines are at most 107 bytes, CRLF included (the spec's worst case, TCP6). */
export const V1_MAX = 107;
/** The v2 signature. */
export const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V1_PREFIX = Buffer.from('PROXY ', 'latin1');

const DECIMAL_OCTET = /^(0|[1-9]\d{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/**
 * The four bytes of dotted-quad IPv4 text: four decimals in [0, 255], no
 * sign, no leading zero (inet_pton, and so HAProxy, refuses those as
 * possible octal), nothing else. Undefined when the text is not one.
 */
function ipv4Bytes(text: string): Uint8Array | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!DECIMAL_OCTET.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

/** The groups of a colon-separated run of 1–4 hex digits each ('' is none); undefined for anything else. */
function hexGroups(part: string): number[] | undefined {
  if (part === '') return [];
  const out: number[] = [];
  for (const g of part.split(':')) {
    if (!HEX_GROUP.test(g)) return undefined;
    out.push(parseInt(g, 16));
  }
  return out;
}

/**
 * The 16 bytes of IPv6 text in the forms of RFC 4291 section 2.2: eight
 * groups of one to four hex digits, at most one `::` standing for one or more
 * zero groups, optionally the last 32 bits as dotted-quad IPv4. No zone id
 * (`%eth0`, RFC 4007): a zone names an interface of the host that wrote it,
 * means nothing to the next hop, and the PROXY grammar has none.
 * Undefined when the text is not one.
 */
function ipv6Bytes(text: string): Uint8Array | undefined {
  let hex = text;
  const lastColon = text.lastIndexOf(':');
  if (lastColon < 0) return undefined;
  if (text.includes('.', lastColon)) {
    const q = ipv4Bytes(text.slice(lastColon + 1));
    if (q === undefined) return undefined;
    // The dotted tail becomes its two hex groups; the rest parses as one form.
    hex = `${text.slice(0, lastColon + 1)}${((q[0]! << 8) | q[1]!).toString(16)}:${((q[2]! << 8) | q[3]!).toString(16)}`;
  }
  const gap = hex.indexOf('::');
  let words: number[];
  if (gap < 0) {
    const all = hexGroups(hex);
    if (all === undefined || all.length !== 8) return undefined;
    words = all;
  } else {
    if (hex.indexOf('::', gap + 1) >= 0) return undefined;
    const head = hexGroups(hex.slice(0, gap));
    const rest = hexGroups(hex.slice(gap + 2));
    if (head === undefined || rest === undefined || head.length + rest.length > 7) return undefined;
    words = [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = words[i]! >> 8;
    out[2 * i + 1] = words[i]! & 0xff;
  }
  return out;
}

/** True for the IPv4-mapped prefix `::ffff:0:0/96`. */
function isMapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** RFC 5952 text of 16 address bytes (longest zero run of two or more groups compressed; IPv4-mapped as `::ffff:a.b.c.d`). */
function ipv6Text(b: Uint8Array, at: number): string {
  if (isMapped(b.subarray(at, at + 16))) return `::ffff:${b[at + 12]}.${b[at + 13]}.${b[at + 14]}.${b[at + 15]}`;
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push((b[at + 2 * i]! << 8) | b[at + 2 * i + 1]!);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** The text of an address of family `fam` from its bytes; IPv4-mapped IPv6 comes out as IPv4. */
function addressText(fam: 4 | 6, b: Uint8Array, at = 0): string {
  if (fam === 4 || isMapped(b.subarray(at, at + 16))) {
    const o = fam === 4 ? at : at + 12;
    return `${b[o]}.${b[o + 1]}.${b[o + 2]}.${b[o + 3]}`;
  }
  return ipv6Text(b, at);
}

/** `::ffff:a.b.c.d` → `a.b.c.d`; other text unchanged. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && ipv4Bytes(address.slice(7)) !== undefined ? address.slice(7) : address;
}

/**
 * Family and bytes of an endpoint's address for an outgoing header;
 * IPv4-mapped IPv6 counts as IPv4. A zone id (a link-local peer's
 * `remoteAddress` may carry one) is dropped: the next hop could not use it.
 * Throws `PoiseError` for text that is no IP address.
 */
function addressBytes(address: string): { fam: 4 | 6; bytes: Uint8Array } {
  const zone = address.indexOf('%');
  const a = zone < 0 ? address : address.slice(0, zone);
  const v4 = ipv4Bytes(a);
  if (v4 !== undefined) return { fam: 4, bytes: v4 };
  const v6 = ipv6Bytes(a);
  if (v6 !== undefined) return isMapped(v6) ? { fam: 4, bytes: v6.slice(12) } : { fam: 6, bytes: v6 };
  throw new PoiseError('InvalidConfig', `PROXY header: ${JSON.stringify(address)} is not an IP address`, { field: 'address' });
}

/** IPv4 bytes as IPv4-mapped IPv6 bytes. */
function mappedBytes(v4: Uint8Array): Uint8Array {
  const out = new Uint8Array(16);
  out[10] = 0xff;
  out[11] = 0xff;
  out.set(v4, 12);
  return out;
}

/** Both endpoints in one family (a v4/v6 mix is written as IPv6 with the v4 address mapped), ports checked. */
function pair(source: ProxyEndpoint, destination: ProxyEndpoint): [4 | 6, Uint8Array, Uint8Array] {
  for (const [which, p] of [
    ['source', source.port],
    ['destination', destination.port],
  ] as const) {
    if (!Number.isInteger(p) || p < 0 || p > 65535) {
      throw new PoiseError('InvalidConfig', `PROXY header: ${which} port must be an integer in [0, 65535], got ${p}`, { field: 'port' });
    }
  }
  const s = addressBytes(source.address);
  const d = addressBytes(destination.address);
  if (s.fam === d.fam) return [s.fam, s.bytes, d.bytes];
  return [6, s.fam === 4 ? mappedBytes(s.bytes) : s.bytes, d.fam === 4 ? mappedBytes(d.bytes) : d.bytes];
}

/**
 * The v1 text header for `source → destination`. Both of one family: a v4
 * source with a v6 destination is written as TCP6 with the v4 address
 * mapped. Addresses are written in canonical text from their bytes. Throws
 * `PoiseError` for an address or port the header cannot carry.
 *
 * @example
 * encodeProxyV1({ address: '127.0.0.1', port: 5000 }, { address: '127.0.0.1', port: 6000 });
 * // 'PROXY TCP4 127.0.0.1 127.0.0.1 5000 6000\r\n'
 */
export function encodeProxyV1(source: ProxyEndpoint, destination: ProxyEndpoint): Buffer {
  const [fam, src, dst] = pair(source, destination);
  const text = (b: Uint8Array): string => (fam === 4 ? addressText(4, b) : ipv6Text(b, 0));
  return Buffer.from(`PROXY TCP${fam} ${text(src)} ${text(dst)} ${source.port} ${destination.port}\r\n`, 'latin1');
}

/** The v2 binary header for `source → destination` (command PROXY, transport STREAM, no TLVs). Throws as {@link encodeProxyV1}. */
export function encodeProxyV2(source: ProxyEndpoint, destination: ProxyEndpoint): Buffer {
  const [fam, src, dst] = pair(source, destination);
  const addrLen = fam === 4 ? 12 : 36;
  const out = Buffer.alloc(16 + addrLen);
  V2_SIGNATURE.copy(out, 0);
  out[12] = 0x21; // version 2, command PROXY
  out[13] = fam === 4 ? 0x11 : 0x21; // AF_INET / AF_INET6, SOCK_STREAM
  out.writeUInt16BE(addrLen, 14);
  const n = fam === 4 ? 4 : 16;
  out.set(src, 16);
  out.set(dst, 16 + n);
  out.writeUInt16BE(source.port, 16 + 2 * n);
  out.writeUInt16BE(destination.port, 18 + 2 * n);
  return out;
}

function malformed(reason: string): never {
  throw new PoiseError('Corrupt', `PROXY header: ${reason}`, { field: 'proxy-header' });
}

const PORT = /^(0|[1-9]\d{0,4})$/;

function v1Port(text: string | undefined, which: string): number {
  const p = text !== undefined && PORT.test(text) ? Number(text) : -1;
  if (p < 0 || p > 65535) malformed(`v1 ${which} port must be a decimal in [0, 65535], got ${JSON.stringify(text)}`);
  return p;
}

/** The canonical text of a v1 address of family `fam` (that family's grammar exactly); refuses anything else. */
function v1Address(text: string, fam: 4 | 6, which: string): string {
  const bytes = fam === 4 ? ipv4Bytes(text) : ipv6Bytes(text);
  if (bytes === undefined) malformed(`v1 ${which} ${JSON.stringify(text)} is not an ${fam === 4 ? 'IPv4' : 'IPv6'} address`);
  return addressText(fam, bytes);
}

function parseV1(buf: Buffer): ProxyHeader | undefined {
  const lf = buf.indexOf(0x0a);
  if (lf < 0) {
    if (buf.length >= V1_MAX) malformed(`v1 line longer than ${V1_MAX} bytes without CRLF`);
    return undefined;
  }
  if (lf + 1 > V1_MAX) malformed(`v1 line longer than ${V1_MAX} bytes`);
  if (buf[lf - 1] !== 0x0d) malformed('v1 line must end with CRLF');
  const line = buf.toString('latin1', 0, lf - 1);
  const parts = line.split(' ');
  const proto = parts[1];
  if (proto === 'UNKNOWN') return { version: 1, length: lf + 1 };
  if (proto !== 'TCP4' && proto !== 'TCP6') malformed(`v1 protocol must be TCP4, TCP6 or UNKNOWN, got ${JSON.stringify(proto ?? '')}`);
  if (parts.length !== 6) malformed(`v1 ${proto} line must have 6 single-space-separated fields, got ${parts.length}`);
  const fam = proto === 'TCP4' ? 4 : 6;
  const [, , src, dst, sp, dp] = parts as [string, string, string, string, string, string];
  return {
    version: 1,
    source: { address: v1Address(src, fam, 'source'), port: v1Port(sp, 'source') },
    destination: { address: v1Address(dst, fam, 'destination'), port: v1Port(dp, 'destination') },
    length: lf + 1,
  };
}

/** Address-block bytes of each v2 family (index: the family nibble), and its name. */
const V2_ADDRESS_BYTES = [0, 12, 36, 216];
const V2_FAMILY_NAMES = ['UNSPEC', 'INET', 'INET6', 'UNIX'];

function parseV2(buf: Buffer, limit: number): ProxyHeader | undefined {
  if (buf.length < 16) return undefined;
  const verCmd = buf[12]!;
  if (verCmd >> 4 !== 2) malformed(`v2 version must be 2, got ${verCmd >> 4}`);
  const cmd = verCmd & 0x0f;
  if (cmd > 1) malformed(`v2 command must be LOCAL (0) or PROXY (1), got ${cmd}`);
  const len = buf.readUInt16BE(14);
  const total = 16 + len;
  if (total > limit) malformed(`v2 header of ${total} bytes is above the limit of ${limit}`);
  const famByte = buf[13]!;
  const fam = famByte >> 4;
  const transport = famByte & 0x0f;
  if (fam > 3 || transport > 2) malformed(`v2 family/transport byte 0x${famByte.toString(16)} is not defined`);
  // A PROXY command's address block must hold its family's addresses
  // (AF_INET 12 bytes, AF_INET6 36, AF_UNIX 216); LOCAL and UNSPEC carry none.
  if (cmd === 1 && len < V2_ADDRESS_BYTES[fam]!) {
    malformed(`v2 ${V2_FAMILY_NAMES[fam]} address block needs ${V2_ADDRESS_BYTES[fam]} bytes, length says ${len}`);
  }
  if (buf.length < total) return undefined;
  if (cmd === 0 || fam === 0 || fam === 3 || transport !== 1) return { version: 2, length: total };
  const f = fam === 1 ? 4 : 6;
  const n = fam === 1 ? 4 : 16;
  return {
    version: 2,
    source: { address: addressText(f, buf, 16), port: buf.readUInt16BE(16 + 2 * n) },
    destination: { address: addressText(f, buf, 16 + n), port: buf.readUInt16BE(18 + 2 * n) },
    length: total,
  };
}

/**
 * Parses a PROXY header at the start of `buf` (v1 or v2). Returns undefined
 * while more bytes are needed; throws `PoiseError` code `Corrupt` naming the
 * reason for anything that is not a valid header (including a v2 header
 * longer than `limit` bytes, or bytes that start neither version).
 */
export function parseProxyHeader(buf: Buffer, limit: number): ProxyHeader | undefined {
  const probe = Math.min(buf.length, V2_SIGNATURE.length);
  if (buf.subarray(0, probe).equals(V2_SIGNATURE.subarray(0, probe))) return probe < V2_SIGNATURE.length ? undefined : parseV2(buf, limit);
  const p1 = Math.min(buf.length, V1_PREFIX.length);
  if (buf.subarray(0, p1).equals(V1_PREFIX.subarray(0, p1))) return p1 < V1_PREFIX.length ? undefined : parseV1(buf);
  return malformed('the connection does not start with a v1 ("PROXY ") or v2 signature');
}
