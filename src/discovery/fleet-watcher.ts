/**
 * FleetWatcher: discovery once per fleet. Every process of a fleet runs one;
 * the one that holds the Redis watcher lease (membership/redis-lease.ts)
 * runs the wrapped membership source (a Kubernetes watch, a DNS resolver)
 * and publishes each of its snapshots into the cluster's Redis snapshot +
 * pub/sub path (MembershipPublisher: the one write script, its lineage and
 * version rules unchanged), so a thousand processes cost the API server or
 * the DNS server one watcher. Every process — the watcher too — reads the
 * membership through RedisMembership as it would without discovery.
 *
 * The lease: `leaseMs` long, renewed every `renewMs` (a third of it by
 * default); a process that holds none tries to take it at the same pace, so
 * after a holder dies (its lease lapses) another holds it within one round.
 * Every write carries the holder's fencing token and the write script
 * refuses a token the lease is not held under: a holder that was stopped
 * (SIGSTOP, a long pause) past its lease and publishes on waking is refused,
 * and steps down. A holder that cannot confirm its lease in time (Redis
 * frozen: every command has a deadline) steps down on its own before the
 * lease could have lapsed, closing its source.
 */
import type { Logger } from 'pino';
import { checkOptionKeys, isPoiseError } from '../core/errors.js';
import type { MembershipSnapshot } from '../core/spec.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import { integerIn } from '../core/validate.js';
import { defaultLogger } from '../log.js';
import { RedisLease } from '../membership/redis-lease.js';
import { MembershipPublisher } from '../membership/redis-publisher.js';
import type { RedisClientOptions, RedisConnectionOptions } from '../membership/redis-target.js';
import type { MembershipSource } from '../membership/source.js';

/** Options of {@link FleetWatcher}. Where Redis is: {@link RedisConnectionOptions}. */
export interface FleetWatcherOptions extends RedisConnectionOptions {
  /** The cluster the watcher publishes (the one every process's RedisMembership follows). */
  cluster: string;
  /** Makes the source to run while this process holds the lease (a new one at each election). */
  source: () => MembershipSource;
  /** Key prefix; default `poise`. */
  prefix?: string;
  /** Lease length, ms, in [100, 600000]; default 15000. */
  leaseMs?: number;
  /** Renew (holder) and acquire (others) every this many ms; default leaseMs / 3. */
  renewMs?: number;
  /** Deadline of every Redis command, ms; default min(2000, leaseMs / 5). */
  commandTimeoutMs?: number;
  /** This process's holder id; default random. */
  holder?: string;
  /** Extra ioredis options. */
  redisOptions?: RedisClientOptions;
  /** Clock and timers of the rounds; default real time. */
  timers?: TimerSource;
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
}

const OPTION_KEYS = [
  'cluster',
  'source',
  'prefix',
  'leaseMs',
  'renewMs',
  'commandTimeoutMs',
  'holder',
  'redisOptions',
  'timers',
  'logger',
  'url',
  'sentinels',
  'sentinelName',
  'redisCluster',
];

/**
 * Runs `source` in exactly one process of the fleet at a time and publishes
 * what it finds into Redis.
 *
 * @example
 * const watcher = new FleetWatcher({ url, cluster: 'api', source: () => kubernetesSource('shop/api:http') });
 * await watcher.start();
 * await bindMembership(new RedisMembership({ url, cluster: 'api' }), balancer);
 */
export class FleetWatcher {
  readonly #opts: FleetWatcherOptions;
  readonly #lease: RedisLease;
  readonly #publisher: MembershipPublisher;
  readonly #timers: TimerSource;
  readonly #log: Logger;
  readonly #leaseMs: number;
  readonly #renewMs: number;
  readonly #timeoutMs: number;
  #token: number | undefined;
  /** When the last successful renew (or the acquisition) was sent, on the timers' clock. */
  #heldSince = 0;
  #source: MembershipSource | undefined;
  #timer: unknown;
  #closed = false;
  #round: Promise<void> = Promise.resolve();
  /** The latest snapshot not yet published under the current token. */
  #latest: MembershipSnapshot | undefined;
  #publishing = false;
  /** What a test or benchmark counts. */
  readonly counts = { rounds: 0, elected: 0, steppedDown: 0, published: 0, fenced: 0, publishFailures: 0, renewFailures: 0 };

