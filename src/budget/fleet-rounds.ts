/**
 * The one lifecycle of the fleet budgets (the retry budget's floor, the
 * connection budget's shares: fleet state shared through Redis): one Redis
 * client that fails fast while Redis is away, `start` (the budget's own
 * setup, connect, a first round, then one every interval), `sync` (one
 * round now, never overlapping another) and `stop` (the budget's own
 * teardown around the last round, then disconnect). The round itself (its
 * script, what it writes into the table, its fallback when Redis is away)
 * and the setup and teardown are the budget's.
 *
 * Every command of a round has a deadline ({@link FleetRounds.deadlineMs}:
 * the round interval, at least 100 ms): a Redis that does not answer —
 * stopped (SIGSTOP), behind a network black hole, paused (`CLIENT PAUSE`) —
 * is away exactly like one that refuses the connection, so the round falls
 * back within one deadline instead of waiting for ever. A command that
 * missed its deadline was sent: Redis may still run it when it answers
 * again, so each round's script must stay correct when it runs late.
 */
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import type { Balancer } from '../runtime/balancer.js';
import { createRedisClient, resolveRedisTarget, type RedisClient, type RedisConnectionOptions } from '../membership/redis-target.js';

/**
 * Checks a fleet state's options object: only `keys`, the Redis target
 * options and the common `balancer`, `cluster`, `prefix`, `logger`; returns
 * its Balancer. Throws `InvalidConfig` naming the field.
 */
export function fleetBalancer(opts: { balancer: Balancer }, keys: readonly string[]): Balancer {
  if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
  checkOptionKeys(opts, ['balancer', 'cluster', 'prefix', 'logger', 'url', 'sentinels', 'sentinelName', 'redisCluster', ...keys]);
  if (typeof opts.balancer !== 'object' || opts.balancer === null || opts.balancer.ownerTable === undefined)
    invalidConfig('options.balancer', 'must be a Balancer', opts.balancer);
  return opts.balancer;
}

/** A client for rounds: no offline queue, one attempt per command, reconnecting in the background. */
export function roundClient(opts: RedisConnectionOptions): RedisClient {
  const redis = createRedisClient(resolveRedisTarget(opts), {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    retryStrategy: (times) => Math.min(1000, 50 * times),
  });
  redis.on('error', () => {}); // reported by the round that fails
  return redis;
}

/** The rejection of a command that missed its deadline (it may still run when Redis answers again). */
export class DeadlineMissed extends PoiseError {
  constructor(what: string, ms: number) {
    super('Unavailable', `${what}: no reply from Redis within ${ms} ms (frozen or unreachable); treated as away`, { field: 'redis' });
  }
}

/**
 * `promise`, or a {@link DeadlineMissed} rejection after `ms`. The command
 * itself is not withdrawn: its late reply (or error) is dropped.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineMissed(what, ms)), ms);
  });
  promise.catch(() => {}); // a late failure is nobody's: the deadline already answered
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A budget's own steps around the lifecycle, each optional. */
export interface FleetHooks {
  /** Before the client connects, in {@link FleetRounds.start} (after the closed check). */
  starting?: () => void;
  /** First thing in {@link FleetRounds.stop}, before the round running ends (stop following events that would ask for rounds). */
  stopping?: () => void;
  /** After the last round ended, before the client disconnects (hand back what this process holds). */
  stopped?: () => Promise<void> | void;
}

/** Serialised rounds of `round`, every `everyMs()` after the first; each round's commands within {@link deadlineMs}. */
export class FleetRounds<T> {
  readonly #redis: RedisClient;
  readonly #round: () => Promise<T | undefined>;
  readonly #everyMs: () => number;
  readonly #name: string;
  readonly #hooks: FleetHooks;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(name: string, redis: RedisClient, round: () => Promise<T | undefined>, everyMs: () => number, hooks: FleetHooks = {}) {
    this.#name = name;
    this.#redis = redis;
    this.#round = round;
    this.#everyMs = everyMs;
    this.#hooks = hooks;
  }

  /** The deadline of every command of a round, ms: the round interval, at least 100 ms. */
  deadlineMs(): number {
    return Math.max(100, this.#everyMs());
  }

  /** `promise` within {@link deadlineMs} ({@link withDeadline}). */
  within<T>(promise: Promise<T>): Promise<T> {
    return withDeadline(promise, this.deadlineMs(), this.#name);
  }

  /** True once {@link stop} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Connects (a failure, or no answer within the deadline, is left to the
   * first round to report), runs a first round, then one every interval.
   */
  async start(): Promise<void> {
    if (this.#closed) throw new PoiseError('Closed', `${this.#name}: is closed`);
    this.#hooks.starting?.();
    try {
      await this.within(this.#redis.connect());
    } catch {
      // The first round reports it and falls back; ioredis keeps reconnecting.
    }
    await this.sync();
    this.#schedule();
  }

  /** One round now, after the one running (rounds never overlap). */
  sync(): Promise<T | undefined> {
    const round = this.#running.then(() => this.#round());
    this.#running = round.catch(() => undefined);
    return round;
  }

  /** Stops the rounds and disconnects; resolves when the one running has ended and the budget's teardown is done. A second stop does nothing. */
  async stop(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#hooks.stopping?.();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#running;
    await this.#hooks.stopped?.();
    this.#redis.disconnect();
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      void this.sync().then(() => this.#schedule());
    }, this.#everyMs());
    this.#timer.unref();
  }
}
