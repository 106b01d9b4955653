/**
 * pg.Pool over routedStream against real PostgreSQL servers: the machine's
 * on 5432 and clusters this file starts (test/helpers/db-servers.ts). Which
 * server answered is asked of the server itself (`inet_server_port()`).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { routedStream, type RoutedSocket } from '../../src/net/routed-stream.js';
import { startPostgres, type TestDbServer } from '../helpers/db-servers.js';

const MAIN_PORT = 5432;
let b: TestDbServer;
let tlsServer: TestDbServer;

beforeAll(async () => {
  // One after the other: a start that fails must not leave the other unstoppable.
  b = await startPostgres();
  tlsServer = await startPostgres({ ssl: true });
}, 90_000);
afterAll(async () => {
  await Promise.all([b?.stop(), tlsServer?.stop()]);
});

function openLeases(balancer: Balancer): number {
  let sum = 0;
  for (let s = 0; s < balancer.table.capacity; s++) sum += balancer.table.connections(s);
  return sum;
}

/**
 * pool.end() resolves once the pool has ended its clients, before their
 * sockets have closed; the leases come back on each socket's close.
 */
async function leasesBack(balancer: Balancer, deadlineMs = 10_000): Promise<number> {
  const end = Date.now() + deadlineMs;
  while (openLeases(balancer) !== 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
  return openLeases(balancer);
}

/** The routed socket under a checked-out pg client. */
function streamOf(client: pg.PoolClient): RoutedSocket {
  return (client as unknown as { connection: { stream: RoutedSocket } }).connection.stream;
}

function twoServers(): Balancer {
  const balancer = new Balancer({ capacity: 8 });
  balancer.update([
    { id: 'pg-main', address: `127.0.0.1:${MAIN_PORT}` },
    { id: 'pg-b', address: `127.0.0.1:${b.port}` },
  ]);
  return balancer;
}

describe('pg.Pool with stream: routedStream(router)', () => {
  it('runs 1,000 queries on a pool of 20 spread over both servers by p2c:connections: 10 connections each, counted by the servers', async () => {
    const balancer = twoServers();
    const router = balancer.router({ policy: 'p2c:connections' });
    const pool = new pg.Pool({ stream: routedStream(router), user: 'postgres', database: 'postgres', max: 20 });
    const perPort = new Map<number, number>();
    const connections = new Set<string>();
    // 20 lanes of 50 queries: the pool opens all 20 connections at once.
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = 0; i < 50; i++) {
          const { rows } = await pool.query<{ port: number; pid: number }>('SELECT inet_server_port() AS port, pg_backend_pid() AS pid');
          const { port, pid } = rows[0]!;
          perPort.set(port, (perPort.get(port) ?? 0) + 1);
          connections.add(`${port}/${pid}`);
        }
      }),
    );
    expect((perPort.get(MAIN_PORT) ?? 0) + (perPort.get(b.port) ?? 0)).toBe(1000);
    expect(perPort.get(MAIN_PORT)).toBeGreaterThan(0);
    expect(perPort.get(b.port)).toBeGreaterThan(0);
    // Two choices among two backends compare both: the 20 connections split exactly.
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
    const router = balancer.router({ policy: 'p2c:connections', ejection: { consecutiveFailures: 2, baseMs: 60_000 } });
    const factory = routedStream(router);
    const sockets: { socket: RoutedSocket; afterKill: boolean; errors: number }[] = [];
    let killed = false;
    const pool = new pg.Pool({
      stream: () => {
        const socket = factory();
        const entry = { socket, afterKill: killed, errors: 0 };
        socket.on('error', () => entry.errors++);
        sockets.push(entry);
        return socket;
      },
      user: 'postgres',
      database: 'postgres',
      max: 20,
    });
    pool.on('error', () => {}); // idle clients whose server died (counted per socket above)
    const watched = new WeakSet<pg.PoolClient>();
    const failedOn: string[] = [];
    const connectErrors: string[] = [];
    const answeredAfterKill: number[] = [];
    let done = 0;
    let killing: Promise<void> | undefined;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = 0; i < 50; i++) {
          let client: pg.PoolClient;
          try {
            client = await pool.connect();
          } catch (err) {
            // A connection the dying server accepted and then refused ("shutting down").
            connectErrors.push((err as Error).message);
            continue;
          }
          if (!watched.has(client)) {
            watched.add(client);
            client.on('error', () => {}); // a checked-out client whose server died between queries
          }
          const backend = streamOf(client).lease?.id ?? '?';
          const afterKill = killed;
          try {
            const { rows } = await client.query<{ port: number }>('SELECT inet_server_port() AS port');
            if (afterKill) answeredAfterKill.push(rows[0]!.port);
            client.release();
          } catch (err) {
            failedOn.push(backend);
            client.release(err as Error);
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
    // Errors only on the dead server's connections: every socket that saw an error was routed to it.
    const errored = sockets.filter((s) => s.errors > 0);
    expect(errored.every((s) => s.socket.lease?.id === 'pg-b')).toBe(true);
    expect(failedOn.every((id) => id === 'pg-b')).toBe(true);
    for (const m of connectErrors) expect(m).toMatch(/shutting down|terminat|ECONNRESET|EPIPE/);
    // At most one failed checkout or query per connection the dead server held.
    const onDead = sockets.filter((s) => s.socket.lease?.id === 'pg-b').length;
    expect(failedOn.length + connectErrors.length).toBeLessThanOrEqual(onDead);
    // Every query issued after the kill was answered by the other server.
    expect(answeredAfterKill.length).toBeGreaterThan(0);
    expect(answeredAfterKill.every((port) => port === MAIN_PORT)).toBe(true);
    // The pool replaced the dead connections, and every new one landed on the live server.
    // The pool replaced the dead connections on the live server (it held 10 before the kill),
    // and every connection opened after the server was gone landed there.
    expect(sockets.filter((s) => s.socket.lease?.id === 'pg-main').length).toBeGreaterThan(10);
    expect(sockets.filter((s) => s.afterKill).every((s) => s.socket.lease?.id === 'pg-main')).toBe(true);
    await pool.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('TLS: pg upgrades the routed stream (ssl with the server CA verified; the server accepts only hostssl)', async () => {
    const balancer = new Balancer({ capacity: 4 });
    balancer.update([{ id: 'pg-tls', address: `127.0.0.1:${tlsServer.port}` }]);
    const router = balancer.router({ policy: 'p2c:connections' });
    // `host` is only the certificate identity here (the stream ignores it for routing).
    const pool = new pg.Pool({ stream: routedStream(router), host: '127.0.0.1', ssl: { ca: tlsServer.ca }, user: 'postgres', database: 'postgres', max: 4 });
    const results = await Promise.all(
      Array.from({ length: 20 }, () => pool.query<{ ssl: boolean; port: number }>('SELECT ssl, inet_server_port() AS port FROM pg_stat_ssl WHERE pid = pg_backend_pid()')),
    );
    for (const r of results) expect(r.rows[0]).toEqual({ ssl: true, port: tlsServer.port });
    await pool.end();
    // Without TLS the server refuses (pg_hba has hostssl only): the query above really ran over TLS.
    const plain = new pg.Pool({ stream: routedStream(router), user: 'postgres', database: 'postgres', max: 1 });
    await expect(plain.query('SELECT 1')).rejects.toThrow(/no pg_hba.conf entry|SSL off/);
    await plain.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);
});
