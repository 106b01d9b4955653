/**
 * A mysql2 `PoolCluster` with poise's choice: the same face — `add`,
 * `remove`, `of(pattern, selector)`, `getConnection`, `end`, the events
 * `online` / `offline` / `remove` / `warn` and `removeNodeErrorCount` /
 * `restoreNodeTimeout` / `canRetry` — whose selectors are poise's policies
 * over one Balancer (mysql2's `RR`, `RANDOM`, `ORDER` among them), and whose
 * namespaces can route by the role and lag the `mysql` check reads
 * (docs/guide.md, "mysql2"). mysql2 is never loaded: the caller hands in
 * its `createPool`, and the shapes below are what this file uses of it.
 *
 * The measure: a checked-out connection holds a connection lease on its node
 * (what `p2c:connections` and `least-loaded` count); each query on it is a
 * request on that lease (a MySQL connection runs one statement at a time),
 * whose reply time is the latency `p2c:latency` compares.
 */
import { EventEmitter } from 'node:events';
import { invalidConfig, isPoiseError, PoiseError } from '../core/errors.js';
import { Balancer, type BalancerOptions } from '../runtime/balancer.js';
import type { Lease } from '../runtime/lease.js';
import { KEYED_POLICY_NAMES, POLICY_NAMES, type PolicyName } from '../runtime/policies.js';
import type { AcquireOptions, Router } from '../runtime/router.js';
import { lend, type Hooked, type MysqlCoreConnection } from './mysql-lease.js';

export type { MysqlCoreConnection } from './mysql-lease.js';

/** A health check's options, as the Balancer takes them. */
type CheckOptions = NonNullable<NonNullable<BalancerOptions['health']>['check']>;

/** What this file uses of a mysql2 pool: the core `Pool` (callback form) or a `PromisePool` (its `.pool` is the core one). */
export interface MysqlPoolLike {
  getConnection?(cb: (err: Error | null, conn: MysqlCoreConnection) => void): void;
  end(cb?: (err?: Error | null) => void): unknown;
  pool?: MysqlPoolLike;
}

/** A namespace's selector: a name (mysql2's `RR`, `RANDOM`, `ORDER`, or a poise policy), or a policy with a role intent. */
export type PoolClusterSelector =
  | 'RR'
  | 'RANDOM'
  | 'ORDER'
  | PolicyName
  | {
      /** Default the cluster's `defaultSelector` policy. `ORDER` is a name form only. */
      policy?: PolicyName | 'RR' | 'RANDOM';
      /** Route by the role the check read: `'write'` to a primary, `'read'` to a replica within `maxLagMs`, else a primary. */
      intent?: 'read' | 'write';
      /** A read's lag bound, ms; default the cluster's `maxLagMs` (10 000). */
      maxLagMs?: number;
    };

/** Options of {@link createPoolCluster}: mysql2's `PoolClusterOptions`, and what poise adds. */
export interface PoolClusterOptions {
  /** mysql2's `createPool` (`mysql2` for callbacks, `mysql2/promise` for promises): the face follows its form. */
  createPool: (config: never) => unknown;
  /** As mysql2: retry another node when a node's `getConnection` fails; default true. */
  canRetry?: boolean;
  /** As mysql2: consecutive failures before a node is offline (or removed); default 5. */
  removeNodeErrorCount?: number;
  /** As mysql2: ms an offline node stays out; 0 (default) removes it instead. */
  restoreNodeTimeout?: number;
  /** Default `'RR'` (mysql2's); any {@link PoolClusterSelector} name. */
  defaultSelector?: Exclude<PoolClusterSelector, object>;
  /**
   * The `mysql` check (roles and lag: `@@read_only`, `SHOW REPLICA STATUS`):
   * its options (`user` — a user without a password, `intervalMs`, `rise`,
   * `fall`, ...). Off by default: the check logs in with an empty password.
   */
  check?: Omit<CheckOptions, 'kind' | 'roles'>;
  /** A read's default lag bound, ms; default 10 000. */
  maxLagMs?: number;
  /** More options of the Balancer (`logger`, `capacity`, ...). */
  balancer?: Omit<BalancerOptions, 'health'>;
}

