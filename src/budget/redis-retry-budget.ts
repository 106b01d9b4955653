/**
 * The fleet retry budget: the processes of one cluster share one retry
 * floor through Redis, so adding clients does not add floors (Finagle's 10
 * retries/s per client multiply with the number of clients).
 *
 * Every `intervalMs` (default a tenth of the budget's window) the owner of a
 * Balancer runs one Lua script that adds the requests and retries its
 * process made since the last round to the current wall-clock bucket of the
 * cluster (`HINCRBY` on a hash per bucket, one field pair per process, the
 * key expiring one window after its bucket) and reads the window back: the
 * processes that counted in it (P) and the fleet's requests and retries.
 * The process then takes floor / P as its share of the floor, in its
 * LoadTable, where every thread's grant reads it. Each process grants
 *
 *     max(floor / P, ratio × its own requests in the window) − its own retries in the window
 *
 * so the fleet as a whole stays within `max(floor, ratio × fleet requests)`
 * plus at most the floor (when some processes are above their floor share
 * and others below), without a Redis round trip per retry and without the
 * overshoot of stale fleet counts: no process spends a retry that another
 * process's allowance was counted for. When Redis is away — refused, or no
 * reply within the round's deadline (the interval, at least 100 ms: a
 * frozen Redis) — the process falls back to its local budget (the whole
 * floor) at once and says so once in its log; the counts it could not add
 * are added by the next round that succeeds. Counts sent by a round that
 * missed its deadline count as added (Redis runs the script when it answers
 * again), so no count is added twice.
 *
 * Keys: `<prefix>:{<cluster>}:retries:<bucket>` (a hash tag, so a Redis
 * Cluster keeps a window's keys in one slot), fields `<process>:q` and
 * `<process>:r`.
 */
