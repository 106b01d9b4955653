/**
 * createPoolCluster (the mysql2 PoolCluster face) against two MariaDB
 * servers this file starts (primaries both: `read_only = 1` makes one read
 * as a replica to the `mysql` check; a real replica is
 * mysql-pool-cluster-replica.test.ts's). Each
 * routing law is checked by asking the server that answered (`@@port`).
 */
import mysql from 'mysql2/promise';
import mysqlCallback from 'mysql2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPoolCluster, type PoisePoolCluster } from '../../src/outbound/mysql-pool-cluster.js';
import { startMariadb, type TestDbServer } from '../helpers/db-servers.js';
import { freePort } from '../helpers/ports.js';
import { slotOf } from '../helpers/http-rig.js';
import { until } from '../helpers/until.js';

let a: TestDbServer;
let b: TestDbServer;

beforeAll(async () => {
  a = await startMariadb();
  b = await startMariadb();
}, 120_000);
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
});

const config = (s: TestDbServer) => ({ host: '127.0.0.1', port: s.port, user: 'root', password: '', connectionLimit: 8 });

type Conn = { query(sql: string): Promise<[{ port: number }[], unknown]>; release(): void };

/** The port of the server a checked-out connection talks to, asked of the server. */
async function portOf(conn: Conn): Promise<number> {
  const [rows] = await conn.query('SELECT @@port AS port');
  return Number(rows[0]!.port);
}

/** `n` checkouts of `get()`, each released at once: the ports that answered, in order. */
async function ports(n: number, get: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const conn = (await get()) as Conn;
    out.push(await portOf(conn));
    conn.release();
  }
  return out;
}

function cluster(extra: Partial<Parameters<typeof createPoolCluster>[0]> = {}): PoisePoolCluster {
  const c = createPoolCluster({ createPool: mysql.createPool, ...extra });
  c.add('MASTER', config(a));
  c.add('SLAVE1', config(b));
  return c;
}