  constructor(opts: FleetWatcherOptions) {
    checkOptionKeys(opts, OPTION_KEYS, 'options');
    this.#opts = opts;
    this.#timers = timersOption(opts.timers);
    this.#leaseMs = integerIn(opts.leaseMs ?? 15_000, 'options.leaseMs', 100, 600_000);
    this.#renewMs = integerIn(opts.renewMs ?? Math.floor(this.#leaseMs / 3), 'options.renewMs', 1, Math.floor(this.#leaseMs / 2));
    this.#timeoutMs = integerIn(
      opts.commandTimeoutMs ?? Math.max(1, Math.min(2000, Math.floor(this.#leaseMs / 5))),
      'options.commandTimeoutMs',
      1,
      this.#leaseMs,
    );
    if (typeof opts.source !== 'function') throw new TypeError('options.source must be a function that makes a MembershipSource');
    this.#log = (opts.logger ?? defaultLogger()).child({ component: 'fleet-watcher', cluster: opts.cluster });
    const redisOptions: RedisClientOptions = { commandTimeout: this.#timeoutMs, ...opts.redisOptions };
    const connection: RedisConnectionOptions = {
      url: opts.url,
      sentinels: opts.sentinels,
      sentinelName: opts.sentinelName,
      redisCluster: opts.redisCluster,
    };
    this.#lease = new RedisLease({
      ...connection,
      cluster: opts.cluster,
      prefix: opts.prefix,
      leaseMs: this.#leaseMs,
      commandTimeoutMs: this.#timeoutMs,
      holder: opts.holder,
      redisOptions,
    });
    this.#publisher = new MembershipPublisher({
      ...connection,
      cluster: opts.cluster,
      prefix: opts.prefix,
      redisOptions,
      logger: opts.logger,
    });
  }

  /** This process's holder id. */
  get holder(): string {
    return this.#lease.holder;
  }

  /** Whether this process holds the lease (and runs the source) now. */
  get leader(): boolean {
    return this.#token !== undefined;
  }

  /** The fencing token this process holds the lease under, or undefined. */
  get token(): number | undefined {
    return this.#token;
  }

  /** Runs the first round (tries to take the lease), then one round every `renewMs`. */
  async start(): Promise<void> {
    await this.#runRound();
  }

  /** Stops the source, gives the lease up (another process takes it at its next round) and disconnects. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#timers.clearTimeout(this.#timer);
    await this.#round;
    const token = this.#token;
    await this.#stepDown('closed');
    if (token !== undefined) await this.#lease.release(token);
    await this.#publisher.close();
    await this.#lease.close();
  }

  #runRound(): Promise<void> {
    this.#round = this.#roundOnce().finally(() => {
      if (!this.#closed) this.#timer = this.#timers.setTimeout(() => void this.#runRound(), this.#renewMs);
    });
    return this.#round;
  }

  async #roundOnce(): Promise<void> {
    this.counts.rounds++;
    const sentAt = this.#timers.now();
    const token = this.#token;
    if (token !== undefined) {
      let held: boolean;
      try {
        held = await this.#lease.renew(token);
      } catch (err) {
        this.counts.renewFailures++;
        // Not confirmed: hold on only while the lease cannot have lapsed by the next round's answer.
        if (this.#timers.now() - this.#heldSince + this.#renewMs + this.#timeoutMs >= this.#leaseMs) {
          this.#log.warn({ err: (err as Error).message, token }, 'watcher lease not confirmed in time; stepping down');
          await this.#stepDown('unconfirmed');
        }
        return;
      }
      if (!held) {
        this.#log.warn({ token }, 'watcher lease lost; stepping down');
        await this.#stepDown('lost');
        return;
      }
      this.#heldSince = sentAt;
      if (this.#latest !== undefined) void this.#flush();
      return;
    }
    let acquired: number | undefined;
    try {
      acquired = await this.#lease.acquire();
    } catch (err) {
      this.#log.debug({ err: (err as Error).message }, 'watcher lease: redis unavailable');
      return;
    }
    if (acquired === undefined) return;
    if (this.#closed) {
      // Closed while the acquire was in flight: give the lease back now, not at its expiry (close() awaits this round).
      await this.#lease.release(acquired).catch(() => {});
      return;
    }
    this.#token = acquired;
    this.#heldSince = sentAt;
    this.counts.elected++;
    this.#log.info({ token: acquired, holder: this.holder }, 'elected fleet watcher');
    void this.#runSource(acquired);
  }

  async #runSource(token: number): Promise<void> {
    const source = this.#opts.source();
    this.#source = source;
    try {
      await source.start((snapshot) => {
        if (this.#token !== token) return;
        this.#latest = snapshot;
        void this.#flush();
      });
    } catch (err) {
      this.#log.error({ err: (err as Error).message }, 'the watcher source did not start; stepping down');
      if (this.#token === token) {
        await this.#stepDown('source failed');
        await this.#lease.release(token);
      }
    }
  }

  /** Publishes the latest snapshot under the held token, one write at a time (only the newest waiting one). */
  async #flush(): Promise<void> {
    if (this.#publishing) return;
    this.#publishing = true;
    try {
      for (;;) {
        const snapshot = this.#latest;
        const token = this.#token;
        if (snapshot === undefined || token === undefined) return;
        try {
          await this.#publisher.apply(
            { cluster: this.#opts.cluster, backends: snapshot.backends },
            { fence: { key: this.#lease.keys.lease, token } },
          );
          this.counts.published++;
          if (this.#latest === snapshot) this.#latest = undefined;
        } catch (err) {
          if (isPoiseError(err, 'Conflict') && err.field === 'fence') {
            this.counts.fenced++;
            this.#log.warn({ token, err: err.message }, 'publish refused: this watcher no longer holds the lease; stepping down');
            if (this.#token === token) await this.#stepDown('fenced');
            return;
          }
          // Redis away: kept, and published again at the next renewed round.
          this.counts.publishFailures++;
          this.#log.warn({ err: (err as Error).message }, 'publish failed; retrying at the next round');
          return;
        }
      }
    } finally {
      this.#publishing = false;
    }
  }

  async #stepDown(reason: string): Promise<void> {
    const source = this.#source;
    const wasLeader = this.#token !== undefined;
    this.#token = undefined;
    this.#source = undefined;
    this.#latest = undefined;
    if (wasLeader) {
      this.counts.steppedDown++;
      this.#log.info({ reason }, 'fleet watcher stepped down');
    }
    await source?.close();
  }
}
