/**
 * DNS discovery: `DnsMembership` (a name's A and AAAA records, `dns:`) and
 * the resolver both DNS sources ask through — `node:dns`'s `Resolver`
 * (c-ares, not the system's `getaddrinfo`), pointed at a server list of
 * the caller's or the system's, with a per-try timeout.
 *
 * A name's addresses become backends on one port. An IPv4 and an IPv6
 * address of one host are one backend with two addresses (spec `address`,
 * the IPv6 one, and `fallbackIp`, dialled Happy-Eyeballs style: gRPC A61),
 * not two backends. DNS does not say which A record belongs with which
 * AAAA record, so the addresses of each family are sorted and paired in
 * order: a name of N IPv4 and M IPv6 addresses is max(N, M) backends, and a
 * fleet whose hosts each have one address of each family is counted right.
 */
import dns from 'node:dns';
import { invalidConfig, checkOptionKeys } from '../core/errors.js';
import type { BackendSpec } from '../core/spec.js';
import { isIPv4, isIPv6 } from '../core/ip.js';
import { integerIn } from '../core/validate.js';
import { parseAddress } from '../core/address.js';
import { POLLING_OPTION_KEYS, PollingSource, QueryError, type Answer, type PollingOptions } from './polling.js';
import type { DiscoveryErrorKind } from './status.js';

/** What the DNS sources need of a resolver: `node:dns`'s `promises.Resolver`, or a test's. */
export interface DnsResolver {
  resolve4(name: string, options: { ttl: true }): Promise<dns.RecordWithTtl[]>;
  resolve6(name: string, options: { ttl: true }): Promise<dns.RecordWithTtl[]>;
  resolveSrv(name: string): Promise<dns.SrvRecord[]>;
  cancel(): void;
  /** The servers it asks (`ip` or `ip:port`); without it, the SRV records' TTL is not read (srv.ts). */
  getServers?(): string[];
}

/** Options of the DNS sources' resolver. */
export interface ResolverOptions {
  /** DNS servers, `ip` or `ip:port` (`[::1]:53`); default the system's (`/etc/resolv.conf`). */
  servers?: readonly string[];
  /** Per-try timeout, ms; default 2000. */
  timeoutMs?: number;
  /** Tries per query before it fails with a timeout; default 2. */
  tries?: number;
  /** A resolver to ask instead (tests); `servers`, `timeoutMs` and `tries` are then not used. */
  resolver?: DnsResolver;
}

/** Options of {@link DnsMembership}. */
export interface DnsMembershipOptions extends PollingOptions, ResolverOptions {
  /**
   * Which address families to ask for: `'both'` (default: A and AAAA; a
   * name with only one family is fine), `'ipv4'`, `'ipv6'`.
   */
  family?: 'both' | 'ipv4' | 'ipv6';
}

/** The resolver option names. @internal */
export const RESOLVER_OPTION_KEYS = ['servers', 'timeoutMs', 'tries', 'resolver'] as const;

/** Checks one `servers` entry: `ip` or `ip:port`. */
function checkServer(value: unknown, field: string): string {
  if (typeof value === 'string' && (isIPv4(value) || isIPv6(value))) return value;
  const parts = typeof value === 'string' ? parseAddress(value) : undefined;
  if (parts === undefined || !(isIPv4(parts.host) || isIPv6(parts.host)))
    invalidConfig(field, 'must be an IP address or "ip:port" ("[::1]:53" for IPv6)', value);
  return value as string;
}

/** The resolver the options describe. @internal */
export function makeResolver(opts: ResolverOptions, field: string): DnsResolver {
  if (opts.resolver !== undefined) {
    const r = opts.resolver as unknown as Record<string, unknown>;
    for (const k of ['resolve4', 'resolve6', 'resolveSrv', 'cancel'])
      if (typeof r[k] !== 'function') invalidConfig(`${field}.resolver`, `must have a function ${k}`, opts.resolver);
    return opts.resolver;
  }
  const timeout = integerIn(opts.timeoutMs ?? 2000, `${field}.timeoutMs`, 1, 600_000);
  const tries = integerIn(opts.tries ?? 2, `${field}.tries`, 1, 10);
  const resolver = new dns.promises.Resolver({ timeout, tries });
  if (opts.servers !== undefined) {
    if (!Array.isArray(opts.servers) || opts.servers.length === 0)
      invalidConfig(`${field}.servers`, 'must be a non-empty array of "ip" or "ip:port"', opts.servers);
    resolver.setServers(opts.servers.map((s, i) => checkServer(s, `${field}.servers[${i}]`)));
  }
  return resolver;
}

/** The discovery error kind of a `node:dns` error code. @internal */
export function dnsErrorKind(err: unknown): DiscoveryErrorKind {
  switch ((err as { code?: unknown } | null)?.code) {
    case dns.NOTFOUND:
      return 'notfound';
    case dns.NODATA:
      return 'empty';
    case dns.SERVFAIL:
    case dns.REFUSED:
      return 'servfail';
    case dns.TIMEOUT:
      return 'timeout';
    case dns.FORMERR:
    case dns.BADRESP:
    case dns.BADNAME:
      return 'malformed';
    case dns.CONNREFUSED:
      return 'unreachable';
    default:
      return 'other';
  }
}

/** A `node:dns` failure as a {@link QueryError} naming the query. @internal */
export function queryError(err: unknown, what: string): QueryError {
  const code = (err as { code?: unknown } | null)?.code;
  return new QueryError(dnsErrorKind(err), `${what}: ${typeof code === 'string' ? code : (err as Error)?.message}`, err);
}

