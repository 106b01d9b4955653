/**
 * The fleet connection budget: the processes of one cluster share each
 * backend's connection limit (PostgreSQL's `max_connections` minus a
 * reserve) through Redis, so that the fleet as a whole never opens the
 * connection that makes the server answer "too many clients", however many
 * processes an autoscaler adds.
 *
 * Every `ttlMs / 3` the owner of a Balancer runs one Lua script
 * (redis-script.ts, `BUDGET_SCRIPT`) that renews its lease and takes its
 * share of every live backend: the budget is split among the live processes
 * that route to the backend by their demand (connections in use plus
 * connection leases refused at the share since the last round), and a
 * process only grows into capacity the others have handed back, so the sum
 * of the shares never exceeds the budget. The share goes into the LoadTable
 * (load/connection-budget.ts), where every thread's connection lease is
 * checked against it exactly. A process that stops renewing (crashed,
 * SIGKILLed) loses its lease after `ttlMs`, and its shares return to the
 * others.
 *
 * When Redis is away — it refuses the connection, or a command gets no
 * reply within the round's deadline (`ttlMs / 3`, at least 100 ms: a
 * stopped or paused Redis, a network black hole) — a process keeps the
 * shares it has and never grows them (leases that are released are not
 * replaced beyond the share). When Redis answers again, its leases may have
 * expired meanwhile (a stopped Redis runs the queued rounds at once, with a
 * clock that jumped) or be gone (a restart or a flush), while every process
 * still holds its shares locally: the script then raises a fence for one
 * TTL (redis-script.ts), during which no lease expires and no grant exceeds
 * the share its process holds, so nobody grows until every live process has
 * had one full TTL to renew and report what it holds.
 *
 * Limits (docs/connection-budget.md): a process that is cut off from Redis
 * while the others are not keeps its share past its lease, and after the
 * TTL the others may grow into it; a process that starts within one TTL of a
 * Redis restart and runs first cannot know the shares the others still hold.
 */
import { randomBytes } from 'node:crypto';
import { invalidConfig } from '../core/errors.js';
import { defaultLogger, type Logger } from '../log.js';
import type { Balancer } from '../runtime/balancer.js';
import { resolveConnectionBudget, type ResolvedConnectionBudget } from '../runtime/connection-budget-options.js';
import { validateName } from '../membership/name.js';
import { DEFAULT_PREFIX, budgetKey } from '../membership/redis-keys.js';
import { BUDGET_SCRIPT } from '../membership/redis-script.js';
import { FleetRounds, fleetBalancer, roundClient, withDeadline } from './fleet-rounds.js';
import type { RedisClient, RedisConnectionOptions } from '../membership/redis-target.js';

/** Options of {@link FleetConnectionBudget}: where Redis is (one of `url`, `sentinels`, `redisCluster`), the limit and the cluster. */
export interface FleetConnectionBudgetOptions extends RedisConnectionOptions {
  /** The Balancer whose backends' connection leases the budget caps (its routers must lease with `kind: 'connection'`). */
  balancer: Balancer;
  /**
   * The connections each backend accepts from the whole fleet (PostgreSQL
   * `max_connections`), an integer ≥ 1. Without it, the Balancer's
   * `connectionBudget` (its option, or its membership document's block) is
   * the limit, `reserve` and `ttlMs` included, and follows the document.
   */
  limitPerBackend?: number;
  /** Connections of the limit kept out of the split (superuser, migrations, monitoring); default 0. */
  reserve?: number;
  /** The lease: a process that stops renewing loses its shares after this long, ms; default 10,000. Renewed every third of it. */
  ttlMs?: number;
  /** The cluster whose processes share the limit; default the Balancer's cluster (from its membership). */
  cluster?: string;
  /** Key prefix; default `poise`. */
  prefix?: string;
  /**
   * Deterministic aperture (docs/connection-budget.md): this process's
   * routers use only its slice of the ring of backends (sorted by id),
   * `width` a fraction of the ring in (0, 1], with the coordinate (its rank
   * among the live processes) from each lease round. Off by default.
   */
  aperture?: { width: number };
  /** Default `defaultLogger()`. */
  logger?: Logger;
}

/** What the last round saw. */
export interface FleetConnectionShares {
  /** Live processes in the cluster (those whose lease has not expired), this one included. */
  processes: number;
  /** This process's rank among them by id, 0-based (its aperture coordinate is `rank / processes`). */
  rank: number;
  /** Backend id → this process's share, as written into the LoadTable. */
  shares: Map<string, number>;
}

/** The largest process count the table's aperture coordinate word holds (load/aperture-region.ts). */
const MAX_APERTURE_PROCESSES = 0xffff;

type ScriptClient = { poiseBudget(...args: (string | number)[]): Promise<string[]> };

/**
 * Shares each backend's connection limit with the other processes of the
 * cluster (see the module comment). Start it once in the owner thread.
 *
 * @example
 * const balancer = new Balancer();
 * const budget = new FleetConnectionBudget({ balancer, cluster: 'db', url: 'redis://127.0.0.1:6379', limitPerBackend: 100, reserve: 5 });
 * await budget.start();
 * // ... on shutdown
 * await budget.close();
 */
