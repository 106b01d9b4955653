/**
 * libpq's connection forms, parsed for routing: a URI
 * (`postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write`), a
 * keyword string (`host=h1,h2 port=5432,5433 dbname=db`), a config object,
 * and the `PGHOST` / `PGPORT` / ... environment variables as defaults, the
 * way libpq reads them (docs/guide.md, "node-postgres"). Every malformed
 * field is a `PoiseError` (`InvalidConfig`) naming it.
 */
import { invalidConfig } from '../core/errors.js';

/** libpq's `target_session_attrs` values. */
export type TargetSessionAttrs = 'any' | 'read-write' | 'read-only' | 'primary' | 'standby' | 'prefer-standby';

/** The values libpq accepts, in its documentation's order. */
export const TARGET_SESSION_ATTRS: readonly TargetSessionAttrs[] = [
  'any',
  'read-write',
  'read-only',
  'primary',
  'standby',
  'prefer-standby',
];

/** A connection in object form; a string field takes libpq's comma-separated lists (`host: 'h1,h2'`). */
export interface PgConnectionConfig {
  host?: string | readonly string[];
  port?: string | number | readonly (string | number)[];
  user?: string;
  password?: string;
  database?: string;
  target_session_attrs?: string;
  load_balance_hosts?: string;
}

/** A parsed connection: one address per host, libpq's defaults filled in. */
export interface PgConnection {
  /** `host:port` (IPv6 as `[addr]:port`), in the order given. */
  readonly addresses: readonly string[];
  readonly user: string;
  readonly password: string | undefined;
  readonly database: string;
  readonly targetSessionAttrs: TargetSessionAttrs;
  readonly loadBalanceHosts: 'disable' | 'random';
}

type Env = Readonly<Record<string, string | undefined>>;

/** The fields this parser routes by (others, `sslmode`, `application_name`, ..., belong to the pool's config). */
const KEYS = ['host', 'port', 'user', 'password', 'dbname', 'target_session_attrs', 'load_balance_hosts'] as const;
type Key = (typeof KEYS)[number];

/** Parses `input` (a URI, a keyword string or an object) with `env`'s PG* variables as defaults. */
export function parsePgConnection(input: string | PgConnectionConfig, env: Env = process.env): PgConnection {
  let given: Partial<Record<Key, string>>;
  if (typeof input === 'string') given = /^postgres(?:ql)?:\/\//.test(input) ? fromUri(input) : fromKeywords(input);
  else if (typeof input === 'object' && input !== null) given = fromObject(input);
  else invalidConfig('connection', 'must be a connection string or an object', input);
  const value = (k: Key, envName: string): string | undefined => {
    const v = given[k];
    if (v !== undefined && v !== '') return v;
    const e = env[envName];
    return e === undefined || e === '' ? undefined : e;
  };
  const hosts = (value('host', 'PGHOST') ?? 'localhost').split(',');
  const portText = value('port', 'PGPORT') ?? '5432';
  const ports = portText.split(',');
  if (ports.length !== 1 && ports.length !== hosts.length) {
    invalidConfig('port', `gives ${ports.length} ports for ${hosts.length} hosts (one port for all, or one per host)`, portText);
  }
  const addresses = hosts.map((h, i) => {
    const host = h.trim() === '' ? 'localhost' : h.trim();
    if (host.startsWith('/') || host.startsWith('@'))
      invalidConfig('host', 'a unix-domain socket cannot be routed (give a TCP host)', host);
    const p = (ports.length === 1 ? ports[0]! : ports[i]!).trim();
    const port = p === '' ? 5432 : Number(p);
    if (!/^\d*$/.test(p) || !Number.isInteger(port) || port < 1 || port > 65535)
      invalidConfig('port', 'must be an integer in [1, 65535]', p);
    return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  });
  const user = value('user', 'PGUSER') ?? env['USER'] ?? 'postgres';
  const tsa = value('target_session_attrs', 'PGTARGETSESSIONATTRS') ?? 'any';
  if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(tsa))
    invalidConfig('target_session_attrs', `must be one of ${TARGET_SESSION_ATTRS.join(', ')}`, tsa);
  const lb = value('load_balance_hosts', 'PGLOADBALANCEHOSTS') ?? 'disable';
  if (lb !== 'disable' && lb !== 'random') invalidConfig('load_balance_hosts', 'must be "disable" or "random"', lb);
  return {
    addresses,
    user,
    password: value('password', 'PGPASSWORD'),
    database: value('dbname', 'PGDATABASE') ?? user,
    targetSessionAttrs: tsa as TargetSessionAttrs,
    loadBalanceHosts: lb,
  };
}

function decode(field: string, s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return invalidConfig(field, 'has a malformed percent-encoding', s);
  }
}

