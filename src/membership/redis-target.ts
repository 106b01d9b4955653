/**
 * Where Redis is: one server (`url`), a master found through Sentinel
 * (`sentinels` + `sentinelName`, or a `redis+sentinel://` URL), or a Redis
 * Cluster (`redisCluster`). The reader and the publisher take the same three
 * option forms and resolve them here, so both accept and refuse the same
 * inputs, and both connect through ioredis's own Sentinel and Cluster support.
 *
 * What changes with the form:
 * - Sentinel: ioredis asks the sentinels for the master's address on every
 *   (re)connection (a failover closes the old master's connections: killed,
 *   or demoted with CLIENT KILL by Sentinel); the keys and channel are the
 *   standalone ones.
 * - Cluster: keys carry a `{cluster}` hash tag (one slot for the snapshot key
 *   and the channel), the notice goes out with SPUBLISH and is received with
 *   SSUBSCRIBE (sharded pub/sub, Redis >= 7), see redis-keys.ts.
 */
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { invalidConfig } from '../core/errors.js';
import { redactUrl } from './redis-errors.js';
import { type HostPort, parseHostList, parseSentinelUrl, sentinelNameProblem, validateRedisUrl } from './redis-url.js';

/** The connection options the reader and the publisher share (exactly one of `url`, `sentinels`, `redisCluster`). */
export interface RedisConnectionOptions {
  /**
   * `redis://[:password@]host:port[/db]`, `rediss://...` (TLS), or
   * `redis+sentinel://[[user]:password@]host:port[,host:port...]/master-name[?db=N]`
   * (the password is the master's).
   */
  url?: string;
  /** Sentinels to ask for the master (`host:port` strings); requires `sentinelName`. */
  sentinels?: readonly string[];
  /** The master name the sentinels monitor (`sentinel monitor NAME ...`). */
  sentinelName?: string;
  /** Seed nodes of a Redis Cluster (`host:port` strings); keys and channel then share one hash slot. */
  redisCluster?: readonly string[];
}

/**
 * Extra options for the ioredis client (`redisOptions`), passed to ioredis
 * unchanged: the fields below are typed, any other ioredis `RedisOptions`
 * field (`sentinelPassword`, `enableTLSForSentinelMode`, ...) is accepted as
 * it is. Declared here, not imported from ioredis, so that no declaration
 * file of this package loads ioredis's: a strict consumer without
 * `skipLibCheck` would then type-check ioredis's own declarations, and
 * ioredis 6.1 imports the untyped `redis-errors` there (TS7016).
 */
export interface RedisClientOptions {
  username?: string;
  password?: string;
  db?: number;
  /** TLS for the connection (as `rediss://` in the URL), e.g. `{ ca }`. */
  tls?: ConnectionOptions;
  connectTimeout?: number;
  commandTimeout?: number;
  keepAlive?: number;
  /** Delay in ms before reconnection attempt `times` (1, 2, ...); `null` or nothing stops reconnecting. */
  retryStrategy?: (times: number) => number | null | undefined;
  maxRetriesPerRequest?: number | null;
  lazyConnect?: boolean;
  enableOfflineQueue?: boolean;
  autoResubscribe?: boolean;
  /** Any other ioredis `RedisOptions` field. */
  [option: string]: unknown;
}

/** A resolved connection target. @internal */
export type RedisTarget =
  | { kind: 'server'; url: string }
  | { kind: 'sentinel'; sentinels: HostPort[]; name: string; db: number; username: string | undefined; password: string | undefined }
  | { kind: 'cluster'; nodes: HostPort[] };

function hostList(value: unknown, field: string): HostPort[] {
  const parsed = parseHostList(value);
  if (typeof parsed === 'string') invalidConfig(field, parsed, value);
  return parsed;
}

