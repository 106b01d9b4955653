/**
 * pg.Pool over routedStream against real PostgreSQL servers: the machine's
 * on 5432 and clusters this file starts (test/helpers/db-servers.ts). Which
 * server answered is asked of the server itself (`inet_server_port()`).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { leasesBack, openLeases } from '../helpers/leases.js';
import { routedStream, type RoutedSocket } from '../../src/outbound/routed-stream.js';
import { startPostgres, type TestDbServer } from '../helpers/db-servers.js';
import { until } from '../helpers/until.js';
import { expectEvenSpread, expectKillLaws, killMidway, tracking, type Checkout } from '../helpers/pool-kill.js';

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
    const ask = async (): Promise<{ port: number; id: number }> =>
      (await pool.query<{ port: number; id: number }>('SELECT inet_server_port() AS port, pg_backend_pid() AS id')).rows[0]!;
    await expectEvenSpread(ask, MAIN_PORT, b.port);
    expect(openLeases(balancer)).toBe(20);
    await pool.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('a server killed mid-run fails only queries on its own connections; new connections go to the other; counters exact at the end', async () => {
    const balancer = twoServers();
    const router = balancer.router({ policy: 'p2c:connections', ejection: { consecutiveFailures: 2, baseMs: 60_000 } });
    const track = tracking(routedStream(router));
    const pool = new pg.Pool({ stream: track.stream, user: 'postgres', database: 'postgres', max: 20 });
    pool.on('error', () => {}); // idle clients whose server died (counted per socket)
    const watched = new WeakSet<pg.PoolClient>();
    const checkout = async (): Promise<Checkout> => {
      const client = await pool.connect();
      if (!watched.has(client)) {
        watched.add(client);
        client.on('error', () => {}); // a checked-out client whose server died between queries
      }
      return {
        backend: streamOf(client).lease?.id ?? '?',
        port: async () => (await client.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]!.port,
        release: (err) => client.release(err),
      };
    };
    expectKillLaws(await killMidway(track, checkout, () => b.kill()), 'pg-b', 'pg-main', MAIN_PORT);
    await pool.end();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('TLS: pg upgrades the routed stream (ssl with the server CA verified; the server accepts only hostssl)', async () => {
    const balancer = new Balancer({ capacity: 4 });
    balancer.update([{ id: 'pg-tls', address: `127.0.0.1:${tlsServer.port}` }]);
    const router = balancer.router({ policy: 'p2c:connections' });
    // `host` is only the certificate identity here (the stream ignores it for routing).
    const pool = new pg.Pool({
      stream: routedStream(router),
      host: '127.0.0.1',
      ssl: { ca: tlsServer.ca },
      user: 'postgres',
      database: 'postgres',
      max: 4,
    });
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        pool.query<{ ssl: boolean; port: number }>('SELECT ssl, inet_server_port() AS port FROM pg_stat_ssl WHERE pid = pg_backend_pid()'),
      ),
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

  it('admission: a held-back band waits inside pg.Pool while a higher band connects; the server sees only the admitted; QueueFull and QueueTimeout reach pg as err.code', async () => {
    const balancer = new Balancer({ capacity: 4 });
    balancer.update([{ id: 'pg-main', address: `127.0.0.1:${MAIN_PORT}`, maxInflight: 4 }]);
    const router = balancer.router({ policy: 'p2c:connections' });
    // Band 1 is admitted while fewer than 2 of the 4 connections are open; band 10 while fewer than 4.
    const gate = new AdmissionGate(router, { bands: [10, 1], ceilings: [1, 0.25], kind: 'connection', maxQueue: 1 });
    const band = (p: number) => gate.admissionStats().bands.find((x) => x.band === p)!;
    const pool = (rank: number, name: string, extra: { admissionTimeoutMs?: number } = {}) =>
      new pg.Pool({
        stream: routedStream(router, { band: rank, ...extra }),
        user: 'postgres',
        database: 'postgres',
        application_name: name,
        max: 4,
      });
    const low = pool(1, 'poise-adm-low');
    const high = pool(10, 'poise-adm-high');
    const onServer = async (c: pg.PoolClient): Promise<Record<string, number>> => {
      const r = await c.query<{ name: string; n: number }>(
        "SELECT application_name AS name, count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'poise-adm-%' GROUP BY 1 ORDER BY 1",
      );
      return Object.fromEntries(r.rows.map((x) => [x.name, x.n]));
    };
    const held = [await low.connect(), await low.connect()];
    const third = low.connect();
    await until(() => band(1).queued === 1, 'the third low-band connection queued');
    // The band's queue holds one (maxQueue 1): the next low-band connection is refused at once.
    const full = pool(1, 'poise-adm-full');
    await expect(full.query('SELECT 1')).rejects.toMatchObject({ code: 'QueueFull' });
    await full.end();
    const highs = [await high.connect(), await high.connect()];
    expect(await onServer(highs[0]!)).toEqual({ 'poise-adm-high': 2, 'poise-adm-low': 2 });
    expect(band(1).queued).toBe(1);
    for (const c of highs) c.release(true);
    await until(() => openLeases(balancer) === 2, 'the two high-band leases back');
    expect(band(1).queued).toBe(1); // 2 open is not below band 1's limit
    held.pop()!.release(true);
    const admitted = await third;
    expect(await onServer(admitted)).toEqual({ 'poise-adm-low': 2 });
    expect(band(1)).toMatchObject({ admitted: 3, admittedAfterWait: 1 });
    expect(band(10)).toMatchObject({ admitted: 2, admittedAfterWait: 0 });
    // Two open, none freed: a band-1 connection with a short admission timeout is refused with QueueTimeout.
    const timed = pool(1, 'poise-adm-timed', { admissionTimeoutMs: 50 });
    await expect(timed.query('SELECT 1')).rejects.toMatchObject({ code: 'QueueTimeout' });
    await timed.end();
    expect(band(1).rejected).toMatchObject({ QueueFull: 1, QueueTimeout: 1, Cancelled: 0 });
    admitted.release();
    held[0]!.release();
    await Promise.all([low.end(), high.end()]);
    expect(await leasesBack(balancer)).toBe(0);
    expect(gate.admissionStats().waiting).toBe(0);
    gate.close();
    balancer.close();
  }, 60_000);
});