/** A namespace: mysql2's `PoolNamespace`, in the cluster's form. */
export interface PoisePoolNamespace<C = unknown> {
  getConnection(): Promise<C>;
  getConnection(cb: (err: Error | null, conn?: C) => void): undefined;
  query(sql: unknown, values?: unknown, cb?: (err: Error | null, ...rest: unknown[]) => void): Promise<unknown> | undefined;
  execute(sql: unknown, values?: unknown, cb?: (err: Error | null, ...rest: unknown[]) => void): Promise<unknown> | undefined;
}

/** The connection a pool's `getConnection` gives: mysql2/promise's `PoolConnection`, or the callback one. */
export type ConnectionOf<P> = P extends { getConnection(): Promise<infer C> }
  ? C
  : P extends { getConnection(cb: (err: never, conn: infer C) => unknown): unknown }
    ? C
    : unknown;

/** mysql2 selector names → poise policies (ORDER is handled apart: the first node of the pattern that answers). */
const NAMES: Record<string, PolicyName> = { RR: 'round-robin', RANDOM: 'random' };
/** The policies a namespace may name: every unkeyed one (a checkout carries no affinity key). */
const POLICIES: readonly string[] = POLICY_NAMES.filter((p) => !KEYED_POLICY_NAMES.includes(p));

interface Node {
  readonly id: string;
  readonly address: string;
  readonly pool: MysqlPoolLike;
  errorCount: number;
  offlineUntil: number;
}

/** mysql2's pattern: `*` any run of characters, the rest literal; a RegExp as it is. */
function patternRegExp(pattern: string | RegExp): RegExp {
  if (pattern instanceof RegExp) return pattern;
  return new RegExp(`^${pattern.replace(/([.+?^=!:${}()|[\]/\\])/g, '\\$1').replace(/\*/g, '.*')}$`);
}

function policyOf(name: unknown, field: string): PolicyName | 'ORDER' {
  if (typeof name !== 'string') return invalidConfig(field, 'must be a selector name (RR, RANDOM, ORDER, or a poise policy)', name);
  const upper = name.toUpperCase();
  if (upper === 'ORDER') return 'ORDER';
  const mapped = NAMES[upper];
  if (mapped !== undefined) return mapped;
  if (POLICIES.includes(name)) return name as PolicyName;
  return invalidConfig(field, `must be RR, RANDOM, ORDER or one of ${POLICIES.join(', ')}`, name);
}

/**
 * mysql2's `PoolCluster`, routed by poise: change the import, hand in
 * `createPool`, keep the rest.
 *
 * @example
 * import mysql from 'mysql2/promise';
 * const cluster = createPoolCluster({ createPool: mysql.createPool, check: { user: 'monitor' } });
 * cluster.add('MASTER', { host: 'db-a', user: 'app', password: '...' });
 * cluster.add('SLAVE1', { host: 'db-b', user: 'app', password: '...' });
 * const conn = await cluster.getConnection('SLAVE*', 'p2c:latency');
 * const [rows] = await cluster.of('*', { intent: 'read', maxLagMs: 2000 }).query('SELECT 1');
 */
export function createPoolCluster<P>(
  options: PoolClusterOptions & { createPool: (config: never) => P },
): PoisePoolCluster<ConnectionOf<P>> {
  return new PoisePoolCluster<ConnectionOf<P>>(options);
}

/** The cluster {@link createPoolCluster} returns. Events: `online`, `offline`, `remove` (node id), `warn` (error). */
export class PoisePoolCluster<C = unknown> extends EventEmitter {
  /** The Balancer over the nodes (its `health` is the `check` option). */
  readonly balancer: Balancer;
  private readonly createPool: PoolClusterOptions['createPool'];
  private readonly canRetry: boolean;
  private readonly removeNodeErrorCount: number;
  private readonly restoreNodeTimeout: number;
  private readonly defaultSelector: PolicyName | 'ORDER';
  private readonly maxLagMs: number | undefined;
  private readonly nodes = new Map<string, Node>();
  private readonly routers = new Map<PolicyName, Router>();
  private readonly namespaces = new Map<string, PoisePoolNamespace<C>>();
  private lastId = 0;
  private closed = false;
  /** Whether the pools are mysql2/promise's (the face answers with promises) or the callback ones. */
  private promiseForm: boolean | undefined;

