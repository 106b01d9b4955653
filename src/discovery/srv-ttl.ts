/**
 * The TTL of a name's SRV records, which Node's `resolveSrv` does not
 * report: one SRV query over UDP to the resolver's first server (RFC 1035
 * wire format), the answer's smallest SRV record TTL. Only the TTL is read
 * from it; the records themselves come from `resolveSrv` (c-ares). Any
 * failure (no server, a timeout, a truncated or malformed answer) answers
 * undefined, and the caller keeps its configured SRV TTL.
 */
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { isIPv6 } from '../core/ip.js';

const TYPE_SRV = 33;
const CLASS_IN = 1;

/** `ip`, `ip:port` or `[ip6]:port` (as `Resolver.getServers()` lists them) → host and port. */
function serverOf(server: string): { host: string; port: number } | undefined {
  if (isIPv6(server)) return { host: server, port: 53 };
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(server) ?? /^([^:]+):(\d+)$/.exec(server);
  if (m !== null) return { host: m[1]!, port: Number(m[2]) };
  return /^[0-9.]+$/.test(server) ? { host: server, port: 53 } : undefined;
}

/** The query message for `name`'s SRV records. */
function query(id: number, name: string): Buffer {
  const labels = name.replace(/\.$/, '').split('.');
  const parts: Buffer[] = [Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const l of labels) parts.push(Buffer.from([l.length]), Buffer.from(l, 'ascii'));
  parts.push(Buffer.from([0, 0, TYPE_SRV, 0, CLASS_IN]));
  return Buffer.concat(parts);
}

/** The offset after the (possibly compressed) name at `at`; throws past the end. */
function skipName(msg: Buffer, at: number): number {
  for (;;) {
    const len = msg[at];
    if (len === undefined) throw new RangeError('name past the end');
    if (len === 0) return at + 1;
    if ((len & 0xc0) === 0xc0) return at + 2;
    at += len + 1;
  }
}

/** The smallest SRV TTL of answer `msg` to query `id`, seconds; undefined when it has none or does not parse. @internal */
export function srvAnswerTtl(msg: Buffer, id: number): number | undefined {
  try {
    if (msg.length < 12 || msg.readUInt16BE(0) !== id || (msg[2]! & 0x80) === 0 || (msg[2]! & 0x02) !== 0 || (msg[3]! & 0x0f) !== 0)
      return undefined;
    const questions = msg.readUInt16BE(4);
    const answers = msg.readUInt16BE(6);
    let at = 12;
    for (let q = 0; q < questions; q++) at = skipName(msg, at) + 4;
    let ttl: number | undefined;
    for (let a = 0; a < answers; a++) {
      at = skipName(msg, at);
      const type = msg.readUInt16BE(at);
      const t = msg.readUInt32BE(at + 4);
      const rdlength = msg.readUInt16BE(at + 8);
      at += 10 + rdlength;
      if (at > msg.length) return undefined;
      if (type === TYPE_SRV) ttl = ttl === undefined ? t : Math.min(ttl, t);
    }
    return ttl;
  } catch {
    return undefined;
  }
}

/** Asks `servers[0]` for `name`'s SRV records and answers their smallest TTL (seconds), or undefined (see the file comment). @internal */
export function srvTtl(servers: readonly string[], name: string, timeoutMs: number): Promise<number | undefined> {
  const server = servers[0] === undefined ? undefined : serverOf(servers[0]);
  if (server === undefined) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const socket = dgram.createSocket(isIPv6(server.host) ? 'udp6' : 'udp4');
    const id = randomInt(0, 0x10000);
    let done = false;
    const finish = (ttl: number | undefined): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.close();
      resolve(ttl);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    socket.on('error', () => finish(undefined));
    socket.on('message', (msg) => {
      if (msg.length >= 2 && msg.readUInt16BE(0) === id) finish(srvAnswerTtl(msg, id));
    });
    socket.send(query(id, name), server.port, server.host, (err) => {
      if (err) finish(undefined);
    });
  });
}