/** `postgresql://[user[:password]@][host[:port][,...]][/dbname][?param=value&...]` */
function fromUri(uri: string): Partial<Record<Key, string>> {
  const m = /^postgres(?:ql)?:\/\/([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?(?:#.*)?$/.exec(uri);
  if (m === null) return invalidConfig('connection', 'is not a postgresql:// URI', uri);
  const out: Partial<Record<Key, string>> = {};
  let authority = m[1] ?? '';
  const at = authority.lastIndexOf('@');
  if (at >= 0) {
    const cred = authority.slice(0, at);
    authority = authority.slice(at + 1);
    const colon = cred.indexOf(':');
    out.user = decode('user', colon >= 0 ? cred.slice(0, colon) : cred);
    if (colon >= 0) out.password = decode('password', cred.slice(colon + 1));
  }
  if (authority !== '') {
    const hosts: string[] = [];
    const ports: string[] = [];
    for (const part of authority.split(',')) {
      const v6 = /^\[([^\]]+)\](?::(.*))?$/.exec(part);
      if (v6) {
        hosts.push(v6[1]!);
        ports.push(v6[2] ?? '');
        continue;
      }
      if (part.includes('[') || part.includes(']')) invalidConfig('host', 'has an unbalanced "[" or "]"', part);
      const colon = part.indexOf(':');
      hosts.push(decode('host', colon >= 0 ? part.slice(0, colon) : part));
      ports.push(colon >= 0 ? part.slice(colon + 1) : '');
    }
    out.host = hosts.join(',');
    if (ports.some((p) => p !== '')) out.port = ports.join(',');
  }
  if (m[2] !== undefined && m[2] !== '') out.dbname = decode('dbname', m[2]);
  for (const pair of (m[3] ?? '').split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) invalidConfig('connection', 'has a query parameter without "name=value"', pair);
    const name = decode('connection', pair.slice(0, eq));
    const key = (name === 'database' ? 'dbname' : name) as Key;
    if ((KEYS as readonly string[]).includes(key)) out[key] = decode(name, pair.slice(eq + 1).replace(/\+/g, ' '));
  }
  return out;
}

/** `host=h1,h2 port=5432 dbname='my db'`: values bare or single-quoted (with `\'` and `\\`). */
function fromKeywords(text: string): Partial<Record<Key, string>> {
  const out: Partial<Record<Key, string>> = {};
  let i = 0;
  const n = text.length;
  const space = (): void => {
    while (i < n && /\s/.test(text[i]!)) i++;
  };
  for (space(); i < n; space()) {
    const start = i;
    while (i < n && text[i] !== '=' && !/\s/.test(text[i]!)) i++;
    const name = text.slice(start, i);
    space();
    if (name === '' || text[i] !== '=') invalidConfig('connection', `expects "name=value" at "${text.slice(start, start + 20)}"`);
    i++;
    space();
    let value = '';
    if (text[i] === "'") {
      i++;
      for (;;) {
        if (i >= n) invalidConfig(name, 'has an unterminated quoted value');
        const c = text[i++]!;
        if (c === "'") break;
        if (c === '\\' && i < n) value += text[i++]!;
        else value += c;
      }
    } else {
      while (i < n && !/\s/.test(text[i]!)) {
        const c = text[i++]!;
        if (c === '\\' && i < n) value += text[i++]!;
        else value += c;
      }
    }
    const key = (name === 'database' ? 'dbname' : name) as Key;
    if ((KEYS as readonly string[]).includes(key)) out[key] = value;
  }
  return out;
}

function fromObject(o: PgConnectionConfig): Partial<Record<Key, string>> {
  const out: Partial<Record<Key, string>> = {};
  const list = (field: 'host' | 'port', v: unknown): string | undefined => {
    if (v === undefined) return undefined;
    if (typeof v === 'string' || typeof v === 'number') return String(v);
    if (Array.isArray(v) && v.every((x) => typeof x === 'string' || typeof x === 'number')) return v.join(',');
    return invalidConfig(field, 'must be a string, a number or an array of them', v);
  };
  const host = list('host', o.host);
  const port = list('port', o.port);
  if (host !== undefined) out.host = host;
  if (port !== undefined) out.port = port;
  for (const [k, key] of [
    ['user', 'user'],
    ['password', 'password'],
    ['database', 'dbname'],
    ['target_session_attrs', 'target_session_attrs'],
    ['load_balance_hosts', 'load_balance_hosts'],
  ] as const) {
    const v = o[k];
    if (v === undefined) continue;
    if (typeof v !== 'string') invalidConfig(k, 'must be a string', v);
    out[key] = v;
  }
  return out;
}