  constructor(options: PoolClusterOptions) {
    super();
    if (typeof options?.createPool !== 'function') invalidConfig('options.createPool', "must be mysql2's createPool", options?.createPool);
    this.createPool = options.createPool;
    this.canRetry = options.canRetry ?? true;
    this.removeNodeErrorCount = options.removeNodeErrorCount ?? 5;
    this.restoreNodeTimeout = options.restoreNodeTimeout ?? 0;
    this.defaultSelector = policyOf(options.defaultSelector ?? 'RR', 'options.defaultSelector');
    this.maxLagMs = options.maxLagMs;
    this.balancer = new Balancer({
      ...options.balancer,
      ...(options.check === undefined ? {} : { health: { check: { intervalMs: 1000, ...options.check, kind: 'mysql', roles: true } } }),
    });
  }

  /** As mysql2: `add(config)` names the node `CLUSTER::n`; an id already added is ignored. */
  add(id: string | Record<string, unknown>, config?: Record<string, unknown> | string): void {
    if (typeof id === 'object') {
      config = id;
      id = `CLUSTER::${++this.lastId}`;
    }
    if (this.nodes.has(id)) return;
    if (typeof config === 'string') config = { uri: config };
    if (typeof config !== 'object' || config === null) invalidConfig(`add(${id}, config)`, 'must be a pool config or a URI', config);
    const url = typeof config.uri === 'string' ? new URL(config.uri) : undefined;
    const host = String(config.host ?? url?.hostname ?? 'localhost');
    const port = Number(config.port ?? (url?.port || 3306));
    // mysql2's overloads (a URI, a config) are typed loosely above so that `mysql.createPool` fits as it is.
    const pool = (this.createPool as (c: Record<string, unknown>) => MysqlPoolLike)(config);
    const form = typeof (pool as { promise?: unknown }).promise !== 'function';
    this.promiseForm ??= form;
    this.nodes.set(id, { id, address: `${host}:${port}`, pool: pool.pool ?? pool, errorCount: 0, offlineUntil: 0 });
    this.publish();
  }

  /** As mysql2: removes every node whose id matches `pattern` and ends its pool. */
  remove(pattern: string | RegExp): void {
    const re = patternRegExp(pattern);
    let removed = false;
    for (const node of [...this.nodes.values()]) {
      if (!re.test(node.id)) continue;
      this.nodes.delete(node.id);
      node.pool.end(() => {});
      removed = true;
    }
    if (removed) this.publish();
  }

  /** As mysql2: a namespace over the nodes whose ids match `pattern` (default `*`), choosing by `selector`. */
  of(pattern: string | RegExp = '*', selector?: PoolClusterSelector): PoisePoolNamespace<C> {
    const sel = selector ?? this.defaultSelector;
    const key = `${String(pattern)}\u0000${typeof sel === 'string' ? sel : JSON.stringify(sel)}`;
    let ns = this.namespaces.get(key);
    if (ns === undefined) {
      ns = this.namespace(patternRegExp(pattern), sel);
      this.namespaces.set(key, ns);
    }
    return ns;
  }

  /** As mysql2: `getConnection([pattern], [selector], [cb])`; with promise pools it returns a promise. */
  getConnection(pattern?: string | RegExp, selector?: PoolClusterSelector): Promise<C>;
  getConnection(cb: (err: Error | null, conn?: C) => void): undefined;
  getConnection(pattern: string | RegExp, cb: (err: Error | null, conn?: C) => void): undefined;
  getConnection(pattern: string | RegExp, selector: PoolClusterSelector, cb: (err: Error | null, conn?: C) => void): undefined;
  getConnection(
    pattern?: string | RegExp | ((err: Error | null, conn?: C) => void),
    selector?: PoolClusterSelector | ((err: Error | null, conn?: C) => void),
    cb?: (err: Error | null, conn?: C) => void,
  ): Promise<C> | undefined {
    if (typeof pattern === 'function') return this.of().getConnection(pattern);
    if (typeof selector === 'function') return this.of(pattern).getConnection(selector);
    const ns = this.of(pattern, selector);
    return cb === undefined ? ns.getConnection() : ns.getConnection(cb);
  }

  /** Ends every node's pool and closes the Balancer; with promise pools it returns a promise. */
  end(cb?: (err?: Error | null) => void): Promise<void> | undefined {
    const done = (async () => {
      if (this.closed) return;
      this.closed = true;
      const pools = [...this.nodes.values()].map((n) => n.pool);
      this.nodes.clear();
      try {
        await Promise.all(pools.map((p) => new Promise<void>((res, rej) => p.end((err) => (err ? rej(err) : res())))));
      } finally {
        for (const r of this.routers.values()) r.close();
        this.balancer.close();
      }
    })();
    if (cb !== undefined) {
      done.then(() => cb(null), cb);
      return undefined;
    }
    if (this.promiseForm === false) {
      done.catch((err: unknown) => this.emit('error', err));
      return undefined;
    }
    return done;
  }

