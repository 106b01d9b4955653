/**
 * The discovery flags of every `poise` command that takes a membership
 * source (`proxy`, `members show|watch`, `bench`): where the backends are
 * published, as one `--discover` string of the scheme registry
 * (src/discovery/schemes.ts), and the DNS servers `dns:` and `srv:` ask.
 *
 *   --discover dns:api.internal:8080          A/AAAA records of a name, on a port
 *   --discover srv:_pg._tcp.db.internal       SRV records (priority, weight, target, port)
 *   --discover k8s:namespace/service[:port]   Kubernetes EndpointSlices
 *   --dns-server IP[:PORT]                    (repeatable) instead of the system's resolvers
 *
 * A bad value is a usage error naming the flag (the source's own message
 * says which part is wrong).
 */
import os from 'node:os';
import type { Logger } from 'pino';
import { PoiseError } from '../core/errors.js';
import { discoverySource } from '../discovery/schemes.js';
import type { RedisConnectionOptions } from '../membership/redis-target.js';
import type { MembershipSource } from '../membership/source.js';
import type { FlagSpecs } from './args.js';
import { UsageError } from './usage.js';

/** The parseArgs specs of the discovery flags. */
export const DISCOVER_FLAGS = {
  discover: { type: 'string' },
  'dns-server': { type: 'string', multiple: true },
} as const satisfies FlagSpecs;

/** The `--help` lines of the discovery flags. */
export const DISCOVER_FLAGS_HELP = `  --discover SPEC          find the backends where they are published (docs/membership.md, "Discovery"):
                           dns:NAME:PORT (A/AAAA records; re-asked on their TTL), srv:SERVICE (SRV records:
                           priority, weight, target:port), k8s:NAMESPACE/SERVICE[:PORT-NAME]
  --dns-server IP[:PORT]   the DNS server dns: and srv: ask (repeatable; default the system's)`;

/** The raw values of the discovery flags. */
export interface DiscoverFlagValues {
  discover?: string | undefined;
  'dns-server'?: string[] | undefined;
}

/**
 * The source `--discover` names (built, not started), or undefined without
 * the flag. Throws a `UsageError` naming the flag for a bad value, and for
 * `--dns-server` without `--discover`.
 */
export function discoverFlag(
  values: DiscoverFlagValues,
  logger: Logger,
  initial: 'reject' | 'wait' = 'reject',
): MembershipSource | undefined {
  const servers = values['dns-server'] ?? [];
  if (values.discover === undefined) {
    if (servers.length > 0) throw new UsageError('--dns-server: only with --discover dns:... or srv:...', '--dns-server');
    return undefined;
  }
  try {
    return discoverySource(values.discover, { logger, initial, ...(servers.length > 0 ? { servers } : {}) }, '--discover');
  } catch (err) {
    if (!(err instanceof PoiseError)) throw err;
    const server = /options\.servers(?:\[\d+\])?: (.*)$/s.exec(err.message);
    if (server !== null) throw new UsageError(`--dns-server: ${server[1]}`, '--dns-server');
    throw new UsageError(err.message, '--discover');
  }
}

/** The `--help` lines of fleet mode (`--discover` with `--redis`). */
export const FLEET_FLAGS_HELP = `  --discover SPEC --redis URL --cluster NAME [--watcher-lease D]
                           fleet mode: every process joins an election through a Redis lease; the
                           elected one runs the discovery and publishes it into the cluster's
                           snapshot, and every process reads the cluster from Redis (one watcher
                           per fleet; --watcher-lease: the lease, 100ms..10m, default 15s)`;

/** What fleet mode needs beside the discovery flags (already validated). */
export interface FleetFlags {
  /** Where Redis is (the connection flags). */
  redis: RedisConnectionOptions;
  cluster: string;
  prefix: string | undefined;
  /** `--watcher-lease`, ms; undefined: the watcher's default. */
  leaseMs: number | undefined;
  /** `--require-membership`: the Redis reader fails fast. */
  failFast: boolean;
}

/**
 * Fleet mode's source (built, not started): a {@link FleetMembership} whose
 * watcher runs the `--discover` source (a new one at each election) and
 * whose reader follows the cluster in Redis. `values` were checked by
 * {@link discoverFlag} already. ioredis is imported here, on first use.
 */
export async function fleetSource(
  values: DiscoverFlagValues & { discover: string },
  fleet: FleetFlags,
  logger: Logger,
): Promise<MembershipSource> {
  const [{ FleetWatcher }, { FleetMembership }, { RedisMembership }] = await Promise.all([
    import('../discovery/fleet-watcher.js'),
    import('../discovery/fleet-membership.js'),
    import('../membership/redis-source.js'),
  ]);
  const common = { ...fleet.redis, cluster: fleet.cluster, prefix: fleet.prefix, logger };
  const watcher = new FleetWatcher({
    ...common,
    source: () => discoverFlag(values, logger, 'wait')!,
    // What `poise top --redis` shows of the watcher: where it runs and what it watches.
    holder: `${os.hostname()}:${process.pid} ${values.discover}`,
    ...(fleet.leaseMs === undefined ? {} : { leaseMs: fleet.leaseMs }),
  });
  return new FleetMembership(watcher, new RedisMembership({ ...common, failFast: fleet.failFast }), values.discover);
}