import { randomBytes } from 'node:crypto';
import { invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';
import { RETRY_BUCKETS } from '../load/retry-region.js';
import { defaultLogger, type Logger } from '../log.js';
import type { Balancer } from '../runtime/balancer.js';
import { validateName } from '../membership/name.js';
import { DEFAULT_PREFIX } from '../membership/redis-keys.js';
import { DeadlineMissed, FleetRounds, fleetBalancer, roundClient } from './fleet-rounds.js';
import type { RedisClient, RedisConnectionOptions } from '../membership/redis-target.js';

/**
 * KEYS: the window's bucket keys, newest first. ARGV: process id, requests
 * and retries to add to KEYS[1], its expiry (ms). Replies strings
 * {processes, requests, retries} of the window (no Lua number rounding).
 */
const SYNC_SCRIPT = `
redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':q', ARGV[2])
redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':r', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local q, r, n, seen = 0, 0, 0, {}
for i = 1, #KEYS do
  local h = redis.call('HGETALL', KEYS[i])
  for j = 1, #h, 2 do
    local p, kind = string.match(h[j], '^(.*):(%a)$')
    if p then
      if kind == 'q' then q = q + tonumber(h[j + 1]) else r = r + tonumber(h[j + 1]) end
      if not seen[p] then
        seen[p] = true
        n = n + 1
      end
    end
  end
end
return {tostring(n), tostring(q), tostring(r)}
`;

/** Options of {@link FleetRetryBudget}: where Redis is (one of `url`, `sentinels`, `redisCluster`) and which cluster. */
export interface FleetRetryBudgetOptions extends RedisConnectionOptions {
  /** The Balancer whose retry budget (its `retryBudget` option or its membership document's) the fleet shares. */
  balancer: Balancer;
  /** The cluster whose processes share the floor; default the Balancer's cluster (from its membership). */
  cluster?: string;
  /** Key prefix; default `poise`. */
  prefix?: string;
  /** Time between rounds, ms; default a tenth of the budget's window. */
  intervalMs?: number;
  /** Wall-clock ms (all processes must agree on bucket boundaries); default `Date.now`. */
  clock?: () => number;
  /** Default `defaultLogger()`. */
  logger?: Logger;
}

/** The fleet as the last round saw it. */
export interface FleetRetryCounts {
  /** Processes that counted requests or retries in the window (the floor is divided among them). */
  processes: number;
  /** The fleet's requests in the window. */
  requests: number;
  /** The fleet's retries in the window. */
  retries: number;
}

/**
 * Shares a Balancer's retry floor with the other processes of its cluster
 * (see the module comment). Start it once in the owner thread, after the
 * Balancer has a retry budget.
 *
 * @example
 * const balancer = new Balancer({ retryBudget: { ratio: 0.2, minRetriesPerSecond: 5 } });
 * const fleet = new FleetRetryBudget({ balancer, cluster: 'db', url: 'redis://127.0.0.1:6379' });
 * await fleet.start();
 * // ... on shutdown
 * await fleet.close();
 */
export class FleetRetryBudget {
  /** This process's field name in the bucket hashes. */
  readonly processId = randomBytes(8).toString('hex');
  readonly #balancer: Balancer;
  readonly #redis: RedisClient;
  readonly #cluster: string | undefined;
  readonly #prefix: string;
  readonly #intervalMs: number | undefined;
  readonly #clock: () => number;
  readonly #log: Logger;
  readonly #rounds: FleetRounds<FleetRetryCounts>;
  #requests = 0;
  #retries = 0;
  #last: FleetRetryCounts | undefined;
  #away = false;

  /** Throws `InvalidConfig` naming a bad option; connects lazily (on {@link start}). */
  constructor(opts: FleetRetryBudgetOptions) {
    this.#balancer = fleetBalancer(opts, ['intervalMs', 'clock']);
    this.#cluster = opts.cluster === undefined ? undefined : validateName(opts.cluster, 'options.cluster');
    this.#prefix = opts.prefix === undefined ? DEFAULT_PREFIX : validateName(opts.prefix, 'options.prefix');
    this.#intervalMs = opts.intervalMs === undefined ? undefined : integerIn(opts.intervalMs, 'options.intervalMs', 10, 3_600_000);
    if (opts.clock !== undefined && typeof opts.clock !== 'function')
      invalidConfig('options.clock', 'must be a function returning milliseconds', opts.clock);
    this.#clock = opts.clock ?? Date.now;
    this.#log = opts.logger ?? defaultLogger();
    this.#redis = roundClient(opts);
    this.#redis.defineCommand('poiseRetrySync', { lua: SYNC_SCRIPT });
    const totals = this.#balancer.ownerTable.retries.totals();
    this.#requests = totals.requests;
    this.#retries = totals.allowed;
    this.#rounds = new FleetRounds(
      'FleetRetryBudget',
      this.#redis,
      () => this.#round(),
      () => this.#intervalMs ?? this.#balancer.ownerTable.retries.config()?.bucketMs ?? 1000,
      // Stopped: this process has the whole floor again.
      { stopped: () => this.#balancer.ownerTable.retries.shareFloor(1) },
    );
  }

  /** The fleet as the last successful round saw it (undefined before one, or while Redis is away). */
  get fleet(): FleetRetryCounts | undefined {
    return this.#away ? undefined : this.#last;
  }

  /**
   * Connects, runs a first round, then one every interval. Resolves after
   * the first round (Redis away or not answering within the deadline: on
   * the local budget).
   */
  start(): Promise<void> {
    return this.#rounds.start();
  }

  /**
   * One round now: adds this process's counts, reads the window, sets this
   * process's floor share. Returns the fleet's counts, or undefined when
   * Redis is away (no answer within the round's deadline included) or the
   * Balancer has no budget (then the local budget applies: the whole
   * floor). Settles within one deadline of the round before it.
   */
  sync(): Promise<FleetRetryCounts | undefined> {
    return this.#rounds.sync();
  }

  /** Stops the rounds, gives this process the whole floor again, and disconnects. */
  close(): Promise<void> {
    return this.#rounds.stop();
  }

  async #round(): Promise<FleetRetryCounts | undefined> {
    const region = this.#balancer.ownerTable.retries;
    const config = region.config();
    const cluster = this.#cluster ?? this.#balancer.cluster;
    if (config === undefined || cluster === undefined || this.#rounds.closed) return undefined;
    const totals = region.totals();
    // Totals wrap at 2^32: the difference modulo 2^32 is what was added since.
    const requests = (totals.requests - this.#requests) >>> 0;
    const retries = (totals.allowed - this.#retries) >>> 0;
    const n = Math.floor(this.#clock() / config.bucketMs);
    const keys: string[] = [];
    for (let k = 0; k < RETRY_BUCKETS; k++) keys.push(`${this.#prefix}:{${cluster}}:retries:${n - k}`);
    const windowMs = config.bucketMs * RETRY_BUCKETS;
    try {
      const reply = await this.#rounds.within(
        (this.#redis as unknown as { poiseRetrySync(...args: (string | number)[]): Promise<string[]> }).poiseRetrySync(
          RETRY_BUCKETS,
          ...keys,
          this.processId,
          requests,
          retries,
          windowMs + config.bucketMs,
        ),
      );
      this.#requests = totals.requests;
      this.#retries = totals.allowed;
      const counts = { processes: Number(reply[0]), requests: Number(reply[1]), retries: Number(reply[2]) };
      if (!this.#rounds.closed) region.shareFloor(counts.processes);
      this.#last = counts;
      if (this.#away) this.#log.info({ cluster }, 'poise: fleet retry budget back on Redis');
      this.#away = false;
      return counts;
    } catch (err) {
      if (err instanceof DeadlineMissed) {
        // Sent: Redis adds these counts when it answers again; the next round must not send them twice.
        this.#requests = totals.requests;
        this.#retries = totals.allowed;
      }
      region.shareFloor(1);
      if (!this.#away) {
        this.#log.warn(
          { cluster, err: err instanceof Error ? err.message : String(err) },
          'poise: fleet retry budget: Redis away, local budget',
        );
      }
      this.#away = true;
      return undefined;
    }
  }
}