  /** Node ids (with their `host:port`) now in the cluster, in the order added. */
  nodeIds(): string[] {
    return [...this.nodes.keys()];
  }

  private publish(): void {
    this.balancer.update([...this.nodes.values()].map((n) => ({ id: n.id, address: n.address })));
  }

  private router(policy: PolicyName): Router {
    let r = this.routers.get(policy);
    if (r === undefined) {
      r = this.balancer.router({ policy, ...(this.maxLagMs === undefined ? {} : { maxLagMs: this.maxLagMs }) });
      this.routers.set(policy, r);
    }
    return r;
  }

  /** The ids of `re` that are in service now (not offline), in the order added. */
  private serviceable(re: RegExp, now: number): { matched: number; ids: string[] } {
    let matched = 0;
    const ids: string[] = [];
    for (const n of this.nodes.values()) {
      if (!re.test(n.id)) continue;
      matched++;
      if (n.offlineUntil === 0 || n.offlineUntil <= now) ids.push(n.id);
    }
    return { matched, ids };
  }

  /** One lease on a node of `ids` by the selector, none of `tried`; a PoiseError when none may be chosen. */
  private async pick(
    ids: readonly string[],
    tried: ReadonlySet<string>,
    policy: PolicyName | 'ORDER',
    base: AcquireOptions,
  ): Promise<Lease> {
    const allowed = new Set(ids.filter((id) => !tried.has(id)));
    const exclude = [...this.nodes.keys()].filter((id) => !allowed.has(id));
    // acquireAsync: a read or write right after start waits for the check's first role verdicts.
    if (policy !== 'ORDER') return this.router(policy).acquireAsync({ ...base, exclude, kind: 'connection' });
    // ORDER: the first node in the pattern's order that may be chosen.
    let last: unknown;
    for (const id of allowed) {
      try {
        return this.router('round-robin').acquire({ ...base, exclude: [...this.nodes.keys()].filter((x) => x !== id), kind: 'connection' });
      } catch (err) {
        last = err;
      }
    }
    throw last ?? new PoiseError('NoEligibleCandidates', 'no node of the pattern may be chosen');
  }

  private namespace(re: RegExp, selector: PoolClusterSelector): PoisePoolNamespace<C> {
    const { policy, base } = this.selectorOf(selector);
    const connect = (): Promise<Hooked> => this.checkout(re, policy, base);
    const promised = (): boolean => this.promiseForm !== false;
    const getConnection = ((cb?: (err: Error | null, conn?: C) => void): Promise<C> | undefined => {
      const p = connect();
      if (cb !== undefined) {
        p.then(
          (c) => cb(null, c as unknown as C),
          (e: Error) => cb(e),
        );
        return undefined;
      }
      return p.then((c) => (promised() ? c.promise() : c) as C);
    }) as PoisePoolNamespace<C>['getConnection'];
    return { getConnection, query: this.runner('query', connect), execute: this.runner('execute', connect) };
  }

  /** A namespace's selector read: the policy (or ORDER) and the acquire options of its intent and lag bound. */
  private selectorOf(selector: PoolClusterSelector): { policy: PolicyName | 'ORDER'; base: AcquireOptions } {
    const obj = typeof selector === 'object' && selector !== null ? selector : undefined;
    const policy = policyOf(obj === undefined ? selector : (obj.policy ?? this.defaultSelector), 'of(pattern, selector)');
    const base: AcquireOptions = {};
    if (obj?.intent !== undefined) {
      if (obj.intent !== 'read' && obj.intent !== 'write')
        invalidConfig('of(pattern, selector).intent', 'must be "read" or "write"', obj.intent);
      base.intent = obj.intent;
      if (policy === 'ORDER') invalidConfig('of(pattern, selector)', 'ORDER does not take an intent', selector);
    }
    if (obj?.maxLagMs !== undefined) base.maxLagMs = obj.maxLagMs;
    return { policy, base };
  }

