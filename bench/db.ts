/**
 * bench/db: a read/write mix through pg.Pool over a real PostgreSQL primary
 * and a streaming replica that replays every commit 2 s late, with and
 * without database roles.
 *
 *   npm run bench:db [-- --quick] [--seconds N] [--concurrency N] [--lag-ms N]
 *
 * - `no roles`: writes through a pool on the primary; reads through
 *   `routedStream(router)` over both servers (p2c:latency, lag unknown).
 * - `roles`: one router whose `postgres` check (`roles: true`, every 250 ms)
 *   reads role and lag; writes through `routedStream(router, { intent:
 *   'write' })`, reads through `{ intent: 'read' }` with `maxLagMs` 1000.
 *
 * Both read pools recycle connections every second (`maxLifetimeSeconds`),
 * so a read connection is placed again while the replica's lag moves.
 * Every key's value only grows (`GREATEST`); a read is stale when it returns
 * less than the value whose write had already resolved when the read
 * started. Per mode: reads/s, read p50/p99, the stale-read rate, and which
 * server answered the reads.
 *
 * Then the fleet connection budget (bench/db-budget.ts, `runBudget`): 8
 * processes × 2 threads of pg.Pool over `routedStream` against a PostgreSQL
 * with max_connections 40 (reserve 5) under a load that wants 208
 * connections, 4 processes exiting halfway: queries, "too many clients"
 * errors, acquire wait p50 / p99, and the server's connections and each
 * process's share over time. Prints the tables; writes
 * bench/results/db.json unless --quick.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { integerFlag, parseFlags } from '../src/cli/args.js';
import { routedStream } from '../src/outbound/routed-stream.js';
import { Balancer } from '../src/runtime/balancer.js';
import type { Router } from '../src/runtime/router.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { ownPrimary, ownReplica } from './lib/pg.js';
import { type BudgetRunResult, printBudget, runBudget } from './db-budget.js';

/** Keys of the table the mix reads and writes. */
const KEYS = 100;

/** Options of {@link runDbRoles}. */
export interface DbRolesOptions {
  /** The primary's and the replica's ports on 127.0.0.1 (trust auth, user postgres). */
  primaryPort: number;
  replicaPort: number;
  /** Seconds per mode. */
  seconds: number;
  /** Concurrent clients (each a loop of queries). */
  concurrency: number;
  /** Share of operations that write, in [0, 1]. */
  writeShare: number;
}

/** One mode's figures. */
export interface DbRolesResult {
  mode: 'no roles' | 'roles';
  reads: number;
  writes: number;
  readsPerSecond: number;
  readP50Ms: number;
  readP99Ms: number;
  staleReads: number;
  staleRate: number;
  readsOnPrimary: number;
  readsOnReplica: number;
}

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function setup(primaryPort: number, replicaPort: number): Promise<void> {
  const admin = new pg.Client({ host: '127.0.0.1', port: primaryPort, user: 'postgres', database: 'postgres' });
  await admin.connect();
  await admin.query('DROP TABLE IF EXISTS poise_bench_kv');
  await admin.query('CREATE TABLE poise_bench_kv (k integer PRIMARY KEY, v bigint NOT NULL)');
  await admin.query(`INSERT INTO poise_bench_kv SELECT k, 0 FROM generate_series(0, ${KEYS - 1}) AS k`);
  await admin.end();
  // The replica replays the schema after its apply delay: wait for it.
  const replica = new pg.Client({ host: '127.0.0.1', port: replicaPort, user: 'postgres', database: 'postgres' });
  await replica.connect();
  for (;;) {
    const ok = await replica
      .query<{ n: string }>('SELECT count(*) AS n FROM poise_bench_kv')
      .then((r) => r.rows[0]!.n === String(KEYS))
      .catch(() => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await replica.end();
}

/** Runs the mix for `seconds` over `write` and `read` pools; `label` names the progress lines. */
async function mix(o: DbRolesOptions, mode: DbRolesResult['mode'], write: pg.Pool, read: pg.Pool): Promise<DbRolesResult> {
  const committed = new Float64Array(KEYS);
  const latencies: number[] = [];
  let seq = 0;
  let writes = 0;
  let stale = 0;
  let onPrimary = 0;
  let onReplica = 0;
  const started = performance.now();
  const deadline = started + o.seconds * 1000;
  const ticker = setInterval(() => {
    const s = (performance.now() - started) / 1000;
    progress(`db ${mode}: ${s.toFixed(0)}/${o.seconds} s, ${latencies.length} reads, ${writes} writes, ${stale} stale`);
  }, 1000);
  const client = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const k = Math.floor(Math.random() * KEYS);
      if (Math.random() < o.writeShare) {
        const x = ++seq;
        await write.query('UPDATE poise_bench_kv SET v = GREATEST(v, $2) WHERE k = $1', [k, x]);
        if (x > committed[k]!) committed[k] = x;
        writes++;
      } else {
        const expected = committed[k]!;
        const t0 = performance.now();
        const { rows } = await read.query<{ v: string; port: number }>(
          'SELECT v, inet_server_port() AS port FROM poise_bench_kv WHERE k = $1',
          [k],
        );
        latencies.push(performance.now() - t0);
        if (Number(rows[0]!.v) < expected) stale++;
        if (rows[0]!.port === o.primaryPort) onPrimary++;
        else onReplica++;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: o.concurrency }, client));
  } finally {
    clearInterval(ticker);
    progressDone();
  }
  const elapsed = (performance.now() - started) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return {
    mode,
    reads: latencies.length,
    writes,
    readsPerSecond: latencies.length / elapsed,
    readP50Ms: quantile(sorted, 0.5),
    readP99Ms: quantile(sorted, 0.99),
    staleReads: stale,
    staleRate: latencies.length === 0 ? 0 : stale / latencies.length,
    readsOnPrimary: onPrimary,
    readsOnReplica: onReplica,
  };
}

