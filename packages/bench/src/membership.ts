/**
 * Where a run's membership comes from: the scenario (embedded backends,
 * changed by the scenario's events), Redis (`--redis URL --cluster NAME`)
 * or a discovery source (`--discover srv:...`), or both: fleet mode (this
 * process joins the election of the discovery watcher and reads Redis).
 *
 * With Redis or discovery, the source decides which backends exist; the bench
 * serves every member itself on the member's own loopback port (so the
 * addresses must be `127.0.0.1:<port>`), assigning the scenario's roles in
 * id order (slow-backend: the first is 10× slower, the second fails 5 %).
 * Changes published while the run goes are applied live.
 */
import { PoiseError } from 'poise-lb';
import { discoverySource } from 'poise-lb/discovery';
import { FleetMembership, FleetWatcher, RedisMembership } from 'poise-lb/redis';
import type { Logger, MembershipSnapshot, MembershipSource } from 'poise-lb/runtime';
import type { BackendFarm } from './backends.js';
import { BASE_MEDIAN_MS, BASE_SIGMA, FAILING_RATE, SLOW_FACTOR, type BackendModel, type ScenarioName } from './scenarios.js';

/** The membership of a run coming from Redis or a discovery source. */
export interface RedisFeed {
  /** The snapshot in force. */
  readonly current: MembershipSnapshot;
  /** Called with every later snapshot, after its backends are served. */
  onChange(listener: (snapshot: MembershipSnapshot) => void): void;
  /** Models of the served backends (roles assigned by id order). */
  models(): BackendModel[];
  close(): Promise<void>;
}

function roleModel(id: string, rank: number, scenario: ScenarioName): BackendModel {
  const slow = scenario === 'slow-backend' && rank === 0;
  const failing = scenario === 'slow-backend' && rank === 1;
  return {
    id,
    role: slow ? 'slow' : failing ? 'failing' : 'normal',
    medianMs: slow ? BASE_MEDIAN_MS * SLOW_FACTOR : BASE_MEDIAN_MS,
    sigma: BASE_SIGMA,
    failureRate: failing ? FAILING_RATE : 0,
    weight: 1,
    priority: 0,
    status: 'ready',
  };
}

/** The port of a `127.0.0.1:<port>` address, or undefined for any other address. */
function loopbackPort(address: string): { port: number } | undefined {
  const m = /^127\.0\.0\.1:(\d{1,5})$/.exec(address);
  const port = m === null ? 0 : Number(m[1]);
  return port >= 1 && port <= 65535 ? { port } : undefined;
}

/** Serves every member of `snapshot` that the farm does not serve yet. Throws for a non-loopback address (`flag`: the source's flag, for the message). */
async function serve(
  farm: BackendFarm,
  snapshot: MembershipSnapshot,
  scenario: ScenarioName,
  models: Map<string, BackendModel>,
  flag: string,
): Promise<void> {
  const ids = snapshot.backends.map((b) => b.id).sort();
  for (const spec of snapshot.backends) {
    if (farm.has(spec.id)) continue;
    const addr = loopbackPort(spec.address);
    if (addr === undefined) {
      throw new Error(
        `${flag}: backend ${JSON.stringify(spec.id)} has address ${JSON.stringify(spec.address)}; the bench serves its backends itself and needs 127.0.0.1:<port>`,
      );
    }
    const model = roleModel(spec.id, ids.indexOf(spec.id), scenario);
    model.weight = spec.weight ?? 1;
    model.priority = spec.priority ?? 0;
    await farm.add(model, addr.port);
    models.set(spec.id, model);
  }
}

/** What every follow* takes: the scenario whose roles the members get, the farm that serves them, the logger. */
interface FollowCommon {
  scenario: ScenarioName;
  farm: BackendFarm;
  logger: Logger;
}
/** Where the cluster is in Redis. */
interface RedisWhere {
  url: string;
  cluster: string;
}
/** A discovery source (`--discover`) and its DNS servers (`--dns-server`). */
interface DiscoverWhat {
  spec: string;
  servers: readonly string[];
}