export class FleetConnectionBudget {
  /** This process's id in the budget hash. */
  readonly processId = randomBytes(8).toString('hex');
  readonly #balancer: Balancer;
  readonly #redis: RedisClient;
  readonly #cluster: string | undefined;
  readonly #prefix: string;
  /** The limit given to the constructor (else the Balancer's, {@link config}). */
  readonly #own: ResolvedConnectionBudget | undefined;
  readonly #log: Logger;
  readonly #rounds: FleetRounds<FleetConnectionShares>;
  #last: FleetConnectionShares | undefined;
  /** The aperture's width, or undefined without one. */
  readonly #apertureWidth: number | undefined;
  #away = false;
  /** Whether a round ever succeeded: this process holds shares the fleet granted (the script's fence needs it). */
  #granted = false;
  /** Refusals taken from the table by rounds that failed, per backend id: added to the next round's demand. */
  readonly #unsent = new Map<string, number>();
  readonly #onMembership = (): void => {
    void this.sync();
  };
  /** Whether the close in progress hands the shares back ({@link close}'s `release`). */
  #release = false;

  /** Throws `InvalidConfig` naming a bad option; connects lazily (on {@link start}). */
  constructor(opts: FleetConnectionBudgetOptions) {
    this.#balancer = fleetBalancer(opts, ['limitPerBackend', 'reserve', 'ttlMs', 'aperture']);
    this.#apertureWidth = resolveAperture(opts.aperture);
    this.#own =
      opts.limitPerBackend === undefined
        ? undefined
        : resolveConnectionBudget({ limitPerBackend: opts.limitPerBackend, reserve: opts.reserve, ttlMs: opts.ttlMs }, 'options');
    if (this.#own === undefined && (opts.reserve !== undefined || opts.ttlMs !== undefined))
      invalidConfig('options.limitPerBackend', 'is required with options.reserve or options.ttlMs', opts.limitPerBackend);
    this.#cluster = opts.cluster === undefined ? undefined : validateName(opts.cluster, 'options.cluster');
    this.#prefix = opts.prefix === undefined ? DEFAULT_PREFIX : validateName(opts.prefix, 'options.prefix');
    this.#log = opts.logger ?? defaultLogger();
    this.#redis = roundClient(opts);
    this.#redis.defineCommand('poiseBudget', { lua: BUDGET_SCRIPT, numberOfKeys: 1 });
    this.#rounds = new FleetRounds(
      'FleetConnectionBudget',
      this.#redis,
      () => this.#round(),
      () => Math.max(100, Math.floor((this.#config()?.ttlMs ?? 10_000) / 3)),
      {
        starting: () => this.#starting(),
        stopping: () => this.#balancer.off('membership', this.#onMembership),
        stopped: () => this.#stopped(),
      },
    );
  }

  /** What the last successful round saw (undefined before one). */
  get last(): FleetConnectionShares | undefined {
    return this.#last;
  }

  /** Whether the last round failed (Redis away: the shares held are kept, none grows). */
  get away(): boolean {
    return this.#away;
  }

  /**
   * Connects, puts every backend under the budget (a share of 0 until the
   * first round grants one), runs a first round, then one every `ttlMs / 3`
   * and one after every membership change. Resolves after the first round.
   */
  start(): Promise<void> {
    return this.#rounds.start();
  }

  /** Before the first round: every backend under the budget, the aperture's width, membership changes followed. */
  #starting(): void {
    if (this.#config() !== undefined) this.#enforce();
    // The width now; the coordinate with the first round (until then every router uses the whole ring).
    if (this.#apertureWidth !== undefined) this.#balancer.ownerTable.aperture.configure(this.#apertureWidth);
    this.#balancer.on('membership', this.#onMembership);
  }

  /** One round now (rounds never overlap). Resolves to what it saw, or undefined when Redis is away or no cluster is known. */
  sync(): Promise<FleetConnectionShares | undefined> {
    return this.#rounds.sync();
  }

  /**
   * Stops the rounds and disconnects. The shares in force stay (the lease
   * expires after the TTL and the others grow into it); `release: true`
   * first hands them back at once (HDEL of this process's fields).
   */
  close(opts: { release?: boolean } = {}): Promise<void> {
    if (this.#rounds.closed) return Promise.resolve();
    this.#release = opts.release === true;
    return this.#rounds.stop();
  }

  /** After the last round: with `release`, this process's fields leave the budget hash (HDEL). */
  async #stopped(): Promise<void> {
    const cluster = this.#cluster ?? this.#balancer.cluster;
    if (this.#release && cluster !== undefined) {
      try {
        const key = budgetKey(cluster, this.#prefix);
        const deadline = this.#rounds.deadlineMs();
        const fields = (await withDeadline(this.#redis.hkeys(key), deadline, 'FleetConnectionBudget.close')).filter(
          (f) => f === `p:${this.processId}` || f.startsWith(`s:${this.processId}:`) || f.startsWith(`d:${this.processId}:`),
        );
        if (fields.length > 0) await withDeadline(this.#redis.hdel(key, ...fields), deadline, 'FleetConnectionBudget.close');
      } catch {
        // Redis away: the lease expires after the TTL instead.
      }
    }
  }

  /** The limit in force: the constructor's, else the Balancer's (option or document block). */
  #config(): ResolvedConnectionBudget | undefined {
    return this.#own ?? this.#balancer.connectionBudget;
  }

  /** Puts every backend under the budget: a share of zero until a round grants one (new backends too). */
  #enforce(): void {
    const t = this.#balancer.ownerTable;
    if (t.budget.startShare !== undefined) return;
    t.budget.startShare = 0;
    for (const e of this.#balancer.slotEntries()) if (!e.removed && t.budget.share(e.slot) === undefined) t.budget.setShare(e.slot, 0);
    this.#announce();
  }

  /** No budget in force any more (the document said `false`): every backend unlimited again. */
  #lift(): void {
    const t = this.#balancer.ownerTable;
    if (t.budget.startShare === undefined) return;
    t.budget.startShare = undefined;
    for (const e of this.#balancer.slotEntries()) if (!e.removed) t.budget.setShare(e.slot, undefined);
    this.#announce();
  }

  /** Routers rebuild their views (capacity, a share of zero) and waiting gates re-check. */
  #announce(): void {
    const t = this.#balancer.ownerTable;
    t.epochs.bumpHealth();
    t.admission.wake();
  }

  async #round(): Promise<FleetConnectionShares | undefined> {
    const cluster = this.#cluster ?? this.#balancer.cluster;
    if (cluster === undefined || this.#rounds.closed) return undefined;
    const config = this.#config();
    if (config === undefined) {
      this.#lift();
      return undefined;
    }
    this.#enforce();
    const t = this.#balancer.ownerTable;
    const entries = this.#balancer.slotEntries().filter((e) => !e.removed);
    const args: (string | number)[] = [];
    for (const e of entries) {
      const refused = t.budget.takeRefusals(e.slot) + (this.#unsent.get(e.id) ?? 0);
      this.#unsent.set(e.id, refused);
      const inUse = t.connections(e.slot);
      // What this process may hold now: the script never records less for it (a lost reply leaves it in force).
      args.push(e.id, inUse + refused, inUse, t.budget.share(e.slot) ?? 0);
    }
    try {
      const reply = await this.#rounds.within(
        (this.#redis as unknown as ScriptClient).poiseBudget(
          budgetKey(cluster, this.#prefix),
          this.processId,
          config.ttlMs,
          config.limitPerBackend - config.reserve,
          this.#granted ? 1 : 0,
          entries.length,
          ...args,
        ),
      );
      this.#unsent.clear();
      this.#granted = true;
      const shares = new Map<string, number>();
      const idOf = new Map<number, string>();
      for (const x of this.#balancer.slotEntries()) if (!x.removed) idOf.set(x.slot, x.id);
      let changed = false;
      for (let k = 0; k < entries.length; k++) {
        const grant = Number(reply[2 + k]);
        const e = entries[k]!;
        // A slot reused while the round ran belongs to another backend now: leave it for the next round.
        if (this.#rounds.closed || idOf.get(e.slot) !== e.id) continue;
        if (t.budget.setShare(e.slot, grant)) changed = true;
        // setShare(0) is the zero share: the backend stays under the budget.
        shares.set(e.id, grant);
      }
      const seen = { processes: Number(reply[0]), rank: Number(reply[1]), shares };
      // The aperture's coordinate moves with the lease (a process joined or left); while Redis is away the last one stays.
      if (
        this.#apertureWidth !== undefined &&
        !this.#rounds.closed &&
        seen.processes >= 1 &&
        seen.processes <= MAX_APERTURE_PROCESSES &&
        seen.rank >= 0 &&
        seen.rank < seen.processes &&
        t.aperture.setCoordinate(seen.rank, seen.processes)
      )
        changed = true;
      if (changed) this.#announce();
      this.#last = seen;
      if (this.#away) this.#log.info({ cluster }, 'poise: connection budget back on Redis');
      this.#away = false;
      return seen;
    } catch (err) {
      // Keep every share as it is: never grow without Redis (a round that missed its deadline may still run: the
      // script records at least the share held now, so Redis never counts less than this process may hold).
      if (!this.#away) {
        this.#log.warn(
          { cluster, err: err instanceof Error ? err.message : String(err) },
          'poise: connection budget: Redis away, shares held',
        );
      }
      this.#away = true;
      return undefined;
    }
  }
}

/** `options.aperture` → its width, or undefined. Throws `InvalidConfig` naming the field. */
function resolveAperture(aperture: { width: number } | undefined): number | undefined {
  if (aperture === undefined) return undefined;
  if (typeof aperture !== 'object' || aperture === null) invalidConfig('options.aperture', 'must be an object { width }', aperture);
  for (const k of Object.keys(aperture)) if (k !== 'width') invalidConfig(`options.aperture.${k}`, 'is not an option', k);
  const w = aperture.width;
  if (typeof w !== 'number' || !(w > 0 && w <= 1)) invalidConfig('options.aperture.width', 'must be a fraction of the ring in (0, 1]', w);
  return w;
}
