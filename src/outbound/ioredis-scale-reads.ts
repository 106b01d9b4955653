/**
 * ioredis read routing by the shared LoadTable: `poiseScaleReads(router)` is
 * a function for a Cluster's `scaleReads` option, `poisePreferredSlaves`
 * one for a Sentinel client's `preferredSlaves` (docs/guide.md, "ioredis").
 *
 * The measure: every read the function routes takes a request lease on the
 * node it picks, and the reply that node sends for that command releases it
 * with the round trip as its latency sample. A pipeline (auto-pipelining
 * makes them too) is one routing decision in ioredis — it calls `scaleReads`
 * for its first command and sends the rest to the same node — so it is one
 * lease, released by its first reply. A reply error (MOVED, ASK, WRONGTYPE,
 * ...) is an answer: the lease ends as a success; a closed connection or a
 * timeout ends it as a failure. A MOVED read goes where ioredis sends it:
 * ioredis asks `scaleReads` again with the new owner's nodes, and that send
 * takes its own lease there. Writes are not routed here, so not counted.
 *
 * ioredis is never loaded: the shapes below are what this file reads of it.
 */
import { invalidConfig, isPoiseError } from '../core/errors.js';
import type { Balancer } from '../runtime/balancer.js';
import type { Lease } from '../runtime/lease.js';
import type { AcquireOptions, Router } from '../runtime/router.js';

/** What this file reads of an ioredis `Redis` instance (a cluster node). */
export interface RedisNodeLike {
  readonly options: { readonly host?: string; readonly port?: number };
}

/** What this file reads and wraps of an ioredis `Command`. */
export interface RedisCommandLike {
  resolve: (value: unknown) => unknown;
  reject: (err: Error) => unknown;
}

/** What `follow()` reads of an ioredis `Cluster`: its slot table (`slots[slot] = [masterKey, ...replicaKeys]`) and events. */
export interface RedisClusterLike {
  readonly slots: readonly (readonly string[] | undefined)[];
  on(event: 'refresh' | 'ready', listener: () => void): unknown;
  off(event: 'refresh' | 'ready', listener: () => void): unknown;
}

/** Options of {@link poiseScaleReads}. */
export interface ScaleReadsOptions {
  /**
   * Which nodes of a slot serve its reads: `'replicas'` (default; ioredis's
   * `'slave'`) — its replicas, and its master only when it has none or none
   * may be chosen; `'all'` — the master and the replicas alike.
   */
  from?: 'replicas' | 'all';
}

/** The `scaleReads` function, and `follow()` for the thread that owns the Balancer. */
export interface PoiseScaleReads {
  (nodes: readonly RedisNodeLike[], command: RedisCommandLike): RedisNodeLike;
  /**
   * Keeps `balancer`'s membership equal to the cluster's nodes, one failover
   * priority per shard (the tier a pick draws in), at its `ready` and every
   * `refresh`. Call it in the thread that owns the Balancer, once; worker
   * threads' routers see the membership through the table. Returns a stop
   * function.
   */
  follow(cluster: RedisClusterLike, balancer: Pick<Balancer, 'update'>): () => void;
}

const FROM = ['replicas', 'all'] as const;
const OPEN = Symbol('poise.scaleReads.lease');

/** The read in flight on one command: its lease, and the command's own resolve / reject, restored at the reply. */
interface OpenRead {
  readonly lease: Lease;
  readonly start: number;
  readonly resolve: RedisCommandLike['resolve'];
  readonly reject: RedisCommandLike['reject'];
  /** The wrappers put in their place (restored only while they are still in place). */
  onResolve?: RedisCommandLike['resolve'];
  onReject?: RedisCommandLike['reject'];
}

const MOVED = Symbol('poise.scaleReads.moved');
type Tracked = RedisCommandLike & { [OPEN]?: OpenRead; [MOVED]?: true | undefined };

