/**
 * The one Redis URL rule: `redis://` or `rediss://` (TLS), parseable as a
 * WHATWG URL, with a host; or a Sentinel URL
 * `redis+sentinel://[[user]:password@]host:port[,host:port...]/master-name[?db=N]`.
 * The Redis membership reader, the publisher and every CLI `--redis` flag
 * check URLs here, so a URL one of them accepts is accepted by all of them
 * (and ioredis then reads it as a server address, not as a socket path or
 * the default localhost by accident).
 */
import { invalidConfig } from '../core/errors.js';
import { ADDRESS_RULE, parseAddress } from '../core/spec.js';

/** The rule in words, for messages and `--help`. */
export const REDIS_URL_RULE = 'a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N]';

/** The rule of a Sentinel master name, in words. */
export const SENTINEL_NAME_RULE = '1 to 128 characters of [A-Za-z0-9._-]';
const SENTINEL_NAME = /^[A-Za-z0-9._-]{1,128}$/;

/** A `host:port` pair. */
export interface HostPort {
  /** Host name or IP address (IPv6 without brackets). */
  host: string;
  /** Port in [1, 65535]. */
  port: number;
}

/** A parsed `redis+sentinel://` URL. @internal */
export interface SentinelUrl {
  /** The sentinels to ask for the master. */
  sentinels: HostPort[];
  /** The master name the sentinels monitor. */
  name: string;
  /** Database index on the master (default 0). */
  db: number;
  /** ACL user of the master, when given. */
  username: string | undefined;
  /** Password of the master, when given (percent-decoded). */
  password: string | undefined;
}

/** Why `value` is not a Sentinel master name, or undefined when it is. */
export function sentinelNameProblem(value: unknown): string | undefined {
  return typeof value === 'string' && SENTINEL_NAME.test(value) ? undefined : `must be ${SENTINEL_NAME_RULE}`;
}

/**
 * Parses a `host:port,host:port` list (the sentinel part of the URL, and the
 * `--sentinel` / `--redis-cluster` flags): every element must be
 * `host:port` ({@link ADDRESS_RULE}), none repeated, at least one.
 * Returns the pairs or the reason (`element 2 "x": must be ...`).
 * @internal
 */
export function parseHostList(value: unknown): HostPort[] | string {
  const items = Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : undefined;
  if (items === undefined) return 'must be a list of "host:port"';
  if (items.length === 0 || (items.length === 1 && items[0] === '')) return 'must name at least one "host:port"';
  const out: HostPort[] = [];
  const seen = new Set<string>();
  for (const [i, item] of items.entries()) {
    const parsed = typeof item === 'string' ? parseAddress(item.trim()) : undefined;
    if (parsed === undefined) return `element ${i} ${JSON.stringify(item)}: ${ADDRESS_RULE}`;
    const key = `${parsed.host}:${parsed.port}`;
    if (seen.has(key)) return `element ${i} ${JSON.stringify(item)}: repeated`;
    seen.add(key);
    out.push(parsed);
  }
  return out;
}

/** Parses a `redis+sentinel://` URL; returns it or the reason it is refused. @internal */
export function parseSentinelUrl(value: string): SentinelUrl | string {
  const m = /^redis\+sentinel:\/\/(?:([^@/]*)@)?([^/?#]*)\/([^/?#]*)(?:\?([^#]*))?$/i.exec(value);
  if (m === null) return 'must be redis+sentinel://[[user]:password@]host:port[,host:port...]/master-name[?db=N]';
  const [, auth, hosts, name, query] = m;
  const sentinels = parseHostList(hosts);
  if (typeof sentinels === 'string') return `sentinels: ${sentinels}`;
  const nameText = decodeURIComponent(name!);
  const nameBad = sentinelNameProblem(nameText);
  if (nameBad !== undefined) return `master name ${JSON.stringify(nameText)}: ${nameBad}`;
  let db = 0;
  for (const pair of query === undefined || query === '' ? [] : query.split('&')) {
    const [k, v = ''] = pair.split('=');
    if (k !== 'db') return `query parameter ${JSON.stringify(k)}: unknown (accepted: db)`;
    if (!/^\d{1,2}$/.test(v)) return `db: must be an integer in [0, 99], got ${JSON.stringify(v)}`;
    db = Number(v);
  }
  let username: string | undefined;
  let password: string | undefined;
  if (auth !== undefined) {
    const colon = auth.indexOf(':');
    if (colon < 0) username = decodeURIComponent(auth);
    else {
      if (colon > 0) username = decodeURIComponent(auth.slice(0, colon));
      password = decodeURIComponent(auth.slice(colon + 1));
    }
  }
  return { sentinels, name: nameText, db, username, password };
}

/** Why `value` is not an accepted Redis URL (`must be ...`), or undefined when it is. */
export function redisUrlProblem(value: unknown): string | undefined {
  if (typeof value === 'string' && /^redis\+sentinel:\/\//i.test(value)) {
    const parsed = parseSentinelUrl(value);
    return typeof parsed === 'string' ? `must be ${REDIS_URL_RULE} (${parsed})` : undefined;
  }
  if (typeof value === 'string' && /^rediss?:\/\//i.test(value)) {
    try {
      if (new URL(value).hostname !== '') return undefined;
    } catch {
      // not a URL: the same refusal below
    }
  }
  return `must be ${REDIS_URL_RULE}`;
}

/** Validates a Redis URL; returns it. Throws `InvalidConfig` naming `field`. */
export function validateRedisUrl(value: unknown, field = 'options.url'): string {
  const problem = redisUrlProblem(value);
  if (problem !== undefined) invalidConfig(field, problem, value);
  return value as string;
}
