/**
 * createPoolCluster (the mysql2 PoolCluster face) over a real MariaDB primary
 * and its replica (binary-log replication, started by this file): reads go to
 * the replica the `mysql` check reads as one and see what the primary wrote;
 * a replica whose SQL thread stopped (`Seconds_Behind_Master` NULL: lag
 * unknown) is passed over by a read with `maxLagMs` (the primary answers),
 * and taken again once it replays. Each law is checked by asking the server
 * that answered (`@@port`).
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPoolCluster } from '../../src/outbound/mysql-pool-cluster.js';
import { startMariadb, startMariadbReplica, type TestDbServer } from '../helpers/db-servers.js';
import { until } from '../helpers/until.js';

let primary: TestDbServer;
let replica: TestDbServer;

beforeAll(async () => {
  primary = await startMariadb({ binlog: true });
  replica = await startMariadbReplica(primary);
}, 120_000);
afterAll(async () => {
  await Promise.all([replica?.stop(), primary?.stop()]);
});

const config = (s: TestDbServer) => ({ host: '127.0.0.1', port: s.port, user: 'root', password: '', connectionLimit: 4 });

async function admin(s: TestDbServer, sql: string): Promise<unknown[]> {
  const conn = await mysql.createConnection(config(s));
  try {
    const [rows] = await conn.query(sql);
    return rows as unknown[];
  } finally {
    await conn.end();
  }
}

type Conn = { query(sql: string): Promise<[Record<string, unknown>[], unknown]>; release(): void };

/** One checkout of `get()`: the port of the server that answered and the value of `sql` there, released at once. */
async function ask(get: () => Promise<unknown>, sql = 'SELECT 0 AS v'): Promise<[number, unknown]> {
  const conn = (await get()) as Conn;
  try {
    const [rows] = await conn.query(`SELECT @@port AS port, (${sql}) AS v`);
    return [Number(rows[0]!['port']), rows[0]!['v']];
  } finally {
    conn.release();
  }
}

describe('createPoolCluster over a MariaDB primary and its replica', () => {
  it('reads go to the replica and see the writes; a replica of unknown lag is passed over for maxLagMs, and taken back once it replays', async () => {
    await admin(primary, 'CREATE DATABASE poise_rep');
    await admin(primary, 'CREATE TABLE poise_rep.notes (id INT PRIMARY KEY, body TEXT)');
    const c = createPoolCluster({
      createPool: mysql.createPool,
      check: { user: 'root', intervalMs: 100, jitterPercent: 0, rise: 1, fall: 1, timeoutMs: 2000 },
    });
    c.add('MASTER', config(primary));
    c.add('SLAVE1', config(replica));
    try {
      const reads = c.of('*', { policy: 'p2c:latency', intent: 'read', maxLagMs: 5000 });
      const writes = c.of('*', { intent: 'write' });
      const count = 'SELECT COUNT(*) FROM poise_rep.notes';
      await until(async () => (await ask(() => writes.getConnection()).catch(() => [-1]))[0] === primary.port, 'the primary read');
      await until(async () => (await ask(() => reads.getConnection()).catch(() => [-1]))[0] === replica.port, 'the replica read');

      // 20 writes through the cluster, each on the primary; then every read is the replica's, which has them all.
      for (let i = 0; i < 20; i++) {
        const conn = (await writes.getConnection()) as Conn;
        try {
          const [rows] = await conn.query(`SELECT @@port AS port`);
          expect(Number(rows[0]!['port'])).toBe(primary.port);
          await conn.query(`INSERT INTO poise_rep.notes VALUES (${i}, 'note ${i}')`);
        } finally {
          conn.release();
        }
      }
      await until(async () => Number((await ask(() => reads.getConnection(), count))[1]) === 20, 'the replica to replay the 20 writes');
      for (let i = 0; i < 20; i++) expect(await ask(() => reads.getConnection(), count)).toEqual([replica.port, 20]);

      // The replica stops applying: its lag is unknown (NULL), so a read bounded by maxLagMs goes to the primary.
      await admin(replica, 'STOP SLAVE SQL_THREAD');
      await admin(primary, "INSERT INTO poise_rep.notes VALUES (100, 'while the replica stopped')");
      await until(async () => (await ask(() => reads.getConnection()))[0] === primary.port, 'reads to leave the stopped replica');
      for (let i = 0; i < 20; i++) expect(await ask(() => reads.getConnection(), count)).toEqual([primary.port, 21]);

      // It replays again: reads come back to it and see the write it missed.
      await admin(replica, 'START SLAVE SQL_THREAD');
      await until(async () => {
        const [port, n] = await ask(() => reads.getConnection(), count);
        return port === replica.port && Number(n) === 21;
      }, 'reads to come back to the replica, which replayed the write it missed');
      for (let i = 0; i < 20; i++) expect(await ask(() => reads.getConnection(), count)).toEqual([replica.port, 21]);
    } finally {
      await c.end();
    }
  }, 120_000);
});
