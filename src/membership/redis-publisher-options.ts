/**
 * What a MembershipPublisher is told: where Redis is, which cluster, the
 * limits of its writes, how many replicas must hold each one, and which
 * notices it publishes (redis-publisher.ts).
 */
import type { Logger } from 'pino';
import type { RedisClientOptions, RedisConnectionOptions } from './redis-target.js';

/**
 * Options of {@link MembershipPublisher}. Where Redis is: exactly one of
 * `url` (one server, or a `redis+sentinel://` URL), `sentinels` +
 * `sentinelName`, `redisCluster` ({@link RedisConnectionOptions}).
 */
export interface MembershipPublisherOptions extends RedisConnectionOptions {
  /** Cluster name. */
  cluster: string;
  /** Key prefix; default `poise`. */
  prefix?: string;
  /** Largest stored snapshot / notice; default 1 MiB. Readers must allow at least as much. */
  maxMessageBytes?: number;
  /** Attempts of a read-modify-write under contention; default 16. */
  maxAttempts?: number;
  /**
   * Replicas that must acknowledge every write (Redis `WAIT`), in [0, 100];
   * default 0 (the master's acknowledgement is enough, as in plain Redis).
   * A write that fewer replicas acknowledge within `waitTimeoutMs` throws
   * `NotReplicated`: it is stored on the master and published, but a
   * failover before it replicates can lose it.
   */
  waitReplicas?: number;
  /** How long a write waits for `waitReplicas` acknowledgements, in [1, 60000] ms; default 1000. */
  waitTimeoutMs?: number;
  /**
   * `'delta'` (default): small changes publish delta notices, which readers
   * of this release and later apply; `'full'`: every notice is the whole
   * snapshot, which readers of every release apply. Use `'full'` until every
   * reader of the fleet runs a release that understands delta notices.
   */
  notices?: 'delta' | 'full';
  /**
   * Extra ioredis options (tls, password, timeouts); they override the
   * defaults. `commandTimeout` (default 5000 ms + `waitTimeoutMs`) is the
   * deadline of every command: a write that gets no reply in time throws
   * `Unavailable` saying it may still be applied.
   */
  redisOptions?: RedisClientOptions;
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
}
