/**
 * The aperture across a fleet: 5 processes × 2 worker threads with
 * `aperture: { width: 0.34 }` on the fleet connection budget (real Redis,
 * unique keys on 127.0.0.1:6379) over 12 real TCP backends that count the
 * connections each process's tag reaches them with. Each process reaches
 * exactly its slice of the ring (its rank from the lease, backends sorted by
 * id), at the overlap weights; every backend receives an equal share of the
 * fleet's load. A process SIGKILLed moves the others' coordinates after the
 * TTL; with Redis away (a server the test starts and kills), the last
 * coordinate stays in force.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../dist/src/log.js';
import { FleetConnectionBudget } from '../../dist/src/budget/redis-connection-budget.js';
import { apertureSlice } from '../../dist/src/policy/aperture.js';
import { Balancer } from '../../dist/src/runtime/balancer.js';
import type { LoadTable } from '../../src/load/load-table.js';
import { FleetProcess } from '../helpers/fleet-process.js';
import { startRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';

const PROCESSES = 5;
const N = 12;
const WIDTH = 0.34;
const THREADS = 2;
const LANES = 4;
const ROUNDS = 150;
/** Connections each process opens. */
const PER_PROCESS = THREADS * LANES * ROUNDS;
const IDS = Array.from({ length: N }, (_, i) => `b${String(i).padStart(2, '0')}`);
const NODE = new URL('../fixtures/aperture-node.mjs', import.meta.url);

/** 12 backends; counts[id][tag] = connections that arrived with that tag. */
const counts = new Map<string, Map<string, number>>();
const servers: net.Server[] = [];
const ports = new Map<string, number>();

