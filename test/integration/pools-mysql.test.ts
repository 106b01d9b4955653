/**
 * mysql2.createPool over routedStream against real MariaDB servers: the
 * machine's on 3306 and one this file starts (test/helpers/db-servers.ts).
 * Which server answered is asked of the server itself (`@@port`,
 * `CONNECTION_ID()`).
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { leasesBack, openLeases } from '../helpers/leases.js';
import { routedStream, type RoutedSocket } from '../../src/outbound/routed-stream.js';
import { startMariadb, type TestDbServer } from '../helpers/db-servers.js';
import { expectEvenSpread, expectKillLaws, killMidway, tracking, type Checkout } from '../helpers/pool-kill.js';

const MAIN_PORT = 3306;
let b: TestDbServer;
let tlsServer: TestDbServer;

beforeAll(async () => {
  // One after the other: a start that fails must not leave the other unstoppable.
  b = await startMariadb();
  tlsServer = await startMariadb({ ssl: true });
}, 90_000);
afterAll(async () => {
  await Promise.all([b?.stop(), tlsServer?.stop()]);
});

function twoServers(): Balancer {
  const balancer = new Balancer({ capacity: 8 });
  balancer.update([
    { id: 'my-main', address: `127.0.0.1:${MAIN_PORT}` },
    { id: 'my-b', address: `127.0.0.1:${b.port}` },
  ]);
  return balancer;
}

/** The routed socket under a pooled mysql2 connection. */
function streamOf(conn: mysql.PoolConnection): RoutedSocket {
  return (conn as unknown as { connection: { stream: RoutedSocket } }).connection.stream;
}

describe('mysql2.createPool with stream: routedStream(router)', () => {
  it('runs 1,000 queries on a pool of 20 spread over both servers by p2c:connections: 10 connections each, counted by the servers', async () => {
    const balancer = twoServers();
    const pool = mysql.createPool({
      stream: routedStream(balancer.router({ policy: 'p2c:connections' })),
      user: 'root',
      password: '',
      connectionLimit: 20,
    });
    const ask = async (): Promise<{ port: number; id: number }> =>
      (await pool.query<mysql.RowDataPacket[]>('SELECT @@port AS port, CONNECTION_ID() AS id'))[0][0] as { port: number; id: number };
    await expectEvenSpread(ask, MAIN_PORT, b.port);
    expect(openLeases(balancer)).toBe(20);
    await pool.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('a server killed mid-run fails only queries on its own connections; new connections go to the other; counters exact at the end', async () => {
    const balancer = twoServers();
    const track = tracking(
      routedStream(balancer.router({ policy: 'p2c:connections', ejection: { consecutiveFailures: 2, baseMs: 60_000 } })),
    );
    const pool = mysql.createPool({ stream: track.stream, user: 'root', password: '', connectionLimit: 20 });
    const checkout = async (): Promise<Checkout> => {
      const conn = await pool.getConnection();
      return {
        backend: streamOf(conn).lease?.id ?? '?',
        port: async () => ((await conn.query<mysql.RowDataPacket[]>('SELECT @@port AS port'))[0][0] as { port: number }).port,
        release: (err) => (err === undefined ? conn.release() : conn.destroy()),
      };
    };
    expectKillLaws(await killMidway(track, checkout, () => b.kill()), 'my-b', 'my-main', MAIN_PORT);
    await pool.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('TLS: mysql2 upgrades the routed stream (ssl with the server CA verified; the server requires secure transport)', async () => {
    const balancer = new Balancer({ capacity: 4 });
    balancer.update([{ id: 'my-tls', address: `127.0.0.1:${tlsServer.port}` }]);
    const router = balancer.router({ policy: 'p2c:connections' });
    // `host` is only the certificate identity here (the stream ignores it for routing).
    const pool = mysql.createPool({
      stream: routedStream(router),
      host: '127.0.0.1',
      ssl: { ca: tlsServer.ca },
      user: 'root',
      password: '',
      connectionLimit: 4,
    });
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        pool.query<mysql.RowDataPacket[]>(
          "SELECT @@port AS port, (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher') AS cipher",
        ),
      ),
    );
    for (const [rows] of results) {
      const row = rows[0] as { port: number; cipher: string };
      expect(row.port).toBe(tlsServer.port);
      expect(row.cipher.length).toBeGreaterThan(0);
    }
    await pool.end();
    // Without TLS this server refuses the login (MariaDB 10.11 with require_secure_transport
    // answers "Access denied" to a plain TCP root login); the cipher above is the proof of TLS.
    const plain = mysql.createPool({ stream: routedStream(router), user: 'root', password: '', connectionLimit: 1 });
    await expect(plain.query('SELECT 1')).rejects.toThrow(/secure transport|Access denied/i);
    await plain.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);
});
