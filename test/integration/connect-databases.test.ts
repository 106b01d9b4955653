// connect() hands real database drivers a routed socket: pg and mysql2 speak
// their protocols over it to the local PostgreSQL and MariaDB.
import mysql from 'mysql2/promise';
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import { connect } from '../../src/outbound/connect.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { until } from '../helpers/until.js';

/** A router over backends `ids`, every one the local server on `port`; its Balancer closes when the test ends. */
function routerTo(port: number, ids: string[], policy: 'p2c:connections' | 'least-loaded'): Router {
  const balancer = new Balancer({ capacity: 16 });
  onTestFinished(() => balancer.close());
  balancer.update(ids.map((id) => ({ id, address: `127.0.0.1:${port}` })));
  return balancer.router({ policy });
}

describe('connect() with PostgreSQL', () => {
  it('hands PostgreSQL a routed socket: pg runs a query over it', async () => {
    // Two backend ids for the one local server: the router picks, pg speaks the protocol.
    const router = routerTo(5432, ['pg-a', 'pg-b'], 'p2c:connections');
    const clients: pg.Client[] = [];
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { socket, lease } = await connect(router);
      ids.push(lease.id);
      const client = new pg.Client({ stream: () => socket, user: 'postgres', database: 'test' });
      await client.connect();
      const { rows } = await client.query<{ n: number }>('SELECT $1::int + 1 AS n', [i]);
      expect(rows[0]!.n).toBe(i + 1);
      clients.push(client);
    }
    // Two choices among two backends always compare both: connections alternate exactly.
    expect(ids.filter((id) => id === 'pg-a').length).toBe(2);
    expect(router.openLeases).toBe(4);
    for (const c of clients) await c.end();
    await until(() => router.openLeases === 0, 'pg sockets to close');
  });
});

describe('connect() with MariaDB', () => {
  it('hands mysql2 a routed socket: a query runs over it and the lease ends with the connection', async () => {
    const router = routerTo(3306, ['maria'], 'least-loaded');
    const { socket, lease } = await connect(router);
    const conn = await mysql.createConnection({ stream: socket, user: 'root', password: '' });
    const [rows] = await conn.query('SELECT 6 * 7 AS answer');
    expect((rows as { answer: number }[])[0]!.answer).toBe(42);
    expect(router.openLeases).toBe(1);
    await conn.end();
    await until(() => lease.released, 'the MariaDB socket to close');
    expect(router.openLeases).toBe(0);
  });
});