  /**
   * One checkout: a lease on a node of the pattern chosen by `policy`, then
   * that node's pool's connection, hooked to the lease; a node that fails is
   * counted (mysql2's offline/remove rule) and, with `canRetry`, the next is
   * tried.
   */
  private async checkout(re: RegExp, policy: PolicyName | 'ORDER', base: AcquireOptions): Promise<Hooked> {
    if (this.closed) throw Object.assign(new Error('Pool cluster is closed.'), { code: 'POOL_CLOSED' });
    const tried = new Set<string>();
    for (;;) {
      const { matched, ids } = this.serviceable(re, performance.now());
      if (ids.length === 0 || ids.every((id) => tried.has(id))) {
        if (tried.size > 0 && this.lastError !== undefined) throw this.lastError;
        const err = matched > 0 ? new Error('Pool does Not have online node.') : new Error('Pool does Not exist.');
        throw Object.assign(err, { code: matched > 0 ? 'POOL_NONEONLINE' : 'POOL_NOEXIST' });
      }
      let lease: Lease;
      try {
        lease = await this.pick(ids, tried, policy, base);
      } catch (err) {
        if (!isPoiseError(err)) throw err;
        throw Object.assign(new Error(`Pool does Not have online node: ${err.message}`), { code: 'POOL_NONEONLINE', cause: err });
      }
      const node = this.nodes.get(lease.id);
      if (node === undefined) {
        lease.release('cancelled');
        continue;
      }
      const start = performance.now();
      const got = await new Promise<{ err: Error | null; conn?: Hooked }>((res) =>
        (node.pool.getConnection as NonNullable<MysqlPoolLike['getConnection']>)((err, conn) => res({ err, conn: conn as Hooked })),
      );
      if (got.err !== null || got.conn === undefined) {
        lease.release('failure');
        this.failed(node);
        this.lastError = got.err ?? new Error('no connection');
        if (this.canRetry && this.serviceable(re, performance.now()).ids.some((id) => id !== node.id && !tried.has(id))) {
          tried.add(node.id);
          this.emit('warn', got.err);
          continue;
        }
        throw this.lastError;
      }
      lease.connected(Math.max(0, performance.now() - start));
      lease.answered();
      this.succeeded(node);
      const conn = got.conn;
      lend(conn, lease);
      conn._clusterId = node.id;
      return conn;
    }
  }

  /** A namespace's `query` / `execute`: a checkout, the statement, the connection back (promise or callback form). */
  private runner(
    method: 'query' | 'execute',
    connect: () => Promise<Hooked>,
  ): (sql: unknown, values?: unknown, cb?: (err: Error | null, ...rest: unknown[]) => void) => Promise<unknown> | undefined {
    const promised = (): boolean => this.promiseForm !== false;
    return (sql, values, cb) => {
      if (typeof values === 'function') {
        cb = values as typeof cb;
        values = undefined;
      }
      const args = values === undefined ? [sql] : [sql, values];
      if (cb !== undefined || !promised()) {
        const done = cb ?? (() => {});
        connect().then(
          (c) => {
            (c[method] as (...a: unknown[]) => unknown)(...args, (err: Error | null, ...rest: unknown[]) => {
              c.release();
              done(err, ...rest);
            });
          },
          (e: Error) => done(e),
        );
        return undefined;
      }
      return connect().then(async (c) => {
        const pc = c.promise() as Record<'query' | 'execute', (...a: unknown[]) => Promise<unknown>>;
        try {
          return await pc[method](...args);
        } finally {
          c.release();
        }
      });
    };
  }

  private lastError: Error | undefined;

  /** mysql2's rule: enough consecutive failures take a node offline for `restoreNodeTimeout`, or remove it. */
  private failed(node: Node): void {
    if (++node.errorCount < this.removeNodeErrorCount) return;
    if (this.restoreNodeTimeout > 0) {
      node.offlineUntil = performance.now() + this.restoreNodeTimeout;
      this.emit('offline', node.id);
      return;
    }
    this.nodes.delete(node.id);
    node.pool.end(() => {});
    this.publish();
    this.emit('remove', node.id);
  }

  private succeeded(node: Node): void {
    node.errorCount = Math.max(0, Math.min(node.errorCount, this.removeNodeErrorCount) - 1);
    if (node.offlineUntil !== 0) {
      node.offlineUntil = 0;
      this.emit('online', node.id);
    }
  }
}
