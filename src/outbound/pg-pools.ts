/**
 * node-postgres pools from libpq's multi-host connection forms: one Balancer
 * over the hosts, a `postgres` check reading each server's role and lag, and
 * a pool per libpq `target_session_attrs` routed through it
 * (docs/guide.md, "node-postgres", says where this differs from libpq).
 */
import { invalidConfig } from '../core/errors.js';
import { Balancer, type BalancerOptions } from '../runtime/balancer.js';
import type { PolicyName } from '../runtime/policies.js';
import type { Router } from '../runtime/router.js';
import {
  parsePgConnection,
  TARGET_SESSION_ATTRS,
  type PgConnection,
  type PgConnectionConfig,
  type TargetSessionAttrs,
} from './pg-connection.js';
import { routedStream, type RoutedStreamOptions } from './routed-stream.js';

/** A health check's options, as the Balancer takes them (net does not import health/). */
type CheckOptions = NonNullable<NonNullable<BalancerOptions['health']>['check']>;

/** What a pool class needs here: pg's `Pool` (or `Client`) fits. */
export interface PgPoolLike {
  end(): Promise<void>;
}

/** Options of {@link createPgPools}. */
export interface PgPoolsOptions<P extends PgPoolLike> {
  /** The pool class to build (`pg.Pool`): this package does not load pg itself. */
  Pool: new (
    config: Record<string, unknown>,
  ) => P;
  /** More config for every pool (`max`, `idleTimeoutMillis`, `ssl`, ...). */
  pool?: Record<string, unknown>;
  /** A read's lag bound, ms (standby, prefer-standby, read-only); default 10 000. */
  maxLagMs?: number;
  /** The policy inside the chosen set; default `p2c:connections` with `load_balance_hosts=random`, `priority` (hosts in order) with `disable`. */
  policy?: PolicyName;
  /** More options of the role check (`intervalMs`, default 1000; `rise`, `fall`, `timeoutMs`, ...); kind, user and database come from the connection. */
  check?: Omit<CheckOptions, 'kind' | 'roles' | 'user' | 'database'>;
  /** More options of the Balancer (`logger`, `clock`, ...); `health` is set here. */
  balancer?: Omit<BalancerOptions, 'health'>;
  /** The PG* variables libpq reads; default `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
}

/** The pools of {@link createPgPools}; each pool's connections are routed when they open. */
export interface PgPools<P extends PgPoolLike> {
  readonly balancer: Balancer;
  readonly connection: PgConnection;
  /** The pool for the connection's own `target_session_attrs` (`any` when it names none). */
  readonly pool: P;
  /** The pool for another `target_session_attrs`, made at its first use and kept. */
  poolFor(attrs: TargetSessionAttrs): P;
  /**
   * Read-your-writes: a config for one `new pg.Client(...)` (or a pool) whose
   * connection goes to a replica that replayed `minLsn` (from `currentLsn`),
   * else to the primary.
   */
  readAfter(minLsn: string | bigint): Record<string, unknown>;
  /** Ends every pool made and closes the Balancer. */
  end(): Promise<void>;
}

/**
 * Pools for a libpq connection string or config with several hosts.
 *
 * @example
 * import pg from 'pg';
 * const db = createPgPools('postgresql://app@pg-a,pg-b,pg-c/app?target_session_attrs=read-write', { Pool: pg.Pool });
 * await db.pool.query('INSERT INTO t VALUES (1)');               // the primary
 * await db.poolFor('prefer-standby').query('SELECT count(*) FROM t'); // a replica within 10 s of lag, else the primary
 */
export function createPgPools<P extends PgPoolLike>(connection: string | PgConnectionConfig, options: PgPoolsOptions<P>): PgPools<P> {
  if (typeof options?.Pool !== 'function') invalidConfig('options.Pool', 'must be a pool class (pg.Pool)', options?.Pool);
  const conn = parsePgConnection(connection, options.env);
  const balancer = new Balancer({
    ...options.balancer,
    health: { check: { intervalMs: 1000, ...options.check, kind: 'postgres', user: conn.user, database: conn.database, roles: true } },
  });
  const ordered = conn.loadBalanceHosts === 'disable';
  balancer.update(conn.addresses.map((address, i) => ({ id: address, address, ...(ordered ? { priority: i } : {}) })));
  const policy: PolicyName = options.policy ?? (ordered ? 'priority' : 'p2c:connections');
  const base = { policy, ...(options.maxLagMs === undefined ? {} : { maxLagMs: options.maxLagMs }) };
  // read-only and standby refuse a primary; prefer-standby falls back to it.
  const routers: Record<'plain' | 'refuse' | 'primary', Router> = {
    plain: balancer.router(base),
    refuse: balancer.router({ ...base, readFallback: 'refuse' }),
    primary: balancer.router({ ...base, readFallback: 'primary' }),
  };
  const config = {
    user: conn.user,
    database: conn.database,
    ...(conn.password === undefined ? {} : { password: conn.password }),
    ...options.pool,
  };
  const made = new Map<TargetSessionAttrs, P>();
  const poolFor = (attrs: TargetSessionAttrs): P => {
    if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(attrs))
      invalidConfig('poolFor(attrs)', `must be one of ${TARGET_SESSION_ATTRS.join(', ')}`, attrs);
    let p = made.get(attrs);
    if (p === undefined) {
      const [router, route] = routeOf(attrs, routers);
      p = new options.Pool({ ...config, stream: routedStream(router, route) });
      made.set(attrs, p);
    }
    return p;
  };
  return {
    balancer,
    connection: conn,
    pool: poolFor(conn.targetSessionAttrs),
    poolFor,
    readAfter: (minLsn) => ({ ...config, stream: routedStream(routers.primary, { intent: 'read', minLsn }) }),
    end: async () => {
      await Promise.all([...made.values()].map((p) => p.end()));
      balancer.close();
    },
  };
}

/** The router and the intent each libpq value routes by (the table in docs/guide.md, "node-postgres"). */
function routeOf(attrs: TargetSessionAttrs, r: Record<'plain' | 'refuse' | 'primary', Router>): [Router, RoutedStreamOptions] {
  switch (attrs) {
    case 'any':
      return [r.plain, {}];
    case 'read-write':
    case 'primary':
      return [r.plain, { intent: 'write' }];
    case 'read-only':
    case 'standby':
      return [r.refuse, { intent: 'read' }];
    case 'prefer-standby':
      return [r.primary, { intent: 'read' }];
  }
}