beforeAll(async () => {
  for (const id of IDS) {
    const per = new Map<string, number>();
    counts.set(id, per);
    const server = net.createServer((s) => {
      let buf = '';
      s.setEncoding('utf8');
      s.on('data', (d: string) => {
        buf += d;
      });
      s.on('end', () => {
        const tag = buf.trim();
        per.set(tag, (per.get(tag) ?? 0) + 1);
        s.end();
      });
      s.on('error', () => {});
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    ports.set(id, (server.address() as net.AddressInfo).port);
  }
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

interface Coordinate {
  rank: number | null;
  processes: number | null;
  table: { width: number; rank: number; processes: number } | null;
  minShare: number;
}

describe('aperture across a fleet', () => {
  it('5 processes × 2 threads, width 0.34, 12 backends: each process reaches exactly its slice at the overlap weights; every backend gets an equal share', async () => {
    const cluster = `ap${randomBytes(5).toString('hex')}`;
    // Listed to each process in another order: the ring is by id.
    const backends = [...IDS].reverse().map((id) => ({ id, address: `127.0.0.1:${ports.get(id)}` }));
    const fleet = Array.from({ length: PROCESSES }, () => new FleetProcess(NODE));
    try {
      await Promise.all(fleet.map((p) => p.started));
      await Promise.all(
        fleet.map((p) =>
          p.ask({ cmd: 'setup', url: 'redis://127.0.0.1:6379', cluster, prefix: 'poise-test', backends, width: WIDTH, ttlMs: 30_000 }),
        ),
      );
      // A round in every process until each sees the whole fleet (the first ones to start saw fewer).
      let coords: Coordinate[] = [];
      await until(async () => {
        coords = [];
        for (const p of fleet) coords.push(await p.ask<Coordinate>({ cmd: 'sync' }));
        // And holds a share of every backend that covers its concurrency (the first to start held the whole
        // budget, which the others get as it hands it back), so no lease is refused and redrawn.
        return coords.every((c) => c.processes === PROCESSES && c.minShare >= THREADS * LANES);
      }, 'every process sees 5 live processes and holds shares for its 8 lanes');
      // The ranks are a permutation, and the table holds what the round saw (the coordinate every thread reads).
      expect(coords.map((c) => c.rank).sort()).toEqual([0, 1, 2, 3, 4]);
      for (const c of coords) expect(c.table).toEqual({ width: WIDTH, rank: c.rank, processes: PROCESSES });

      const runs = await Promise.all(
        fleet.map((p, i) =>
          p.ask<{ done: number; refused: number }>({ cmd: 'run', threads: THREADS, lanes: LANES, rounds: ROUNDS, tag: `p${i}` }),
        ),
      );
      expect(runs).toEqual(Array(PROCESSES).fill({ done: PER_PROCESS, refused: 0 }));

      for (let i = 0; i < PROCESSES; i++) {
        const slice = apertureSlice(coords[i]!.rank!, PROCESSES, N, WIDTH);
        const total = slice.reduce((s, m) => s + m.weight, 0);
        const expected = new Map(slice.map((m) => [IDS[m.index]!, (PER_PROCESS * m.weight) / total]));
        const reached = IDS.filter((id) => (counts.get(id)!.get(`p${i}`) ?? 0) > 0);
        // Exactly its slice: no backend outside it, every backend inside it.
        expect(reached, `p${i} (rank ${coords[i]!.rank})`).toEqual([...expected.keys()].sort());
        // At the overlap weights (x / 24 of 1,200: 50 for an overlap of 1, 250 for a whole backend). A
        // binomial count of 1,200 draws has sd ≤ 14.1; ±60 is over 4 sd, and tells an overlap of 1 (50)
        // from an even split of the slice (200).
        for (const [id, want] of expected) expect(Math.abs(counts.get(id)!.get(`p${i}`)! - want), `p${i} at ${id}`).toBeLessThan(60);
      }
      // Every backend: 5 × 1,200 / 12 = 500 connections from the fleet. The sum of up to three
      // processes' binomial counts has sd ≤ 22; ±100 (20 %) is over 4.5 sd.
      const totals = IDS.map((id) => [...counts.get(id)!.values()].reduce((s, c) => s + c, 0));
      expect(totals.reduce((s, c) => s + c, 0)).toBe(PROCESSES * PER_PROCESS);
      for (const [k, t] of totals.entries()) expect(Math.abs(t - 500), `${IDS[k]}: ${t}`).toBeLessThan(100);
    } finally {
      await Promise.all(fleet.map((p) => p.kill()));
    }
  }, 120_000);

  it('a process SIGKILLed: after its lease expires the others take new coordinates, and their tables follow', async () => {
    const cluster = `ap${randomBytes(5).toString('hex')}`;
    const backends = IDS.map((id) => ({ id, address: `127.0.0.1:${ports.get(id)}` }));
    const fleet = Array.from({ length: 3 }, () => new FleetProcess(NODE));
    try {
      await Promise.all(fleet.map((p) => p.started));
      await Promise.all(
        fleet.map((p) =>
          p.ask({ cmd: 'setup', url: 'redis://127.0.0.1:6379', cluster, prefix: 'poise-test', backends, width: WIDTH, ttlMs: 1500 }),
        ),
      );
      const syncAll = async (ps: FleetProcess[]) => {
        const out: Coordinate[] = [];
        for (const p of ps) out.push(await p.ask<Coordinate>({ cmd: 'sync' }));
        return out;
      };
      await until(async () => (await syncAll(fleet)).every((c) => c.processes === 3), 'every process sees 3');
      await fleet[0]!.kill();
      const left = fleet.slice(1);
      let coords: Coordinate[] = [];
      await until(
        async () => {
          coords = await syncAll(left);
          return coords.every((c) => c.processes === 2);
        },
        'the two left see 2 processes after the TTL',
        10_000,
        100,
      );
      expect(coords.map((c) => c.rank).sort()).toEqual([0, 1]);
      for (const c of coords) expect(c.table).toEqual({ width: WIDTH, rank: c.rank, processes: 2 });
    } finally {
      await Promise.all(fleet.map((p) => p.kill()));
    }
  }, 60_000);

  it('while Redis is away the last coordinate stays in force', async () => {
    const server = await startRedis();
    const balancer = new Balancer({ capacity: 16, logger: createLogger({ level: 'silent' }) });
    const budgets: FleetConnectionBudget[] = [];
    try {
      balancer.update({ version: 1, cluster: 'away', backends: IDS.map((id) => ({ id, address: `127.0.0.1:${ports.get(id)}` })) });
      // Two more balancers' budgets make this process one of three.
      const others = [0, 1].map(() => new Balancer({ capacity: 16, logger: createLogger({ level: 'silent' }) }));
      for (const o of others)
        o.update({ version: 1, cluster: 'away', backends: IDS.map((id) => ({ id, address: `127.0.0.1:${ports.get(id)}` })) });
      for (const b of [balancer, ...others])
        budgets.push(
          new FleetConnectionBudget({
            balancer: b,
            url: server.url,
            limitPerBackend: 100,
            ttlMs: 60_000,
            aperture: { width: WIDTH },
            logger: createLogger({ level: 'silent' }),
          }),
        );
      for (const b of budgets) await b.start();
      for (const b of budgets) await b.sync();
      const table = (balancer as unknown as { ownerTable: LoadTable }).ownerTable;
      const before = table.aperture.read();
      expect(before?.processes).toBe(3);
      await server.kill();
      expect(await budgets[0]!.sync()).toBeUndefined();
      expect(budgets[0]!.away).toBe(true);
      expect(table.aperture.read()).toEqual(before);
      for (const o of others) o.close();
    } finally {
      for (const b of budgets) await b.close();
      balancer.close();
      await server.stop();
    }
  }, 60_000);
});
