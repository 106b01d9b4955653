/**
 * SRV discovery (`srv:_pg._tcp.db.internal`): a service's SRV records, each
 * target resolved to its A and AAAA records, as backends.
 *
 * - SRV priority → poise `priority` (lower first; failover and panic as for
 *   any membership, docs/priority.md).
 * - SRV weight → poise `weight`. Poise weights start at 1, SRV weights at 0,
 *   and RFC 2782 gives a weight-0 record "a very small chance of being
 *   selected" beside weighted ones, and equal chances when all of a
 *   priority's records are 0. So: a weight w > 0 becomes 100·w, a weight 0
 *   becomes 1 (1/100 of an SRV weight 1), and a priority whose records are
 *   all 0 has every one at 1 (equal). Ratios between non-zero weights are
 *   kept exactly.
 * - target + port → `address` (and `fallbackIp` for a dual-stack target,
 *   one backend: see dns.ts); the target name is the backend's `hostname`
 *   and its id is `target:port` (`target:port#i` for a target's further
 *   address pairs). A target of `.` (RFC 2782: "service not available")
 *   contributes nothing.
 * - Re-resolution: after the shortest TTL of the SRV records and of the
 *   targets' address records, clamped to [minIntervalMs, maxIntervalMs].
 *   Node's `resolveSrv` does not report the SRV records' TTL, so one more
 *   SRV query, over UDP to the resolver's first server, reads it
 *   (srv-ttl.ts); when that fails, the `srvTtlSeconds` option (default 30)
 *   stands in for it.
 *
 * A target that does not resolve is left out while the others stand; an
 * answer where no target resolves keeps the last good membership.
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import type { BackendSpec } from '../core/spec.js';
import { integerIn } from '../core/validate.js';
import {
  RESOLVER_OPTION_KEYS,
  hostBackends,
  makeResolver,
  minTtl,
  queryError,
  resolveHost,
  type DnsResolver,
  type ResolverOptions,
} from './dns.js';
import { POLLING_OPTION_KEYS, PollingSource, QueryError, type Answer, type PollingOptions } from './polling.js';
import { srvTtl } from './srv-ttl.js';

/** Options of {@link SrvMembership}. */
export interface SrvMembershipOptions extends PollingOptions, ResolverOptions {
  /** The SRV set's TTL, seconds, when it cannot be read from the wire (see the file comment); default 30. */
  srvTtlSeconds?: number;
}

/** The poise weight of an SRV weight (see the file comment); `allZero`: every record of its priority has weight 0. @internal */
export function srvWeight(weight: number, allZero: boolean): number {
  return allZero || weight === 0 ? 1 : weight * 100;
}

/** An SRV service name: labels of RFC 1123 (with `_`), e.g. `_pg._tcp.db.internal`. */
const SERVICE = /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

/**
 * The backends of a service's SRV records (see the file comment).
 *
 * @example
 * const source = new SrvMembership('_pg._tcp.db.internal', { servers: ['10.0.0.2:53'] });
 * await bindMembership(source, balancer);
 */
export class SrvMembership extends PollingSource {
  readonly #resolver: DnsResolver;
  readonly #service: string;
  readonly #srvTtl: number;
  readonly #timeoutMs: number;

  /** `service`: the SRV name. Throws `InvalidConfig` naming the field for a bad name or option. */
  constructor(service: string, opts: SrvMembershipOptions = {}) {
    checkOptionKeys(opts, [...POLLING_OPTION_KEYS, ...RESOLVER_OPTION_KEYS, 'srvTtlSeconds'], 'options');
    if (typeof service !== 'string' || !SERVICE.test(service))
      invalidConfig('service', 'must be a DNS name such as "_pg._tcp.db.internal"', service);
    super(`srv:${service}`, opts, 'options');
    this.#srvTtl = integerIn(opts.srvTtlSeconds ?? 30, 'options.srvTtlSeconds', 0, 86_400);
    this.#resolver = makeResolver(opts, 'options');
    this.#timeoutMs = opts.timeoutMs ?? 2000;
    this.#service = service;
  }

  protected async query(): Promise<Answer> {
    let records: Awaited<ReturnType<DnsResolver['resolveSrv']>>;
    const servers = this.#resolver.getServers?.();
    const wireTtl = servers === undefined ? Promise.resolve(undefined) : srvTtl(servers, this.#service, this.#timeoutMs);
    try {
      records = await this.#resolver.resolveSrv(this.#service);
    } catch (err) {
      throw queryError(err, `SRV ${this.#service}`);
    }
    records = records.filter((r) => r.name !== '' && r.name !== '.');
    if (records.length === 0) throw new QueryError('empty', `SRV ${this.#service}: no record with a target`);
    for (const r of records) {
      if (!Number.isInteger(r.port) || r.port < 1 || r.port > 65535)
        throw new QueryError('malformed', `SRV ${this.#service}: target ${r.name} has port ${r.port}, not in [1, 65535]`);
    }
    const weighted = new Set<number>();
    for (const r of records) if (r.weight > 0) weighted.add(r.priority);
    // Each target once, whatever the number of records naming it.
    const targets = [...new Set(records.map((r) => r.name))];
    const settled = await Promise.allSettled(targets.map((t) => resolveHost(this.#resolver, t)));
    const hosts = new Map<string, Awaited<ReturnType<typeof resolveHost>>>();
    let firstError: unknown;
    let ttl = (await wireTtl) ?? this.#srvTtl;
    settled.forEach((s, i) => {
      if (s.status === 'fulfilled') {
        hosts.set(targets[i]!, s.value);
        ttl = Math.min(ttl, minTtl(s.value));
      } else firstError ??= s.reason;
    });
    if (hosts.size === 0) throw firstError instanceof QueryError ? firstError : queryError(firstError, `SRV ${this.#service} targets`);
    if (firstError !== undefined) this.log.debug({ err: (firstError as Error).message }, 'an SRV target did not resolve; left out');
    const backends: BackendSpec[] = [];
    const seen = new Set<string>();
    // Sorted, so one answer in any record order is one membership.
    const sorted = [...records].sort((a, b) => a.priority - b.priority || a.name.localeCompare(b.name) || a.port - b.port);
    for (const r of sorted) {
      const host = hosts.get(r.name);
      const target = r.name.endsWith('.') ? r.name.slice(0, -1) : r.name;
      const base = `${target}:${r.port}`;
      if (host === undefined || seen.has(base)) continue;
      seen.add(base);
      const fields = { hostname: target, priority: r.priority, weight: srvWeight(r.weight, !weighted.has(r.priority)) };
      backends.push(...hostBackends(host, r.port, fields, (_address, i) => (i === 0 ? base : `${base}#${i}`)));
    }
    return { backends, ttlSeconds: ttl };
  }

  protected cancel(): void {
    this.#resolver.cancel();
  }
}
