/**
 * The `mysql` check with `roles: true` against two MariaDB servers this file
 * starts: `read_only = 1` reads as a replica, `0` as a primary, a change of
 * it moves writes at the next check, and every check logs in fully and
 * quits (the servers count no aborted connection, so max_connect_errors
 * never blocks the checking host).
 */
import mysql from 'mysql2/promise';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DbRole } from '../../src/load/db-state.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { startMariadb, type TestDbServer } from '../helpers/db-servers.js';
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

async function sql(server: TestDbServer, text: string): Promise<unknown[]> {
  const conn = await mysql.createConnection({ socketPath: path.join(server.dir, 'mysqld.sock'), user: 'root', password: '' });
  try {
    const [rows] = await conn.query(text);
    return rows as unknown[];
  } finally {
    await conn.end();
  }
}

describe('MariaDB roles: read_only', () => {
  it('read_only = 1 is a replica, 0 a primary; flipping them moves writes and reads; no connection is counted aborted', async () => {
    await sql(b, 'SET GLOBAL read_only = 1');
    const balancer = new Balancer({
      capacity: 4,
      health: { check: { kind: 'mysql', roles: true, intervalMs: 100, jitterPercent: 0, rise: 1, fall: 1, timeoutMs: 2000 } },
    });
    balancer.update([
      { id: 'a', address: `127.0.0.1:${a.port}` },
      { id: 'b', address: `127.0.0.1:${b.port}` },
    ]);
    const router = balancer.router();
    const db = balancer.ownerTable.db;
    const slot = (id: string): number => balancer.slotEntries().find((e) => e.id === id)!.slot;
    const ids = (intent: 'read' | 'write'): Set<string> => {
      const out = new Set<string>();
      for (let i = 0; i < 100; i++) {
        const l = router.acquire({ intent });
        out.add(l.id);
        l.release('success');
      }
      return out;
    };
    try {
      await until(() => db.role(slot('a')) === DbRole.Primary && db.role(slot('b')) === DbRole.Replica, 'a primary and b replica', 15_000);
      expect(ids('write')).toEqual(new Set(['a']));
      expect(ids('read')).toEqual(new Set(['b']));
      // No replication configured: no replica status row, lag 0.
      expect(db.lagMs(slot('b'))).toBe(0);
      await sql(a, 'SET GLOBAL read_only = 1');
      await sql(b, 'SET GLOBAL read_only = 0');
      await until(() => db.role(slot('a')) === DbRole.Replica && db.role(slot('b')) === DbRole.Primary, 'the roles to swap', 15_000);
      expect(ids('write')).toEqual(new Set(['b']));
      expect(ids('read')).toEqual(new Set(['a']));
      for (const server of [a, b]) {
        const rows = (await sql(server, "SHOW GLOBAL STATUS LIKE 'Aborted_connects'")) as { Value: string }[];
        expect(rows[0]!.Value).toBe('0');
      }
      expect(balancer.healthStats().counters.checksFailed).toBe(0);
    } finally {
      balancer.close();
    }
  }, 60_000);
});
