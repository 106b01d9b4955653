/**
 * RedisLease: the fleet watcher's election. One holder at a time holds the
 * lease key (`SET NX PX`, in LEASE_SCRIPT) under a fencing token that grows
 * with every acquisition; the holder renews it well within its length, and
 * every membership write it makes carries the token, which the write script
 * checks (WRITE_SCRIPT, ARGV[12]): a holder that stalled past its lease and
 * writes late is refused, whatever its own clock believes.
 *
 * Every command has a deadline (ioredis `commandTimeout`): a Redis that
 * froze answers nothing, and a holder that cannot renew within its lease
 * must step down on its own — the lease has lapsed in Redis by then and
 * another process may hold it.
 */
import { randomBytes } from 'node:crypto';
import { PoiseError } from '../core/errors.js';
import { integerIn } from '../core/validate.js';
import { validateName } from './name.js';
import { redisUnavailable } from './redis-errors.js';
import { DEFAULT_PREFIX, watcherKeys } from './redis-keys.js';
import { LEASE_SCRIPT, RELEASE_SCRIPT } from './redis-script.js';
import {
  createRedisClient,
  describeTarget,
  resolveRedisTarget,
  type RedisClient,
  type RedisClientOptions,
  type RedisConnectionOptions,
} from './redis-target.js';

/** Options of {@link RedisLease}. */
export interface RedisLeaseOptions extends RedisConnectionOptions {
  /** The cluster whose watcher this lease elects. */
  cluster: string;
  /** Key prefix; default `poise`. */
  prefix?: string;
  /** Lease length, ms, in [100, 600000]. */
  leaseMs: number;
  /** Deadline of every command, ms. */
  commandTimeoutMs: number;
  /** This holder's id; default 16 random hex digits. */
  holder?: string;
  /** Extra ioredis options. */
  redisOptions?: RedisClientOptions;
}

type LeaseClient = RedisClient & {
  poiseLease(lease: string, token: string, holder: string, ms: string, held: string): Promise<unknown>;
  poiseRelease(lease: string, value: string): Promise<unknown>;
};

/** The watcher lease as {@link RedisLease.inspect} reads it. */
export interface LeaseView {
  /** The holder now, or undefined when the lease is free (lapsed, released, never taken). */
  holder: { token: number; id: string; ttlMs: number } | undefined;
  /** The last fencing token given out; 0 when no watcher was ever elected. */
  lastToken: number;
}

/** One process's side of the watcher lease. */
export class RedisLease {
  readonly holder: string;
  readonly keys: { lease: string; token: string };
  readonly #leaseMs: number;
  readonly #redis: LeaseClient;
  readonly #url: string;
  #lastError: string | undefined;

  constructor(opts: RedisLeaseOptions) {
    const target = resolveRedisTarget(opts);
    this.keys = watcherKeys(validateName(opts.cluster, 'options.cluster'), validateName(opts.prefix ?? DEFAULT_PREFIX, 'options.prefix'), {
      hashTag: target.kind === 'cluster',
    });
    this.#leaseMs = integerIn(opts.leaseMs, 'options.leaseMs', 100, 600_000);
    const timeout = integerIn(opts.commandTimeoutMs, 'options.commandTimeoutMs', 1, this.#leaseMs);
    this.holder = opts.holder ?? randomBytes(8).toString('hex');
    this.#url = describeTarget(target);
    this.#redis = createRedisClient(target, { lazyConnect: true, commandTimeout: timeout, ...opts.redisOptions }) as LeaseClient;
    this.#redis.defineCommand('poiseLease', { lua: LEASE_SCRIPT, numberOfKeys: 2 });
    this.#redis.defineCommand('poiseRelease', { lua: RELEASE_SCRIPT, numberOfKeys: 1 });
    this.#redis.on('error', (err: Error) => {
      this.#lastError = err.message;
    });
  }

  async #run(held: number | undefined): Promise<number | undefined> {
    let reply: unknown;
    try {
      reply = await this.#redis.poiseLease(
        this.keys.lease,
        this.keys.token,
        this.holder,
        String(this.#leaseMs),
        held === undefined ? '' : String(held),
      );
    } catch (err) {
      throw redisUnavailable(this.#url, err, this.#lastError, 'lease unknown');
    }
    if (!Array.isArray(reply) || (reply[0] !== '1' && reply[0] !== '0'))
      throw new PoiseError('Corrupt', `redis: unexpected reply from the lease script: ${JSON.stringify(reply)}`, { field: 'redis' });
    return reply[0] === '1' ? Number(reply[1]) : undefined;
  }

  /** Takes the lease when it is free: the token it is now held under, or undefined (another holder has it). Rejects `Unavailable`. */
  acquire(): Promise<number | undefined> {
    return this.#run(undefined);
  }

  /** Extends the lease held under `token`; false when it is no longer held under it. Rejects `Unavailable`. */
  async renew(token: number): Promise<boolean> {
    return (await this.#run(token)) === token;
  }

  /** Gives the lease up (only while it is still held under `token`), so another process takes it at once. Never rejects. */
  async release(token: number): Promise<void> {
    await this.#redis.poiseRelease(this.keys.lease, `${token}:${this.holder}`).catch(() => undefined);
  }

  /**
   * Who holds the lease now, read only (what `poise top --redis` shows): the
   * holder's token, id and the ms its lease has left, or none; and the last
   * token given out (0: no watcher was ever elected for the cluster). Rejects `Unavailable`.
   */
  async inspect(): Promise<LeaseView> {
    let replies: [Error | null, unknown][] | null;
    try {
      replies = await this.#redis.pipeline().get(this.keys.lease).pttl(this.keys.lease).get(this.keys.token).exec();
    } catch (err) {
      throw redisUnavailable(this.#url, err, this.#lastError, 'lease unknown');
    }
    const failed = replies?.find(([e]) => e !== null)?.[0];
    if (replies === null || failed)
      throw redisUnavailable(this.#url, failed ?? new Error('pipeline aborted'), this.#lastError, 'lease unknown');
    const [value, ttl, last] = replies.map(([, v]) => v);
    const m = typeof value === 'string' ? /^(\d+):(.*)$/s.exec(value) : null;
    return {
      holder: m === null ? undefined : { token: Number(m[1]), id: m[2]!, ttlMs: Math.max(0, Number(ttl)) },
      lastToken: typeof last === 'string' ? Number(last) : 0,
    };
  }

  /** Disconnects. */
  async close(): Promise<void> {
    if (this.#redis.status === 'end') return;
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }
}