/** The records of one family, or none when the name has none of that family (NODATA); other failures throw. */
async function family(ask: Promise<dns.RecordWithTtl[]>, what: string): Promise<dns.RecordWithTtl[]> {
  try {
    return await ask;
  } catch (err) {
    if ((err as { code?: unknown }).code === dns.NODATA) return [];
    throw queryError(err, what);
  }
}

/** A host's addresses, both families. @internal */
export interface HostAddresses {
  readonly v4: readonly dns.RecordWithTtl[];
  readonly v6: readonly dns.RecordWithTtl[];
}

/** Asks for `name`'s A and/or AAAA records (`which`); a name with neither is `'empty'`, one that does not exist `'notfound'`. @internal */
export async function resolveHost(resolver: DnsResolver, name: string, which: 'both' | 'ipv4' | 'ipv6' = 'both'): Promise<HostAddresses> {
  const [v4, v6] = await Promise.all([
    which === 'ipv6' ? [] : family(resolver.resolve4(name, { ttl: true }), `A ${name}`),
    which === 'ipv4' ? [] : family(resolver.resolve6(name, { ttl: true }), `AAAA ${name}`),
  ]);
  if (v4.length === 0 && v6.length === 0)
    throw new QueryError('empty', `${name}: no ${which === 'both' ? 'A or AAAA' : which === 'ipv4' ? 'A' : 'AAAA'} record`);
  return { v4, v6 };
}

/** The smallest TTL of a host's records, seconds (Infinity for none). @internal */
export function minTtl(host: HostAddresses): number {
  let ttl = Number.POSITIVE_INFINITY;
  for (const r of host.v4) ttl = Math.min(ttl, r.ttl);
  for (const r of host.v6) ttl = Math.min(ttl, r.ttl);
  return ttl;
}

/** `ip:port` with IPv6 in brackets. */
function joinAddress(ip: string, port: number): string {
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/**
 * A host's addresses as backends on `port`: the IPv6 and IPv4 addresses,
 * each family sorted, paired in order (the IPv6 one dialled first, the IPv4
 * one its `fallbackIp`). `fields` go into every spec (`hostname`, and for
 * SRV `priority` and `weight`); `idOf(address, index)` names each.
 * @internal
 */
export function hostBackends(
  host: HostAddresses,
  port: number,
  fields: Omit<BackendSpec, 'id' | 'address'>,
  idOf: (address: string, index: number) => string,
): BackendSpec[] {
  const v4 = host.v4.map((r) => r.address).sort();
  const v6 = host.v6.map((r) => r.address).sort();
  const n = Math.max(v4.length, v6.length);
  const out: BackendSpec[] = [];
  for (let i = 0; i < n; i++) {
    const a6 = v6[i];
    const a4 = v4[i];
    const address = joinAddress((a6 ?? a4)!, port);
    const spec: BackendSpec = { id: idOf(address, i), address, ...fields };
    if (a6 !== undefined && a4 !== undefined) spec.fallbackIp = a4;
    out.push(spec);
  }
  return out;
}

/** `name:port` of a `dns:` target, checked. @internal */
export function parseDnsTarget(target: string, field: string): { name: string; port: number } {
  const parts = parseAddress(target);
  if (parts === undefined || isIPv4(parts.host) || isIPv6(parts.host))
    invalidConfig(field, 'must be "name:port", a DNS name and a port in [1, 65535] (dns:api.internal:8080)', target);
  return { name: parts.host, port: parts.port };
}

/**
 * The backends of one DNS name's A and AAAA records on one port,
 * re-resolved on the records' TTL (clamped to [minIntervalMs,
 * maxIntervalMs], default [1 s, 5 min]). Each backend keeps the name as its
 * `hostname` (the HTTP `Host` and TLS `servername`); its id is its address.
 *
 * @example
 * const source = new DnsMembership('api.internal:8080', { servers: ['10.0.0.2'] });
 * await bindMembership(source, balancer);
 */
export class DnsMembership extends PollingSource {
  readonly #resolver: DnsResolver;
  readonly #name: string;
  readonly #port: number;
  readonly #family: 'both' | 'ipv4' | 'ipv6';

  /** `target`: `name:port`. Throws `InvalidConfig` naming the field for a bad target or option. */
  constructor(target: string, opts: DnsMembershipOptions = {}) {
    checkOptionKeys(opts, [...POLLING_OPTION_KEYS, ...RESOLVER_OPTION_KEYS, 'family'], 'options');
    const { name, port } = parseDnsTarget(target, 'target');
    super(`dns:${target}`, opts, 'options');
    if (opts.family !== undefined && !['both', 'ipv4', 'ipv6'].includes(opts.family))
      invalidConfig('options.family', 'must be "both", "ipv4" or "ipv6"', opts.family);
    this.#family = opts.family ?? 'both';
    this.#resolver = makeResolver(opts, 'options');
    this.#name = name;
    this.#port = port;
  }

  protected async query(): Promise<Answer> {
    const host = await resolveHost(this.#resolver, this.#name, this.#family);
    const backends = hostBackends(host, this.#port, { hostname: this.#name }, (address) => address);
    return { backends, ttlSeconds: minTtl(host) };
  }

  protected cancel(): void {
    this.#resolver.cancel();
  }
}
