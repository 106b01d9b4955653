/**
 * Database roles against real PostgreSQL: a primary and two streaming
 * replicas this file starts (test/helpers/db-servers.ts) — `slow` replays
 * every commit 3 s late (`recovery_min_apply_delay`), `fast` at once. The
 * Balancer's `postgres` check with `roles: true` finds who is what; reads
 * and writes follow `acquire({ intent })`. Which server answered is the
 * lease's backend; a query on it runs through a plain pool to that address.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DbRole } from '../../src/load/db-state.js';
import { currentLsn } from '../../src/db/lsn.js';
import { routedStream } from '../../src/outbound/routed-stream.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { Registry } from 'prom-client';
import { collectMetrics } from '../../src/metrics/collect.js';
import { startPgReplica, startPostgres, type TestPgServer } from '../helpers/db-servers.js';
import { until } from '../helpers/until.js';

const INTERVAL_MS = 100;
const DELAY_MS = 3000;
let primary: TestPgServer;
let slow: TestPgServer;
let fast: TestPgServer;
let balancer: Balancer;
let router: Router;
const pools = new Map<string, pg.Pool>();

function poolFor(id: string): pg.Pool {
  let p = pools.get(id);
  if (p === undefined) {
    const port = id === 'primary' ? primary.port : id === 'slow' ? slow.port : fast.port;
    p = new pg.Pool({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres', max: 2 });
    p.on('error', () => {});
    pools.set(id, p);
  }
  return p;
}

function slotOf(id: string): number {
  return balancer.slotEntries().find((e) => e.id === id)!.slot;
}

beforeAll(async () => {
  primary = await startPostgres({ settings: { wal_level: 'replica', max_wal_senders: 5 } });
  slow = await startPgReplica(primary, { applyDelayMs: DELAY_MS });
  fast = await startPgReplica(primary);
  await poolFor('primary').query('CREATE TABLE t (v integer PRIMARY KEY)');
  balancer = new Balancer({
    capacity: 8,
    health: {
      check: { kind: 'postgres', roles: true, intervalMs: INTERVAL_MS, jitterPercent: 0, rise: 1, fall: 1, timeoutMs: 1000 },
    },
  });
  balancer.update([
    { id: 'primary', address: `127.0.0.1:${primary.port}` },
    { id: 'slow', address: `127.0.0.1:${slow.port}` },
    { id: 'fast', address: `127.0.0.1:${fast.port}` },
  ]);
  router = balancer.router({ policy: 'p2c:latency' });
  const db = balancer.ownerTable.db;
  await until(
    () =>
      db.role(slotOf('primary')) === DbRole.Primary &&
      db.role(slotOf('slow')) === DbRole.Replica &&
      db.role(slotOf('fast')) === DbRole.Replica,
    'the roles check to find one primary and two replicas',
    30_000,
  );
  // The slow replica has not replayed the CREATE TABLE yet (3 s): it reads as far behind until it has.
  await until(() => db.lagMs(slotOf('slow')) === 0, 'the slow replica to replay the schema', 30_000);
}, 120_000);

afterAll(async () => {
  balancer?.close();
  await Promise.all([...pools.values()].map((p) => p.end().catch(() => {})));
  await Promise.all([primary?.stop(), slow?.stop(), fast?.stop()]);
});

/** Backend ids of `n` reads with `opts` (each lease released at once). */
function readIds(n: number, opts: object = {}): Set<string> {
  const ids = new Set<string>();
  for (let i = 0; i < n; i++) {
    const l = router.acquire({ intent: 'read', ...opts });
    ids.add(l.id);
    l.release('success', { latencyMs: 1 });
  }
  return ids;
}