const hostText = (h: HostPort): string => (h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`);

/**
 * Resolves the three option forms into one target. Throws `InvalidConfig`
 * naming the option: none or more than one form given, a malformed URL,
 * an empty list, an element that is not `host:port`, a repeated element,
 * `sentinels` without `sentinelName` (or the reverse).
 * @internal
 */
export function resolveRedisTarget(opts: RedisConnectionOptions, prefix = 'options'): RedisTarget {
  const given = (['url', 'sentinels', 'redisCluster'] as const).filter((k) => opts?.[k] !== undefined);
  if (given.length === 0) invalidConfig(`${prefix}.url`, 'required (or give sentinels + sentinelName, or redisCluster)');
  if (given.length > 1)
    invalidConfig(`${prefix}.${given[1]}`, `give exactly one of url, sentinels, redisCluster (got ${given.join(' and ')})`);
  if (opts.sentinelName !== undefined && opts.sentinels === undefined)
    invalidConfig(`${prefix}.sentinelName`, 'only with sentinels', opts.sentinelName);
  if (opts.url !== undefined) {
    const url = validateRedisUrl(opts.url, `${prefix}.url`);
    if (!/^redis\+sentinel:/i.test(url)) return { kind: 'server', url };
    const s = parseSentinelUrl(url) as Exclude<ReturnType<typeof parseSentinelUrl>, string>;
    return { kind: 'sentinel', ...s };
  }
  if (opts.sentinels !== undefined) {
    const sentinels = hostList(opts.sentinels, `${prefix}.sentinels`);
    const problem = opts.sentinelName === undefined ? 'required with sentinels' : sentinelNameProblem(opts.sentinelName);
    if (problem !== undefined)
      invalidConfig(`${prefix}.sentinelName`, problem, ...(opts.sentinelName === undefined ? [] : [opts.sentinelName]));
    return { kind: 'sentinel', sentinels, name: opts.sentinelName!, db: 0, username: undefined, password: undefined };
  }
  return { kind: 'cluster', nodes: hostList(opts.redisCluster, `${prefix}.redisCluster`) };
}

/** A one-line, password-free name of the target, for logs and error messages (`redis <this>: unavailable ...`). @internal */
export function describeTarget(t: RedisTarget): string {
  switch (t.kind) {
    case 'server':
      return redactUrl(t.url);
    case 'sentinel':
      return `redis+sentinel://${t.sentinels.map(hostText).join(',')}/${t.name}${t.db === 0 ? '' : `?db=${t.db}`}`;
    case 'cluster':
      return `cluster ${t.nodes.map(hostText).join(',')}`;
  }
}

/**
 * The deadline of every command of the membership reader and publisher
 * (ioredis `commandTimeout`), ms: a Redis that does not answer (stopped,
 * paused, behind a black hole) fails the command instead of holding it for
 * ever. `redisOptions.commandTimeout` overrides it. @internal
 */
export const COMMAND_TIMEOUT_MS = 5000;

/** Whether `err` is ioredis' rejection of a command that missed its `commandTimeout` (it was sent: Redis may still run it). @internal */
export function isCommandTimeout(err: unknown): boolean {
  return (err as Error | undefined)?.message === 'Command timed out';
}

/** A client of either kind; the commands the control plane uses exist on both. @internal */
export type RedisClient = Redis | Cluster;

/**
 * Creates an ioredis client for the target. `options` are per-connection
 * options (timeouts, retryStrategy, tls, password); for a Cluster they become
 * `redisOptions` of every node connection, `retryStrategy` becomes
 * `clusterRetryStrategy`, and `sharded` turns on ioredis' sharded
 * subscribers (one subscriber connection per master, for SSUBSCRIBE).
 * @internal
 */
export function createRedisClient(t: RedisTarget, clientOptions: RedisClientOptions, extra: { sharded?: boolean } = {}): RedisClient {
  // The one place our option type meets ioredis's: the typed fields above are ioredis's own, the rest goes through as given.
  const options = clientOptions as RedisOptions;
  switch (t.kind) {
    case 'server':
      return new Redis(t.url, options);
    case 'sentinel':
      return new Redis({
        sentinels: t.sentinels,
        name: t.name,
        db: t.db,
        ...(t.username === undefined ? {} : { username: t.username }),
        ...(t.password === undefined ? {} : { password: t.password }),
        // No failoverDetector: in ioredis 6 its disconnect during a reconnection can leave the client
        // closed for good (seen in test/integration/redis-sentinel.test.ts). A killed master closes the
        // connection itself; on a manual failover Sentinel sends CLIENT KILL TYPE normal and pubsub to
        // the demoted master, which closes ours, and ioredis then asks the sentinels again.
        ...options,
      });
    case 'cluster': {
      const { retryStrategy, lazyConnect, enableOfflineQueue, ...nodeOptions } = options;
      const clusterOptions: ClusterOptions = {
        redisOptions: nodeOptions,
        shardedSubscribers: extra.sharded === true,
        ...(lazyConnect === undefined ? {} : { lazyConnect }),
        ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
        ...(retryStrategy === undefined ? {} : { clusterRetryStrategy: (times: number) => retryStrategy?.(times) ?? null }),
      };
      return new Cluster(t.nodes, clusterOptions);
    }
  }
}