/** A node's `host:port` key, as ioredis names it in `cluster.slots`; cached per node object. */
const keys = new WeakMap<RedisNodeLike, string>();
function keyOf(node: RedisNodeLike): string {
  let k = keys.get(node);
  if (k === undefined) {
    k = `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
    keys.set(node, k);
  }
  return k;
}

/** Ends `command`'s open read, if any, and puts its own resolve / reject back. */
function close(command: Tracked, answered: boolean): OpenRead | undefined {
  const open = command[OPEN];
  if (open === undefined) return undefined;
  command[OPEN] = undefined;
  // ioredis re-inits a retried pipeline's promises (new resolve / reject): those stay.
  if (command.resolve === open.onResolve) command.resolve = open.resolve;
  if (command.reject === open.onReject) command.reject = open.reject;
  if (answered) open.lease.release('success', { latencyMs: Math.max(0, performance.now() - open.start) });
  else open.lease.release('failure');
  return open;
}

/** A reply error (redis-errors' ReplyError: MOVED, ASK, WRONGTYPE, ...) is the node's answer; anything else is not. */
function isReply(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError';
}

/** Hooks the command's next reply to end `lease`. */
function track(command: Tracked, lease: Lease): void {
  // A command routed again (a pipeline retried after MOVED re-inits its promise) ends its earlier read first.
  close(command, true);
  const open: OpenRead = { lease, start: performance.now(), resolve: command.resolve, reject: command.reject };
  command[OPEN] = open;
  open.onResolve = (value) => {
    close(command, true);
    return open.resolve.call(command, value);
  };
  open.onReject = (err) => {
    close(command, isReply(err));
    if (isReply(err) && err.message.startsWith('MOVED ')) command[MOVED] = true;
    return open.reject.call(command, err);
  };
  command.resolve = open.onResolve;
  command.reject = open.onReject;
}

/**
 * A `scaleReads` function for an ioredis Cluster: each read goes to the node
 * of its slot that `router`'s policy picks — `p2c:latency` compares the
 * nodes' in-flight reads and reply latency as every thread measured them.
 * `router` is a router of a Balancer whose membership `follow()` keeps (in
 * worker threads, `workerRouter()`); its policy should be a request one
 * (`p2c:latency`, the default, `p2c:requests`, `least-loaded`).
 *
 * @example
 * const balancer = new Balancer();
 * const scaleReads = poiseScaleReads(balancer.router({ policy: 'p2c:latency' }));
 * const cluster = new Cluster(seeds, { scaleReads });
 * scaleReads.follow(cluster, balancer);
 */
export function poiseScaleReads(router: Router, options: ScaleReadsOptions = {}): PoiseScaleReads {
  if (typeof router?.acquire !== 'function') invalidConfig('router', 'must be a Router (balancer.router() or workerRouter())', router);
  const from = options.from ?? 'replicas';
  if (!(FROM as readonly string[]).includes(from)) invalidConfig('options.from', `must be one of ${FROM.join(', ')}`, from);
  const all = from === 'all';
  const tiers = new Map<number, AcquireOptions>();
  const pick = (nodes: readonly RedisNodeLike[], command: RedisCommandLike): RedisNodeLike => {
    const master = nodes[0] as RedisNodeLike;
    // Nothing to choose: ioredis's own answer (its master; in 'replicas' mode, a slot without replicas).
    if (nodes.length < 2 && !(all && nodes.length === 1)) return master;
    // A read that got MOVED goes where ioredis was sent (it wrote the new owner first in the slot's list), counted there.
    if ((command as Tracked)[MOVED] === true) return moved(nodes, command as Tracked);
    const spec = router.member(keyOf(nodes[1] ?? master));
    if (spec === undefined) return master; // not in the membership (yet): ioredis's default, the master
    let opts = tiers.get(spec.priority);
    if (opts === undefined) {
      opts = { priority: spec.priority };
      tiers.set(spec.priority, opts);
    }
    let lease: Lease;
    try {
      lease = router.acquire(opts);
    } catch (err) {
      if (isPoiseError(err)) return master; // no replica may be chosen: the master serves the read
      throw err;
    }
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i] as RedisNodeLike;
      if (keyOf(n) === lease.id) {
        track(command as Tracked, lease);
        return n;
      }
    }
    // The table's shard and ioredis's slot map disagree (a topology change in flight): ioredis's default.
    lease.release('cancelled');
    return master;
  };
  /** A lease on `nodes[0]` itself (off the common path: a redirect), the others of its tier excluded. */
  const moved = (nodes: readonly RedisNodeLike[], command: Tracked): RedisNodeLike => {
    // One redirect, one re-send: a later routing of the same command is the policy's again.
    command[MOVED] = undefined;
    const master = nodes[0] as RedisNodeLike;
    const key = keyOf(master);
    const spec = router.member(key);
    if (spec === undefined) return master;
    const exclude: string[] = [];
    for (const n of nodes) if (keyOf(n) !== key) exclude.push(keyOf(n));
    try {
      const lease = router.acquire({ priority: spec.priority, exclude });
      if (lease.id === key) track(command, lease);
      else lease.release('cancelled');
    } catch (err) {
      if (!isPoiseError(err)) throw err;
    }
    return master;
  };
  const fn = pick as PoiseScaleReads;
  fn.follow = (cluster, balancer) => followCluster(cluster, balancer, all);
  return fn;
}

/**
 * Keeps `balancer`'s members equal to `cluster`'s nodes, one priority tier
 * per shard, republished on ioredis's `ready` and `refresh`; returns the
 * function that stops following ({@link PoiseScaleReads.follow}).
 */
function followCluster(cluster: RedisClusterLike, balancer: Pick<Balancer, 'update'>, all: boolean): () => void {
  const publish = (): void => {
    const shards = new Map<string, Set<string>>();
    for (const group of cluster.slots) {
      const [m, ...replicas] = group ?? [];
      if (m === undefined) continue;
      let set = shards.get(m);
      if (set === undefined) {
        set = new Set();
        shards.set(m, set);
      }
      for (const r of replicas) set.add(r);
    }
    const specs: { id: string; address: string; priority: number }[] = [];
    [...shards.keys()].sort().forEach((m, s) => {
      // 'replicas': a shard's replicas share tier 2s, its master sits alone in 2s + 1 (never drawn);
      // 'all': the whole shard is tier s.
      specs.push({ id: m, address: m, priority: all ? s : 2 * s + 1 });
      for (const r of shards.get(m) ?? []) specs.push({ id: r, address: r, priority: all ? s : 2 * s });
    });
    if (specs.length > 0) balancer.update(specs);
  };
  cluster.on('ready', publish);
  cluster.on('refresh', publish);
  if (cluster.slots.length > 0) publish();
  return () => {
    cluster.off('ready', publish);
    cluster.off('refresh', publish);
  };
}

/** A replica as ioredis's Sentinel connector offers it (`SENTINEL replicas` fields). */
export interface SentinelReplica {
  readonly ip: string;
  readonly port: string | number;
  readonly flags?: string;
}

/** The `preferredSlaves` function, and the lease of the replica it chose last. */
export interface PoisePreferredSlaves {
  <R extends SentinelReplica>(replicas: readonly R[]): R | null;
  /**
   * Ends the connection lease of the last pick (the client disconnected or
   * connects again): `preferredSlaves` ends it itself before its next pick.
   */
  release(): void;
}

/**
 * A `preferredSlaves` function for an ioredis client with `role: 'slave'`:
 * at each (re)connect it picks, among the replicas the Sentinel offers, the
 * one `router`'s policy picks, and holds a connection lease on it until the
 * next (re)connect or `release()` — so `p2c:connections` (the natural policy
 * here: a Sentinel client holds one connection) spreads clients across
 * replicas and threads. `router`'s backends are the replicas, with ids
 * `ip:port`; a replica the router does not know is never chosen while one it
 * knows is offered, and with none known ioredis picks at random.
 */
export function poisePreferredSlaves(router: Router): PoisePreferredSlaves {
  if (typeof router?.acquire !== 'function') invalidConfig('router', 'must be a Router (balancer.router() or workerRouter())', router);
  let held: Lease | undefined;
  const release = (): void => {
    held?.release('success');
    held = undefined;
  };
  const fn = (<R extends SentinelReplica>(replicas: readonly R[]): R | null => {
    release();
    const offered = new Map<string, R>(replicas.map((r) => [`${r.ip}:${r.port}`, r]));
    const exclude = new Set<string>();
    // Off the hot path (a connect): draw until the pick is one the Sentinel offers, excluding the others.
    for (let i = 0; i <= offered.size + 64; i++) {
      let lease: Lease;
      try {
        lease = router.acquire({ kind: 'connection', exclude });
      } catch (err) {
        if (isPoiseError(err)) return null;
        throw err;
      }
      const r = offered.get(lease.id);
      if (r !== undefined) {
        held = lease;
        return r;
      }
      exclude.add(lease.id);
      lease.release('cancelled');
    }
    return null;
  }) as PoisePreferredSlaves;
  fn.release = release;
  return fn;
}