function readPool(router: Router, intent: 'read' | undefined, max: number): pg.Pool {
  return new pg.Pool({
    stream: routedStream(router, intent === undefined ? {} : { intent }),
    user: 'postgres',
    database: 'postgres',
    max,
    maxLifetimeSeconds: 1,
  });
}

/**
 * The read/write mix without and with roles over a primary and a lagging
 * replica that are already running. Resolves with one result per mode.
 */
export async function runDbRoles(o: DbRolesOptions): Promise<DbRolesResult[]> {
  await setup(o.primaryPort, o.replicaPort);
  const backends = [
    { id: 'primary', address: `127.0.0.1:${o.primaryPort}` },
    { id: 'replica', address: `127.0.0.1:${o.replicaPort}` },
  ];
  const results: DbRolesResult[] = [];
  {
    const balancer = new Balancer();
    balancer.update(backends);
    const router = balancer.router();
    const write = new pg.Pool({ host: '127.0.0.1', port: o.primaryPort, user: 'postgres', database: 'postgres', max: o.concurrency });
    const read = readPool(router, undefined, o.concurrency);
    try {
      results.push(await mix(o, 'no roles', write, read));
    } finally {
      await Promise.all([write.end(), read.end()]);
      balancer.close();
    }
  }
  {
    const balancer = new Balancer({
      health: { check: { kind: 'postgres', roles: true, intervalMs: 250, jitterPercent: 0, rise: 1, fall: 2, timeoutMs: 1000 } },
    });
    balancer.update(backends);
    const router = balancer.router({ maxLagMs: 1000 });
    // The first checks: both roles known before the clock starts.
    while (balancer.table.stats(0).dbRole === 0 || balancer.table.stats(1).dbRole === 0) await new Promise((r) => setTimeout(r, 50));
    const write = new pg.Pool({
      stream: routedStream(router, { intent: 'write' }),
      user: 'postgres',
      database: 'postgres',
      max: o.concurrency,
    });
    const read = readPool(router, 'read', o.concurrency);
    try {
      results.push(await mix(o, 'roles', write, read));
    } finally {
      await Promise.all([write.end(), read.end()]);
      balancer.close();
    }
  }
  return results;
}

async function main(): Promise<void> {
  const { values } = parseFlags(process.argv.slice(2), {
    quick: { type: 'boolean' },
    seconds: { type: 'string' },
    concurrency: { type: 'string' },
    'lag-ms': { type: 'string' },
  });
  const quick = values.quick === true;
  const seconds = integerFlag('--seconds', values.seconds, 1, 3600) ?? (quick ? 3 : 20);
  const concurrency = integerFlag('--concurrency', values.concurrency, 1, 64) ?? 8;
  const lagMs = integerFlag('--lag-ms', values['lag-ms'], 0, 600_000) ?? 2000;
  progress('db: starting a primary and a replica (pg_basebackup)');
  const primary = await ownPrimary();
  const replica = await ownReplica(primary, lagMs);
  progressDone();
  try {
    const results = await runDbRoles({ primaryPort: primary.port, replicaPort: replica.port, seconds, concurrency, writeShare: 0.2 });
    console.log(
      formatTable(
        results.map((r) => ({
          mode: r.mode,
          'reads/s': Math.round(r.readsPerSecond),
          'read p50 ms': Number(r.readP50Ms.toFixed(2)),
          'read p99 ms': Number(r.readP99Ms.toFixed(2)),
          'stale %': Number((100 * r.staleRate).toFixed(2)),
          'stale reads': r.staleReads,
          'on primary': r.readsOnPrimary,
          'on replica': r.readsOnReplica,
          writes: r.writes,
        })),
      ),
    );
    await Promise.all([replica.stop(), primary.stop()]);
    progress('db: the fleet connection budget (8 processes × 2 threads, max_connections 40, reserve 5)');
    const budget: BudgetRunResult = await runBudget({ durationMs: quick ? 6000 : 20_000 });
    progressDone();
    printBudget(budget);
    if (!quick) {
      const file = writeResults('db', { seconds, concurrency, replicaApplyDelayMs: lagMs, writeShare: 0.2, roles: results, budget });
      console.log(`wrote ${path.relative(process.cwd(), file)}`);
    }
  } finally {
    await Promise.all([replica.stop(), primary.stop()]);
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
