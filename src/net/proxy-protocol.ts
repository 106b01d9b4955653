/**
 * The PROXY protocol (HAProxy's proxy-protocol.txt), versions 1 and 2: the
 * header a balancer puts in front of a TCP stream so the next hop learns the
 * original client address. {@link encodeProxyV1} / {@link encodeProxyV2} build
 * it for `--send-proxy` / `--send-proxy-v2`; {@link parseProxyHeader} reads it
 * for `--accept-proxy` (either version, detected by the first bytes).
 */
import net from 'node:net';
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

/** `::ffff:a.b.c.d` → `a.b.c.d`; other text unchanged. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

function family(address: string): 4 | 6 {
  const a = plainAddress(address);
  if (net.isIPv4(a)) return 4;
  if (net.isIPv6(a)) return 6;
  throw new PoiseError('InvalidConfig', `PROXY header: ${JSON.stringify(address)} is not an IP address`, { field: 'address' });
}

/**
 * The v1 text header for `source → destination`. Both of one family: a v4
 * source with a v6 destination is written as TCP6 with the v4 address mapped.
 *
 * @example
 * encodeProxyV1({ address: '127.0.0.1', port: 5000 }, { address: '127.0.0.1', port: 6000 });
 * // 'PROXY TCP4 127.0.0.1 127.0.0.1 5000 6000\r\n'
 */
export function encodeProxyV1(source: ProxyEndpoint, destination: ProxyEndpoint): Buffer {
  const [fam, src, dst] = pair(source, destination);
  return Buffer.from(`PROXY TCP${fam} ${src} ${dst} ${source.port} ${destination.port}\r\n`, 'latin1');
}

/** The v2 binary header for `source → destination` (command PROXY, transport STREAM, no TLVs). */
export function encodeProxyV2(source: ProxyEndpoint, destination: ProxyEndpoint): Buffer {
  const [fam, src, dst] = pair(source, destination);
  const addrLen = fam === 4 ? 12 : 36;
  const out = Buffer.alloc(16 + addrLen);
  V2_SIGNATURE.copy(out, 0);
  out[12] = 0x21; // version 2, command PROXY
  out[13] = fam === 4 ? 0x11 : 0x21; // AF_INET / AF_INET6, SOCK_STREAM
  out.writeUInt16BE(addrLen, 14);
  const n = fam === 4 ? 4 : 16;
  ipBytes(src, fam).copy(out, 16);
  ipBytes(dst, fam).copy(out, 16 + n);
  out.writeUInt16BE(source.port, 16 + 2 * n);
  out.writeUInt16BE(destination.port, 18 + 2 * n);
  return out;
}

function pair(source: ProxyEndpoint, destination: ProxyEndpoint): [4 | 6, string, string] {
  const fs = family(source.address);
  const fd = family(destination.address);
  const src = plainAddress(source.address);
  const dst = plainAddress(destination.address);
  if (fs === fd) return [fs, src, dst];
  return [6, fs === 4 ? `::ffff:${src}` : src, fd === 4 ? `::ffff:${dst}` : dst];
}

function ipBytes(address: string, fam: 4 | 6): Buffer {
  if (fam === 4) return Buffer.from(address.split('.').map(Number));
  let text = address;
  const tail: number[] = [];
  const v4 = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4 !== null) {
    const q = v4.slice(2).map(Number) as [number, number, number, number];
    tail.push((q[0] << 8) | q[1], (q[2] << 8) | q[3]);
    text = v4[1]!.endsWith('::') ? v4[1]! : v4[1]!.slice(0, -1);
  }
  const groups = (t: string): number[] => (t === '' ? [] : t.split(':').map((g) => parseInt(g, 16)));
  const gap = text.indexOf('::');
  let words: number[];
  if (gap < 0) {
    words = [...groups(text), ...tail];
  } else {
    const head = groups(text.slice(0, gap));
    const rest = [...groups(text.slice(gap + 2)), ...tail];
    words = [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
  }
  const out = Buffer.alloc(16);
  words.forEach((w, i) => {
    out.writeUInt16BE(w, 2 * i);
  });
  return out;
}

/** RFC 5952 text of 16 address bytes (longest zero run of two or more groups compressed). */
function ipv6Text(b: Buffer, at: number): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push(b.readUInt16BE(at + 2 * i));
  if (g.slice(0, 6).every((x, i) => (i < 5 ? x === 0 : x === 0xffff)))
    return `::ffff:${b[at + 12]}.${b[at + 13]}.${b[at + 14]}.${b[at + 15]}`;
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

function malformed(reason: string): never {
  throw new PoiseError('Corrupt', `PROXY header: ${reason}`, { field: 'proxy-header' });
}

const PORT = /^(0|[1-9]\d{0,4})$/;

function v1Port(text: string | undefined, which: string): number {
  const p = text !== undefined && PORT.test(text) ? Number(text) : -1;
  if (p < 0 || p > 65535) malformed(`v1 ${which} port must be a decimal in [0, 65535], got ${JSON.stringify(text)}`);
  return p;
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
  const ok = proto === 'TCP4' ? net.isIPv4 : net.isIPv6;
  const [, , src, dst, sp, dp] = parts as [string, string, string, string, string, string];
  if (!ok(src)) malformed(`v1 source ${JSON.stringify(src)} is not an ${proto === 'TCP4' ? 'IPv4' : 'IPv6'} address`);
  if (!ok(dst)) malformed(`v1 destination ${JSON.stringify(dst)} is not an ${proto === 'TCP4' ? 'IPv4' : 'IPv6'} address`);
  return {
    version: 1,
    source: { address: plainAddress(src), port: v1Port(sp, 'source') },
    destination: { address: plainAddress(dst), port: v1Port(dp, 'destination') },
    length: lf + 1,
  };
}

function parseV2(buf: Buffer, limit: number): ProxyHeader | undefined {
  if (buf.length < 16) return undefined;
  const verCmd = buf[12]!;
  if (verCmd >> 4 !== 2) malformed(`v2 version must be 2, got ${verCmd >> 4}`);
  const cmd = verCmd & 0x0f;
  if (cmd > 1) malformed(`v2 command must be LOCAL (0) or PROXY (1), got ${cmd}`);
  const len = buf.readUInt16BE(14);
  const total = 16 + len;
  if (total > limit) malformed(`v2 header of ${total} bytes is above the limit of ${limit}`);
  if (buf.length < total) return undefined;
  const famByte = buf[13]!;
  const fam = famByte >> 4;
  const transport = famByte & 0x0f;
  if (fam > 3 || transport > 2) malformed(`v2 family/transport byte 0x${famByte.toString(16)} is not defined`);
  if (cmd === 0 || fam === 0 || fam === 3 || transport !== 1) return { version: 2, length: total };
  const need = fam === 1 ? 12 : 36;
  if (len < need) malformed(`v2 ${fam === 1 ? 'INET' : 'INET6'} address block needs ${need} bytes, length says ${len}`);
  const n = fam === 1 ? 4 : 16;
  const text = (at: number): string =>
    fam === 1 ? `${buf[at]}.${buf[at + 1]}.${buf[at + 2]}.${buf[at + 3]}` : plainAddress(ipv6Text(buf, at));
  return {
    version: 2,
    source: { address: text(16), port: buf.readUInt16BE(16 + 2 * n) },
    destination: { address: text(16 + n), port: buf.readUInt16BE(18 + 2 * n) },
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
