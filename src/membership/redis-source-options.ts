/**
 * What a RedisMembership is told: where Redis is, which cluster, the local
 * copies to start from when Redis is unavailable, and the limits and timers
 * of the read side (redis-source.ts).
 */
import type { Logger } from 'pino';
import type { RedisClientOptions, RedisConnectionOptions } from './redis-target.js';

/**
 * Options of {@link RedisMembership}. Where Redis is: exactly one of `url`
 * (one server, or a `redis+sentinel://` URL), `sentinels` + `sentinelName`,
 * `redisCluster` ({@link RedisConnectionOptions}).
 */
export interface RedisMembershipOptions extends RedisConnectionOptions {
  /** Cluster to follow. */
  cluster: string;
  /** Key prefix; default `poise`. */
  prefix?: string;
  /** A document file (JSON/YAML) to run from when Redis is unavailable at start. */
  fallbackFile?: string;
  /**
   * The last known snapshot: a file path (read at start when Redis is
   * unavailable, and rewritten atomically after every applied version), or
   * a snapshot held in memory. Preferred over `fallbackFile` when present.
   */
  lastKnown?: string | { version: number; lineage?: string; document: unknown };
  /** Largest accepted notice or snapshot; default 1 MiB. Larger ones are refused. */
  maxMessageBytes?: number;
  /** Reconnect backoff: uniform in [baseMs, min(maxMs, baseMs · 2^(attempt + 1))) (core/backoff.ts); default 100 / 5000 ms. */
  backoff?: { baseMs?: number; maxMs?: number };
  /** How long start() waits for Redis before falling back; default 3000 ms. */
  startTimeoutMs?: number;
  /**
   * When Redis does not answer within `startTimeoutMs` and neither
   * `lastKnown` nor `fallbackFile` gives a membership: `false` (default)
   * makes start() wait for Redis; `true` makes it reject with `Unavailable`
   * naming the server and the reason (and close the source).
   */
  failFast?: boolean;
  /** Window in which identical rejection warnings (the same malformed notice again and again) are logged once, then counted; default 30000 ms. */
  warnWindowMs?: number;
  /**
   * Extra ioredis options (tls, password, timeouts); they override the
   * defaults. `commandTimeout` (default 5000 ms) is the deadline of every
   * command: a frozen Redis fails the snapshot read (retried with backoff)
   * and the subscription (reconnected) instead of holding them for ever.
   */
  redisOptions?: RedisClientOptions;
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
}

/** Where an applied snapshot came from (logged, and reported to `onApplied` observers). */
export type SnapshotOrigin = 'notice' | 'snapshot' | 'fallback' | 'last-known';
