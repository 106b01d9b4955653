/**
 * One connection budget for the fleet, against a real PostgreSQL with
 * `max_connections = 40` (reserve 5): 8 processes × 2 worker threads, each
 * thread a pg.Pool of 13 over routedStream (208 connections wanted), shares
 * leased through a Redis this test starts. Zero "too many clients"; every
 * process served; when 4 processes exit (2 by SIGKILL) the survivors' shares
 * grow after the TTL; while Redis is killed and restarted no process goes
 * past the share it held.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestDbServer } from '../helpers/db-servers.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';
import { FleetProcess } from '../helpers/fleet-process.js';

const NODE = new URL('../fixtures/budget-node.mjs', import.meta.url);
const PROCESSES = 8;
const LIMIT = 40;
const RESERVE = 5;
const TTL_MS = 2000;

interface Status {
  share: number | null;
  connections: number;
  away: boolean;
  done: number;
  overloaded: number;
  tooMany: number;
  other: number;
  lastOther: string;
}

let server: TestDbServer;
let redis: TestRedis;
let monitor: pg.Client;
beforeAll(async () => {
  server = await startPostgres({ settings: { max_connections: LIMIT } });
  redis = await startRedis();
  monitor = new pg.Client({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres' });
  await monitor.connect();
}, 60_000);
afterAll(async () => {
  await monitor?.end().catch(() => {});
  await redis?.stop();
  await server?.stop();
});

/** Client backends connected now, the monitor's own excluded. */
async function serverConnections(): Promise<number> {
  const r = await monitor.query<{ n: string }>(
    "SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
  );
  return Number(r.rows[0]!.n);
}

describe('fleet connection budget on PostgreSQL', () => {
  it('8 processes × 2 threads wanting 208 connections of 35: no "too many clients", all served, shares rebalance and hold through a Redis restart', async () => {
    const cluster = `budget${randomBytes(4).toString('hex')}`;
    const fleet = Array.from({ length: PROCESSES }, () => new FleetProcess(NODE));
    let maxServer = 0;
    const sample = async (): Promise<Status[]> => {
      maxServer = Math.max(maxServer, await serverConnections());
      return Promise.all(live.map((p) => p.ask<Status>({ cmd: 'status' })));
    };
    let live = fleet;
    try {
      await Promise.all(fleet.map((p) => p.started));
      for (const p of fleet)
        await p.ask({ cmd: 'setup', url: redis.url, cluster, pgPort: server.port, limit: LIMIT, reserve: RESERVE, ttlMs: TTL_MS });
      await Promise.all(fleet.map((p) => p.ask({ cmd: 'go', threads: 2, lanes: 13 })));

      // Phase 1: every process is served, and the shares settle at about 35 / 8.
      await until(async () => (await sample()).every((s) => s.done >= 20), 'every process to complete 20 queries', 30_000, 200);
      // Once the first comers' connections are recycled (the pools' 1 s lifetime) every process holds ≥ 1.
      await until(async () => (await sample()).every((s) => (s.share ?? 0) >= 1), 'every process to hold a share', 15_000, 200);
      let st = await sample();
      expect(st.reduce((s, x) => s + (x.share ?? 0), 0)).toBeLessThanOrEqual(LIMIT - RESERVE);
      for (const s of st) expect(s.share).toBeGreaterThanOrEqual(1);

      // Phase 2: 4 processes exit, 2 of them by SIGKILL (their leases expire after the TTL).
      const before = st.slice(4).map((s) => s.share ?? 0);
      await fleet[0]!.kill();
      await fleet[1]!.kill();
      await fleet[2]!.ask({ cmd: 'stop', release: true });
      await fleet[3]!.ask({ cmd: 'stop', release: false });
      live = fleet.slice(4);
      await until(
        async () => {
          const now = await sample();
          return now.reduce((s, x) => s + (x.share ?? 0), 0) > before.reduce((a, b) => a + b, 0) + 8;
        },
        "the survivors' shares to grow into the exited processes' shares",
        TTL_MS * 6,
        200,
      );
      st = await sample();
      expect(st.reduce((s, x) => s + (x.share ?? 0), 0)).toBeLessThanOrEqual(LIMIT - RESERVE);

      // Phase 3: Redis killed and restarted; no process goes past the share it held when Redis went away.
      // (The shares are read once every process has seen Redis away: a round that completed between the
      // last sample and the kill may still have grown a share, legitimately — Redis was up.)
      await redis.kill();
      await until(async () => (await sample()).every((s) => s.away), 'every process to notice Redis away', 10_000, 100);
      const held = (await sample()).map((s) => s.share ?? 0);
      for (let k = 0; k < 5; k++) {
        for (const [i, s] of (await sample()).entries()) expect(s.share).toBeLessThanOrEqual(held[i]!);
      }
      await redis.restart();
      // Each process holds for one TTL from its first round on the new server: from the first one seen back,
      // (with a margin for the sampling's lag) nobody grows, however long the others take to come back.
      let firstBack: number | undefined;
      const holding = async (): Promise<boolean> => {
        const now = await sample();
        for (const [i, s] of now.entries()) expect(s.share).toBeLessThanOrEqual(held[i]!);
        if (firstBack === undefined && now.some((s) => !s.away)) firstBack = performance.now();
        return now.every((s) => !s.away);
      };
      await until(holding, 'every process back on Redis', 10_000, 100);
      while (performance.now() - firstBack! < TTL_MS * 0.6) await holding();

      st = await sample();
      const served = st.map((s) => s.done);
      await until(async () => (await sample()).every((s, i) => s.done > served[i]!), 'every survivor still served', 10_000, 100);
      const final = await Promise.all(live.map((p) => p.ask<{ done: number; tooMany: number }>({ cmd: 'stop', release: true })));
      const all = [...st];
      // Zero "too many clients" in every process, and the server never held more than the limit.
      expect(all.map((s) => s.tooMany)).toEqual([0, 0, 0, 0]);
      expect(final.map((f) => f.tooMany)).toEqual([0, 0, 0, 0]);
      expect(all.map((s) => s.other)).toEqual([0, 0, 0, 0]);
      expect(maxServer).toBeLessThanOrEqual(LIMIT - 1);
      console.log(
        `budget fleet: max server connections ${maxServer}, final shares ${JSON.stringify(held)}, queries ${JSON.stringify(final.map((f) => f.done))}`,
      );
    } finally {
      await Promise.all(fleet.map((p) => p.kill()));
    }
  }, 120_000);
});