describe('PostgreSQL roles and lag (a primary, a replica 3 s behind, a replica in step)', () => {
  it('writes go to the primary; reads to the replicas; no intent to all three', async () => {
    for (let i = 0; i < 50; i++) {
      const l = router.acquire({ intent: 'write' });
      expect(l.id).toBe('primary');
      l.release('success', { latencyMs: 1 });
    }
    expect(readIds(400)).toEqual(new Set(['slow', 'fast']));
    const { rows } = await poolFor('slow').query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
    expect(rows[0]!.r).toBe(true);
  });

  it('reads avoid the lagging replica while the primary commits, and return to it when it has caught up', async () => {
    const db = balancer.ownerTable.db;
    let writing = true;
    let v = 1_000_000;
    const writer = (async () => {
      while (writing) await poolFor('primary').query('INSERT INTO t VALUES ($1)', [v++]);
    })();
    try {
      // The slow replica's replay lag crosses 1 s (its last replayed commit is older than that), the fast one's stays under.
      // The fast one's lag is waited for too: on a loaded 2-core machine (CI runs two integration files at once) a
      // starved replica can fall a second behind for a moment, and then no replica is within 1 s (one CI run saw it).
      await until(
        () => db.lagMs(slotOf('slow')) > 1000 && db.lagMs(slotOf('fast')) <= 1000,
        'the slow replica to read over 1 s of lag and the fast one under it',
        15_000,
      );
      expect(readIds(500, { maxLagMs: 1000 })).toEqual(new Set(['fast']));
      // Nobody within 1 ms with the fast one excluded: the primary (readFallback default).
      const only = new Set<string>();
      for (let i = 0; i < 100; i++) {
        const l = router.acquire({ intent: 'read', maxLagMs: 1000, exclude: ['fast'] });
        only.add(l.id);
        l.release('success');
      }
      expect(only).toEqual(new Set(['primary']));
    } finally {
      writing = false;
      await writer;
    }
    // Writes stopped: 3 s later the slow replica has replayed all it received, lag 0.
    await until(() => db.lagMs(slotOf('slow')) === 0, 'the slow replica to catch up', 20_000);
    expect(readIds(500, { maxLagMs: 1000 })).toEqual(new Set(['slow', 'fast']));
  }, 60_000);

  it('minLsn: 1,000 write-then-read rounds never see a stale row (reads of older writes do use the replica); without it the same loop does', async () => {
    const writer = await poolFor('primary').connect();
    const BACK = 30;
    /** Reads row `v` through a read lease with `opts`; returns whether it was missing (stale) and who answered. */
    const readBack = async (v: number, opts: object, byId: Map<string, number>): Promise<boolean> => {
      const lease = router.acquire({ intent: 'read', ...opts });
      byId.set(lease.id, (byId.get(lease.id) ?? 0) + 1);
      const { rows } = await poolFor(lease.id).query<{ n: string }>('SELECT count(*) AS n FROM t WHERE v = $1', [v]);
      lease.release('success', { latencyMs: 1 });
      return rows[0]!.n === '0';
    };
    try {
      // Each round writes a row and reads it back with its LSN, and reads the row of BACK rounds ago with that round's LSN
      // (by then the fast replica has usually replayed it and its checked LSN shows it).
      const lsns: string[] = [];
      const latest = new Map<string, number>();
      const older = new Map<string, number>();
      let stale = 0;
      for (let i = 0; i < 1000; i++) {
        const v = 2_000_000 + i;
        await writer.query('INSERT INTO t VALUES ($1)', [v]);
        lsns.push(await currentLsn(writer));
        if (await readBack(v, { minLsn: lsns[i] }, latest)) stale++;
        if (i >= BACK && (await readBack(v - BACK, { minLsn: lsns[i - BACK] }, older))) stale++;
      }
      expect(stale).toBe(0);
      expect(older.get('fast') ?? 0).toBeGreaterThan(0);
      // The same loop without minLsn (any replica within 60 s of lag): the slow replica answers about half the reads, 3 s before it has the row.
      let unsafe = 0;
      const byId = new Map<string, number>();
      for (let i = 0; i < 1000; i++) {
        const v = 3_000_000 + i;
        await writer.query('INSERT INTO t VALUES ($1)', [v]);
        if (await readBack(v, { maxLagMs: 60_000 }, byId)) unsafe++;
      }
      expect(unsafe).toBeGreaterThan(100);
      expect(byId.get('primary')).toBeUndefined();
    } finally {
      writer.release();
    }
  }, 120_000);

  it('a pg.Pool for reads and one for writes over one router (routedStream intent)', async () => {
    const writes = new pg.Pool({ stream: routedStream(router, { intent: 'write' }), user: 'postgres', database: 'postgres', max: 2 });
    const reads = new pg.Pool({ stream: routedStream(router, { intent: 'read' }), user: 'postgres', database: 'postgres', max: 4 });
    try {
      for (let i = 0; i < 10; i++) {
        const w = await writes.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
        expect(w.rows[0]!.r).toBe(false);
      }
      const clients = await Promise.all([0, 1, 2, 3].map(() => reads.connect()));
      for (const c of clients) {
        const { rows } = await c.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r');
        expect(rows[0]!.r).toBe(true);
      }
      for (const c of clients) c.release();
    } finally {
      await Promise.all([writes.end(), reads.end()]);
    }
  }, 30_000);

  it('an idle primary and a restarted, caught-up replica: lag 0 for routing and for the gauge', async () => {
    const db = balancer.ownerTable.db;
    const registry = new Registry();
    collectMetrics(balancer, { registry });
    const gauge = async (): Promise<number> => {
      const m = await registry.getSingleMetric('poise_backend_replication_lag_seconds')!.get();
      return m.values.find((v) => v.labels['backend'] === 'fast')!.value;
    };
    // Nothing writes from here on. The restarted replica's walreceiver reports the start of the segment it resumes
    // streaming from, behind its replay LSN; with nothing new to receive it stays there (a rule of receive = replay
    // read the age of the last commit, growing, for as long as the primary stays idle).
    await pools.get('fast')?.end();
    pools.delete('fast');
    fast = await fast.restart();
    const { rows } = await poolFor('fast').query<{ behind: boolean }>(
      'SELECT pg_last_wal_receive_lsn() < pg_last_wal_replay_lsn() AS behind',
    );
    expect(rows[0]!.behind).toBe(true);
    // Three checks after the restart read it as a replica (each check resets the role of a failed one).
    const checksAt = balancer.healthStats().counters.checks;
    await until(
      () => db.role(slotOf('fast')) === DbRole.Replica && balancer.healthStats().counters.checks >= checksAt + 9,
      'three rounds of checks after the restart',
      20_000,
    );
    expect(db.lagMs(slotOf('fast'))).toBe(0);
    expect(await gauge()).toBe(0);
    expect(readIds(200, { maxLagMs: 0, exclude: ['slow'] })).toEqual(new Set(['fast']));
  }, 60_000);

  it('failover: with the primary dead and the fast replica promoted, writes move to it within a few check intervals', async () => {
    await primary.kill();
    const before = router.acquire({ intent: 'read', exclude: ['slow'] });
    before.release('success');
    await poolFor('fast').query('SELECT pg_promote()');
    await until(
      () => {
        try {
          const l = router.acquire({ intent: 'write' });
          l.release('success');
          return l.id === 'fast';
        } catch {
          return false;
        }
      },
      'writes to go to the promoted replica',
      // A promotion takes PostgreSQL a moment; then one check (100 ms) sees it.
      10_000,
    );
    // The dead primary's failed check made its role unknown: writes go only to the new primary.
    for (let i = 0; i < 100; i++) {
      const l = router.acquire({ intent: 'write' });
      expect(l.id).toBe('fast');
      l.release('success');
    }
    expect(balancer.ownerTable.db.role(slotOf('primary'))).toBe(DbRole.Unknown);
  }, 30_000);
});
