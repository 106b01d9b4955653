/**
 * mysql2.createPool over routedStream against real MariaDB servers: the
 * machine's on 3306 and one this file starts (test/helpers/db-servers.ts).
 * Which server answered is asked of the server itself (`@@port`,
 * `CONNECTION_ID()`).
 */
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { routedStream, type RoutedSocket } from '../../src/net/routed-stream.js';
import { startMariadb, type TestDbServer } from '../helpers/db-servers.js';

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

function openLeases(balancer: Balancer): number {
  let sum = 0;
  for (let s = 0; s < balancer.table.capacity; s++) sum += balancer.table.connections(s);
  return sum;
}

async function leasesBack(balancer: Balancer, deadlineMs = 10_000): Promise<number> {
  const end = Date.now() + deadlineMs;
  while (openLeases(balancer) !== 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
  return openLeases(balancer);
}

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
    const pool = mysql.createPool({ stream: routedStream(balancer.router({ policy: 'p2c:connections' })), user: 'root', password: '', connectionLimit: 20 });
    const perPort = new Map<number, number>();
    const connections = new Set<string>();
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = 0; i < 50; i++) {
          const [rows] = await pool.query<mysql.RowDataPacket[]>('SELECT @@port AS port, CONNECTION_ID() AS id');
          const { port, id } = rows[0] as { port: number; id: number };
          perPort.set(port, (perPort.get(port) ?? 0) + 1);
          connections.add(`${port}/${id}`);
        }
      }),
    );
    expect((perPort.get(MAIN_PORT) ?? 0) + (perPort.get(b.port) ?? 0)).toBe(1000);
    expect(perPort.get(MAIN_PORT)).toBeGreaterThan(0);
    expect(perPort.get(b.port)).toBeGreaterThan(0);
    const byServer = (port: number): number => [...connections].filter((c) => c.startsWith(`${port}/`)).length;
    expect(byServer(MAIN_PORT)).toBe(10);
    expect(byServer(b.port)).toBe(10);
    expect(openLeases(balancer)).toBe(20);
    await pool.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('a server killed mid-run fails only queries on its own connections; new connections go to the other; counters exact at the end', async () => {
    const balancer = twoServers();
    const factory = routedStream(balancer.router({ policy: 'p2c:connections', ejection: { consecutiveFailures: 2, baseMs: 60_000 } }));
    const sockets: { socket: RoutedSocket; afterKill: boolean; errors: number }[] = [];
    let killed = false;
    const pool = mysql.createPool({
      stream: () => {
        const socket = factory();
        const entry = { socket, afterKill: killed, errors: 0 };
        socket.on('error', () => entry.errors++);
        sockets.push(entry);
        return socket;
      },
      user: 'root',
      password: '',
      connectionLimit: 20,
    });
    const failedOn: string[] = [];
    const connectErrors: string[] = [];
    const answeredAfterKill: number[] = [];
    let done = 0;
    let killing: Promise<void> | undefined;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = 0; i < 50; i++) {
          let conn: mysql.PoolConnection;
          try {
            conn = await pool.getConnection();
          } catch (err) {
            connectErrors.push((err as Error).message);
            continue;
          }
          const backend = streamOf(conn).lease?.id ?? '?';
          const afterKill = killed;
          try {
            const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT @@port AS port');
            if (afterKill) answeredAfterKill.push((rows[0] as { port: number }).port);
            conn.release();
          } catch {
            failedOn.push(backend);
            conn.destroy();
          }
          if (++done === 300) {
            killing = b.kill();
            await killing;
            killed = true;
          }
        }
      }),
    );
    await killing;
    expect(killed).toBe(true);
    const errored = sockets.filter((s) => s.errors > 0);
    expect(errored.every((s) => s.socket.lease?.id === 'my-b')).toBe(true);
    expect(failedOn.every((id) => id === 'my-b')).toBe(true);
    const onDead = sockets.filter((s) => s.socket.lease?.id === 'my-b').length;
    expect(failedOn.length + connectErrors.length).toBeLessThanOrEqual(onDead);
    expect(answeredAfterKill.length).toBeGreaterThan(0);
    expect(answeredAfterKill.every((port) => port === MAIN_PORT)).toBe(true);
    // The pool replaced the dead connections on the live server (it held 10 before the kill),
    // and every connection opened after the server was gone landed there.
    expect(sockets.filter((s) => s.socket.lease?.id === 'my-main').length).toBeGreaterThan(10);
    expect(sockets.filter((s) => s.afterKill).every((s) => s.socket.lease?.id === 'my-main')).toBe(true);
    await pool.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('TLS: mysql2 upgrades the routed stream (ssl with the server CA verified; the server requires secure transport)', async () => {
    const balancer = new Balancer({ capacity: 4 });
    balancer.update([{ id: 'my-tls', address: `127.0.0.1:${tlsServer.port}` }]);
    const router = balancer.router({ policy: 'p2c:connections' });
    // `host` is only the certificate identity here (the stream ignores it for routing).
    const pool = mysql.createPool({ stream: routedStream(router), host: '127.0.0.1', ssl: { ca: tlsServer.ca }, user: 'root', password: '', connectionLimit: 4 });
    const results = await Promise.all(
      Array.from({ length: 20 }, () => pool.query<mysql.RowDataPacket[]>("SELECT @@port AS port, (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher') AS cipher")),
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
