/**
 * The round loop of a fleet-wide state shared through Redis (the retry
 * budget's floor, the connection budget's shares): one Redis client that
 * fails fast while Redis is away, rounds that never overlap, and one round
 * every interval after the first. The round itself (its script, what it
 * writes into the table, its fallback when Redis is away) is the caller's.
 */
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import type { Balancer } from '../runtime/balancer.js';
import { createRedisClient, resolveRedisTarget, type RedisClient, type RedisConnectionOptions } from './redis-target.js';

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

/** Serialised rounds of `round`, every `everyMs()` after the first. */
export class FleetRounds<T> {
  readonly #redis: RedisClient;
  readonly #round: () => Promise<T | undefined>;
  readonly #everyMs: () => number;
  readonly #name: string;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(name: string, redis: RedisClient, round: () => Promise<T | undefined>, everyMs: () => number) {
    this.#name = name;
    this.#redis = redis;
    this.#round = round;
    this.#everyMs = everyMs;
  }

  /** True once {@link stop} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Connects (a failure is left to the first round to report), runs a first round, then one every interval. */
  async start(): Promise<void> {
    if (this.#closed) throw new PoiseError('Closed', `${this.#name}: is closed`);
    try {
      await this.#redis.connect();
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

  /** Stops the rounds; resolves when the one running has ended. */
  async stop(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      void this.sync().then(() => this.#schedule());
    }, this.#everyMs());
    this.#timer.unref();
  }
}