/** Follows `cluster` in Redis, serving its members from `farm`. Resolves once the first snapshot is served. */
export function followRedis(opts: FollowCommon & RedisWhere): Promise<RedisFeed> {
  const source = new RedisMembership({ url: opts.url, cluster: opts.cluster, logger: opts.logger });
  return follow(source, { ...opts, flag: '--redis', what: `cluster ${JSON.stringify(opts.cluster)}`, field: '--cluster' });
}

/** Follows the discovery source `spec` (`srv:...` whose targets are 127.0.0.1), serving its members from `farm`. */
export function followDiscovery(opts: FollowCommon & DiscoverWhat): Promise<RedisFeed> {
  const servers = opts.servers.length > 0 ? { servers: opts.servers } : {};
  const source = discoverySource(opts.spec, { logger: opts.logger, initial: 'reject', ...servers }, '--discover');
  return follow(source, { ...opts, flag: '--discover', what: opts.spec, field: '--discover' });
}

/** How long fleet mode waits for the first membership in Redis (the elected watcher's first answer). */
const FLEET_FIRST_MS = 10_000;

/** Fleet mode: joins the election of the watcher that runs `spec` and publishes into `cluster`, and follows `cluster` in Redis. */
export function followFleet(opts: FollowCommon & DiscoverWhat & RedisWhere): Promise<RedisFeed> {
  const servers = opts.servers.length > 0 ? { servers: opts.servers } : {};
  const watcher = new FleetWatcher({
    url: opts.url,
    cluster: opts.cluster,
    logger: opts.logger,
    source: () => discoverySource(opts.spec, { logger: opts.logger, initial: 'wait', ...servers }, '--discover'),
  });
  const source = new FleetMembership(
    watcher,
    new RedisMembership({ url: opts.url, cluster: opts.cluster, logger: opts.logger }),
    opts.spec,
  );
  // The elected watcher publishes its first answer only after this reader started: wait for it (bounded).
  return follow(source, {
    ...opts,
    flag: '--redis',
    what: `cluster ${JSON.stringify(opts.cluster)} (fleet mode, ${opts.spec})`,
    field: '--cluster',
    firstWithinMs: FLEET_FIRST_MS,
  });
}

/** Follows `source`, serving its members from `opts.farm`. Resolves once the first snapshot is served. */
async function follow(
  source: MembershipSource,
  opts: { scenario: ScenarioName; farm: BackendFarm; logger: Logger; flag: string; what: string; field: string; firstWithinMs?: number },
): Promise<RedisFeed> {
  const models = new Map<string, BackendModel>();
  let current: MembershipSnapshot | undefined;
  let listener: ((s: MembershipSnapshot) => void) | undefined;
  let chain = Promise.resolve();
  let first: Promise<void> | undefined;
  let delivered = (): void => {};
  const firstDelivery = new Promise<void>((resolve) => (delivered = resolve));
  await source.start((snapshot) => {
    const step = chain.then(async () => {
      await serve(opts.farm, snapshot, opts.scenario, models, opts.flag);
      current = snapshot;
      listener?.(snapshot);
    });
    // The first snapshot's failure is thrown to the caller below; later ones
    // are logged and the run goes on with the membership in force.
    chain = step.catch((err: unknown) => {
      if (step !== first) opts.logger.error({ err }, `bench: cannot serve the membership from ${opts.flag.slice(2)}`);
    });
    first ??= step;
    delivered();
  });
  try {
    if (first === undefined && opts.firstWithinMs !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([firstDelivery, new Promise<void>((resolve) => (timer = setTimeout(resolve, opts.firstWithinMs)))]);
      clearTimeout(timer);
    }
    if (first === undefined) {
      const reason = source.problem?.message ?? 'nothing was delivered';
      throw new PoiseError(source.problem?.code ?? 'NotFound', `${opts.flag}: no membership for ${opts.what} (${reason})`, {
        field: opts.field,
      });
    }
    await first;
  } catch (err) {
    await source.close();
    throw err;
  }
  return {
    get current() {
      return current!;
    },
    onChange(l) {
      listener = l;
    },
    models: () => [...models.values()],
    close: () => source.close(),
  };
}
