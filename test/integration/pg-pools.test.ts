/**
 * createPgPools against a real PostgreSQL primary and streaming replica
 * (test/helpers/db-servers.ts): every libpq target_session_attrs value routes
 * as docs/guide.md ("node-postgres") says, asserted by `inet_server_port()` of
 * the server that answered each connection; load_balance_hosts=disable keeps
 * libpq's host order for `any`; and after the primary dies and the replica is
 * promoted, read-write moves to it, standby has nothing left to use and
 * prefer-standby falls back to the new primary.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DbRole } from '../../src/load/db-state.js';
import { TARGET_SESSION_ATTRS, type TargetSessionAttrs } from '../../src/outbound/pg-connection.js';
import { createPgPools, type PgPools } from '../../src/outbound/pg-pools.js';
import { currentLsn } from '../../src/db/lsn.js';
import { startPgReplica, startPostgres, type TestDbServer } from '../helpers/db-servers.js';
import { until } from '../helpers/until.js';

const CHECK = { intervalMs: 100, jitterPercent: 0, rise: 1, fall: 1, timeoutMs: 1000 };
const CONNECTIONS = 8;
let primary: TestDbServer;
let replica: TestDbServer;
const made: Array<PgPools<pg.Pool>> = [];

function pools(url: string): PgPools<pg.Pool> {
  const db = createPgPools(url, { Pool: pg.Pool, check: CHECK, pool: { max: CONNECTIONS } });
  made.push(db);
  return db;
}

function rolesKnown(db: PgPools<pg.Pool>, expected: Record<number, number>): boolean {
  return db.balancer.slotEntries().every((e) => db.balancer.ownerTable.db.role(e.slot) === expected[Number(e.id.split(':')[1])]);
}

/** The ports that answered `CONNECTIONS` connections opened at once through `attrs`' pool (each asks `inet_server_port()`). */
async function ports(db: PgPools<pg.Pool>, attrs: TargetSessionAttrs): Promise<number[]> {
  const pool = db.poolFor(attrs);
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => pool.connect()));
  try {
    return await Promise.all(
      clients.map(async (c) => (await c.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]!.port),
    );
  } finally {
    for (const c of clients) c.release();
  }
}

beforeAll(async () => {
  primary = await startPostgres({ settings: { wal_level: 'replica', max_wal_senders: 5 } });
  replica = await startPgReplica(primary);
}, 120_000);

afterAll(async () => {
  await Promise.all(made.map((db) => db.end().catch(() => {})));
  await Promise.all([primary?.stop(), replica?.stop()]);
});

describe('createPgPools (libpq multi-host strings) on a real primary and replica', () => {
  let random: PgPools<pg.Pool>;
  let ordered: PgPools<pg.Pool>;

  beforeAll(async () => {
    // The replica listed first in both: libpq's order matters only with load_balance_hosts=disable.
    random = pools(`postgresql://postgres@127.0.0.1:${replica.port},127.0.0.1:${primary.port}/postgres?load_balance_hosts=random`);
    ordered = pools(`postgresql://postgres@127.0.0.1:${replica.port},127.0.0.1:${primary.port}/postgres?target_session_attrs=read-write`);
    const roles = { [primary.port]: DbRole.Primary, [replica.port]: DbRole.Replica };
    await until(
      () => rolesKnown(random, roles) && rolesKnown(ordered, roles),
      'the role checks to find the primary and the replica',
      30_000,
    );
  }, 60_000);

  it('any (first, with no connection open): 8 connections split 4 and 4 with load_balance_hosts=random (p2c:connections over both); all on the first host with disable (libpq order)', async () => {
    const spread = await ports(random, 'any');
    expect(spread.filter((p) => p === primary.port)).toHaveLength(CONNECTIONS / 2);
    expect(spread.filter((p) => p === replica.port)).toHaveLength(CONNECTIONS / 2);
    expect(new Set(await ports(ordered, 'any'))).toEqual(new Set([replica.port]));
  });

  it('read-write and primary: every connection on the primary', async () => {
    for (const attrs of ['read-write', 'primary'] as const) {
      expect(new Set(await ports(random, attrs))).toEqual(new Set([primary.port]));
      expect(new Set(await ports(ordered, attrs))).toEqual(new Set([primary.port]));
    }
    // The string's own target_session_attrs is `pool`.
    const c = await ordered.pool.connect();
    expect((await c.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]!.port).toBe(primary.port);
    c.release();
  });

  it('read-only, standby and prefer-standby: every connection on the replica while it is within maxLagMs', async () => {
    for (const attrs of ['read-only', 'standby', 'prefer-standby'] as const) {
      expect(new Set(await ports(random, attrs))).toEqual(new Set([replica.port]));
    }
  });

  it('readAfter(lsn): 20 reads, each right after its write, each see it (a replica that replayed it, else the primary)', async () => {
    const w = await random.poolFor('read-write').connect();
    try {
      await w.query('CREATE TABLE ryw (v integer)');
      for (let i = 0; i < 20; i++) {
        await w.query('INSERT INTO ryw VALUES ($1)', [i]);
        const lsn = await currentLsn(w);
        const c = new pg.Client(random.readAfter(lsn));
        await c.connect();
        try {
          expect((await c.query<{ n: number }>('SELECT count(*)::int AS n FROM ryw WHERE v = $1', [i])).rows[0]!.n).toBe(1);
        } finally {
          await c.end();
        }
      }
    } finally {
      w.release();
    }
  });

  it('the primary dies and the replica is promoted: read-write moves to it, standby has none, prefer-standby falls back to it', async () => {
    for (const db of [random, ordered]) for (const p of TARGET_SESSION_ATTRS) db.poolFor(p).on('error', () => {});
    await primary.kill();
    const direct = new pg.Client({ host: '127.0.0.1', port: replica.port, user: 'postgres', database: 'postgres' });
    await direct.connect();
    await direct.query('SELECT pg_promote()');
    await direct.end();
    await until(() => rolesKnown(random, { [replica.port]: DbRole.Primary, [primary.port]: DbRole.Unknown }), 'the promotion seen', 30_000);
    // Connections opened before the kill to the old primary are gone; new ones route by the new roles.
    expect(new Set(await ports(random, 'read-write'))).toEqual(new Set([replica.port]));
    expect(new Set(await ports(random, 'prefer-standby'))).toEqual(new Set([replica.port]));
    // The two sets' pools hold up to 8 idle connections each to the promoted server (max_connections 60):
    // ended here, so the fresh set below is not refused for the old sets' idle clients.
    await Promise.all([random, ordered].map((db) => db.end()));
    // A pooled connection stays where it was opened (the standby pool's idle ones are on the promoted server
    // now, as docs/guide.md says): new pools show where a new connection goes.
    const fresh = pools(`postgresql://postgres@127.0.0.1:${primary.port},127.0.0.1:${replica.port}/postgres?target_session_attrs=standby`);
    for (const p of TARGET_SESSION_ATTRS) fresh.poolFor(p).on('error', () => {});
    await until(
      () => rolesKnown(fresh, { [replica.port]: DbRole.Primary, [primary.port]: DbRole.Unknown }),
      'the new pools to see the roles',
      30_000,
    );
    expect(new Set(await ports(fresh, 'prefer-standby'))).toEqual(new Set([replica.port]));
    expect(new Set(await ports(fresh, 'read-write'))).toEqual(new Set([replica.port]));
    const refused = await fresh.pool
      .connect()
      .then((c) => (c.release(), undefined))
      .catch((e: unknown) => e as { code?: string });
    expect(refused?.code).toBe('ReplicaLag');
  });
});