describe('createPoolCluster: mysql2 PoolCluster, routed by poise', () => {
  it("RR alternates exactly; ORDER always takes the pattern's first; a pattern narrows the nodes; remove and add change them", async () => {
    const c = cluster();
    try {
      const rr = await ports(10, () => c.getConnection('*', 'RR') as Promise<unknown>);
      expect(rr.filter((p) => p === a.port).length).toBe(5);
      expect(rr.filter((p) => p === b.port).length).toBe(5);
      for (let i = 1; i < rr.length; i++) expect(rr[i]).not.toBe(rr[i - 1]);
      expect(await ports(6, () => c.getConnection('*', 'ORDER') as Promise<unknown>)).toEqual(Array(6).fill(a.port));
      expect(await ports(6, () => c.of('SLAVE*', 'p2c:latency').getConnection() as Promise<unknown>)).toEqual(Array(6).fill(b.port));
      c.remove('MASTER');
      expect(c.nodeIds()).toEqual(['SLAVE1']);
      expect(await ports(4, () => c.getConnection('*', 'ORDER') as Promise<unknown>)).toEqual(Array(4).fill(b.port));
      await expect(c.getConnection('MASTER')).rejects.toMatchObject({ code: 'POOL_NOEXIST' });
      c.add('MASTER', config(a));
      expect(await ports(4, () => c.of('MASTER').getConnection() as Promise<unknown>)).toEqual(Array(4).fill(a.port));
      expect(() => c.of('*', 'FASTEST' as never)).toThrow(/of\(pattern, selector\)/);
    } finally {
      await c.end();
    }
  }, 60_000);

  it('least-loaded counts checked-out connections: with 3 held on MASTER, the next 3 go to SLAVE1, then they alternate', async () => {
    const c = cluster();
    try {
      const held: Conn[] = [];
      for (let i = 0; i < 3; i++) held.push((await c.getConnection('MASTER')) as Conn);
      const ns = c.of('*', 'least-loaded');
      const next: Conn[] = [];
      for (let i = 0; i < 3; i++) next.push((await ns.getConnection()) as Conn);
      expect(await Promise.all(next.map(portOf))).toEqual([b.port, b.port, b.port]);
      // 3 and 3: one more on each side keeps them within one.
      const more: Conn[] = [];
      for (let i = 0; i < 2; i++) more.push((await ns.getConnection()) as Conn);
      expect((await Promise.all(more.map(portOf))).sort()).toEqual([a.port, b.port].sort());
      for (const conn of [...held, ...next, ...more]) conn.release();
      expect(c.balancer.router().openLeases).toBe(0);
    } finally {
      await c.end();
    }
  }, 60_000);

  it('commands queued on one connection: one request in flight on its node until the last ends, then none', async () => {
    const c = cluster();
    try {
      const conn = (await c.getConnection('MASTER')) as Conn & { query(sql: string): Promise<unknown> };
      const slot = slotOf(c.balancer, 'MASTER');
      const table = c.balancer.table;
      // Three statements at once: mysql2 sends the second only when the first ended.
      const first = conn.query('SELECT SLEEP(0.2)');
      const rest = [conn.query('SELECT SLEEP(0.2)'), conn.query('SELECT SLEEP(0.2)')];
      expect(table.requests(slot)).toBe(1);
      await first;
      // The first ended, two still queued or running: the node still counts this connection's request.
      expect(table.requests(slot)).toBe(1);
      await Promise.all(rest);
      expect(table.requests(slot)).toBe(0);
      conn.release();
      expect(c.balancer.router().openLeases).toBe(0);
    } finally {
      await c.end();
    }
  }, 60_000);

  it('namespace query / execute (promise form) answer from the chosen node and hand the connection back', async () => {
    const c = cluster();
    try {
      const [rows] = (await c.of('SLAVE1').query('SELECT @@port AS port')) as [{ port: number }[]];
      expect(Number(rows[0]!.port)).toBe(b.port);
      const [rows2] = (await c.of('MASTER').execute('SELECT @@port AS port, ? AS x', [7])) as [{ port: number; x: number }[]];
      expect(Number(rows2[0]!.port)).toBe(a.port);
      expect(Number(rows2[0]!.x)).toBe(7);
    } finally {
      await c.end();
    }
  }, 60_000);

  it('the callback form (mysql2, not mysql2/promise): getConnection(cb) and query(sql, cb)', async () => {
    const c = createPoolCluster({ createPool: mysqlCallback.createPool });
    c.add('A', config(a));
    try {
      const port = await new Promise<number>((resolve, reject) =>
        c.getConnection('A', (err, conn) => {
          if (err) return reject(err);
          const cc = conn as { query(sql: string, cb: (e: Error | null, r: { port: number }[]) => void): void; release(): void };
          cc.query('SELECT @@port AS port', (e, r) => {
            cc.release();
            if (e) reject(e);
            else resolve(Number(r[0]!.port));
          });
        }),
      );
      expect(port).toBe(a.port);
      const viaNs = await new Promise<number>((resolve, reject) =>
        c
          .of('A')
          .query('SELECT @@port AS port', (e: Error | null, r: unknown) =>
            e ? reject(e) : resolve(Number((r as { port: number }[])[0]!.port)),
          ),
      );
      expect(viaNs).toBe(a.port);
    } finally {
      await new Promise<void>((resolve) => c.end(() => resolve()));
    }
  }, 60_000);

  it("roles from the mysql check: intent 'read' goes to the read_only server, 'write' to the other; flipping read_only swaps them", async () => {
    const admin = async (s: TestDbServer, sql: string): Promise<void> => {
      const conn = await mysql.createConnection(config(s));
      await conn.query(sql);
      await conn.end();
    };
    await admin(b, 'SET GLOBAL read_only = 1');
    const c = cluster({ check: { user: 'root', intervalMs: 100, jitterPercent: 0, rise: 1, fall: 1, timeoutMs: 2000 } });
    try {
      const reads = c.of('*', { policy: 'p2c:latency', intent: 'read' });
      const writes = c.of('*', { intent: 'write' });
      // Until the checks have read both roles a checkout may be refused (no primary known yet): the probes wait it out.
      await until(
        async () => (await ports(1, () => writes.getConnection() as Promise<unknown>).catch(() => [-1]))[0] === a.port,
        'the roles read',
      );
      await until(
        async () => (await ports(1, () => reads.getConnection() as Promise<unknown>).catch(() => [-1]))[0] === b.port,
        'the replica read',
      );
      expect(await ports(10, () => reads.getConnection() as Promise<unknown>)).toEqual(Array(10).fill(b.port));
      expect(await ports(10, () => writes.getConnection() as Promise<unknown>)).toEqual(Array(10).fill(a.port));
      // b becomes writable before a stops being: a check between the two never sees no primary at all.
      await admin(b, 'SET GLOBAL read_only = 0');
      await admin(a, 'SET GLOBAL read_only = 1');
      await until(
        async () => (await ports(1, () => writes.getConnection() as Promise<unknown>).catch(() => [-1]))[0] === b.port,
        'writes to move',
      );
      await until(
        async () => (await ports(1, () => reads.getConnection() as Promise<unknown>).catch(() => [-1]))[0] === a.port,
        'reads to move',
      );
      expect(await ports(10, () => reads.getConnection() as Promise<unknown>)).toEqual(Array(10).fill(a.port));
      expect(await ports(10, () => writes.getConnection() as Promise<unknown>)).toEqual(Array(10).fill(b.port));
    } finally {
      await admin(a, 'SET GLOBAL read_only = 0');
      await admin(b, 'SET GLOBAL read_only = 0');
      await c.end();
    }
  }, 60_000);

  it("a node that refuses: 'warn' and a retry on another node (canRetry); after removeNodeErrorCount failures 'remove', or 'offline' with restoreNodeTimeout", async () => {
    const dead = await freePort();
    for (const restoreNodeTimeout of [0, 60_000]) {
      const c = createPoolCluster({ createPool: mysql.createPool, removeNodeErrorCount: 2, restoreNodeTimeout });
      c.add('DEAD', { ...config(a), port: dead });
      c.add('LIVE', config(a));
      const events: string[] = [];
      for (const e of ['warn', 'remove', 'offline', 'online'])
        c.on(e, (x: unknown) => events.push(e === 'warn' ? 'warn' : `${e}:${String(x)}`));
      try {
        // ORDER tries DEAD first every time it is serviceable.
        expect(await ports(3, () => c.getConnection('*', 'ORDER') as Promise<unknown>)).toEqual(Array(3).fill(a.port));
        // mysql2's order: the node's state changes before the failed checkout is reported as a warning.
        expect(events).toEqual(['warn', restoreNodeTimeout === 0 ? 'remove:DEAD' : 'offline:DEAD', 'warn']);
        expect(c.nodeIds()).toEqual(restoreNodeTimeout === 0 ? ['LIVE'] : ['DEAD', 'LIVE']);
        await expect(c.getConnection('DEAD')).rejects.toMatchObject({
          code: restoreNodeTimeout === 0 ? 'POOL_NOEXIST' : 'POOL_NONEONLINE',
        });
      } finally {
        await c.end();
      }
    }
  }, 60_000);
});
