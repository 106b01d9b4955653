/**
 * The fleet connection budget under load: P processes × T worker threads,
 * each thread a pg.Pool of L over routedStream, against a private
 * PostgreSQL with `max_connections = limit` (the budget: limit − reserve),
 * shares leased through a private Redis (FleetConnectionBudget). Halfway, 4
 * processes exit (2 by SIGKILL, 2 handing their shares back) and the
 * survivors rebalance.
 *
 *   node dist/bench/db-budget.js [--quick] [--processes 8] [--threads 2] [--lanes 13] [--limit 40] [--reserve 5]
 *                                [--ttl-ms 2000] [--duration-ms 20000]
 *
 * Figures: "too many clients" and other errors (the budget's promise is
 * zero), the acquire wait (pool.connect() until a client, Overloaded
 * retries included) p50 / p99, queries, and the server's client
 * connections and each process's share every 250 ms. `runBudget(opts)` is
 * the function `npm run bench:db` calls; this file's entry prints its table.
 * No results file: the lead writes the quiet figures.
 */
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { formatTable } from './lib/harness.js';
import { freePort, ownRedis, summary } from './lib/redis.js';

/** Options of {@link runBudget}. */
export interface BudgetRunOptions {
  processes?: number;
  threads?: number;
  lanes?: number;
  limit?: number;
  reserve?: number;
  ttlMs?: number;
  durationMs?: number;
}

/** One sample of the run. */
export interface BudgetSample {
  /** ms since the load started. */
  tMs: number;
  /** Client connections the server holds (pg_stat_activity, the sampler's own excluded). */
  server: number;
  /** Each live process's share (null: not yet granted). */
  shares: (number | null)[];
}

/** The figures of one run. */
export interface BudgetRunResult {
  options: Required<BudgetRunOptions>;
  queries: number;
  tooManyClients: number;
  otherErrors: number;
  overloadedRetries: number;
  acquireWaitMs: { p50: number; p99: number; max: number; mean: number };
  maxServerConnections: number;
  samples: BudgetSample[];
}

/** A private PostgreSQL (`pg_config --bindir`, run as the postgres user) with `max_connections`; returns its port and a stop. */
async function ownPostgres(maxConnections: number): Promise<{ port: number; stop: () => void }> {
  const bin = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout.trim();
  const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-bench-pg-'));
  chownSync(dir, uid, gid);
  const data = path.join(dir, 'data');
  const init = spawnSync(`${bin}/initdb`, ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'], { uid, gid, encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`initdb: ${init.stderr}`);
  const port = await freePort();
  const args = ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'];
  const child = spawn(`${bin}/postgres`, [...args, '-c', `max_connections=${maxConnections}`], { stdio: 'ignore', uid, gid });
  const stop = (): void => {
    child.kill('SIGQUIT');
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', stop);
  for (let k = 0; k < 300; k++) {
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.end();
      return { port, stop };
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  stop();
  throw new Error(`postgres on port ${port} did not start`);
}

function next(child: ChildProcess, kind: string): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>): void => {
      if (m.kind !== kind) return;
      child.off('message', on);
      resolve(m);
    };
    child.on('message', on);
  });
}

/** Runs the budget scenario once and returns its figures. */
export async function runBudget(opts: BudgetRunOptions = {}): Promise<BudgetRunResult> {
  const o: Required<BudgetRunOptions> = {
    processes: opts.processes ?? 8,
    threads: opts.threads ?? 2,
    lanes: opts.lanes ?? 13,
    limit: opts.limit ?? 40,
    reserve: opts.reserve ?? 5,
    ttlMs: opts.ttlMs ?? 2000,
    durationMs: opts.durationMs ?? 20_000,
  };
  const server = await ownPostgres(o.limit);
  const redis = await ownRedis();
  const sampler = new pg.Client({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres' });
  await sampler.connect();
  const script = fileURLToPath(new URL('./db-budget-process.js', import.meta.url));
  const procs = Array.from({ length: o.processes }, () => fork(script, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] }));
  const cluster = `bench${process.pid}`;
  try {
    for (const p of procs) {
      const ready = next(p, 'ready');
      p.send({
        kind: 'start',
        url: redis.url,
        cluster,
        pgPort: server.port,
        limit: o.limit,
        reserve: o.reserve,
        ttlMs: o.ttlMs,
        threads: o.threads,
        lanes: o.lanes,
      });
      await ready;
    }
    let live = procs;
    const samples: BudgetSample[] = [];
    const t0 = performance.now();
    const stopped: Record<string, unknown>[] = [];
    let exited = false;
    while (performance.now() - t0 < o.durationMs) {
      if (!exited && performance.now() - t0 >= o.durationMs / 2 && live.length >= 4) {
        exited = true;
        const [a, b, c, d] = live as [ChildProcess, ChildProcess, ChildProcess, ChildProcess];
        a.kill('SIGKILL');
        b.kill('SIGKILL');
        for (const [p, release] of [
          [c, true],
          [d, false],
        ] as const) {
          const done = next(p, 'stopped');
          p.send({ kind: 'stop', release });
          stopped.push(await done);
          p.kill();
        }
        live = live.slice(4);
      }
      const r = await sampler.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
      );
      const shares = await Promise.all(
        live.map(async (p) => {
          const s = next(p, 'status');
          p.send({ kind: 'status' });
          return (await s).share as number | null;
        }),
      );
      samples.push({ tMs: Math.round(performance.now() - t0), server: Number(r.rows[0]!.n), shares });
      await new Promise((res) => setTimeout(res, 250));
    }
    for (const p of live) {
      const done = next(p, 'stopped');
      p.send({ kind: 'stop', release: true });
      stopped.push(await done);
      p.kill();
    }
    const waits = stopped.flatMap((s) => s.waitsMs as number[]);
    const total = (k: string): number => stopped.reduce((sum, s) => sum + ((s.counts as Record<string, number>)[k] ?? 0), 0);
    return {
      options: o,
      queries: total('done'),
      tooManyClients: total('tooMany'),
      otherErrors: total('other'),
      overloadedRetries: total('overloaded'),
      acquireWaitMs: summary(waits),
      maxServerConnections: Math.max(...samples.map((s) => s.server)),
      samples,
    };
  } finally {
    for (const p of procs) p.kill('SIGKILL');
    await sampler.end().catch(() => {});
    redis.child.kill('SIGKILL');
    server.stop();
  }
}

/** Prints a budget run's figures and its server connections and shares over time (about 12 rows). */
export function printBudget(result: BudgetRunResult): void {
  const r3 = (x: number): number => Math.round(x * 1000) / 1000;
  console.log(
    formatTable([
      {
        queries: result.queries,
        'too many clients': result.tooManyClients,
        'other errors': result.otherErrors,
        'Overloaded retries': result.overloadedRetries,
        'acquire wait p50 ms': r3(result.acquireWaitMs.p50),
        'acquire wait p99 ms': r3(result.acquireWaitMs.p99),
        'max server connections': result.maxServerConnections,
      },
    ]),
  );
  const every = Math.max(1, Math.floor(result.samples.length / 12));
  console.log(
    formatTable(
      result.samples.filter((_, i) => i % every === 0).map((x) => ({ 't ms': x.tMs, server: x.server, shares: x.shares.join(' ') })),
    ),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const arg = (name: string): number | undefined => {
    const i = process.argv.indexOf(`--${name}`);
    return i < 0 ? undefined : Number(process.argv[i + 1]);
  };
  const quick = process.argv.includes('--quick');
  const result = await runBudget({
    processes: arg('processes'),
    threads: arg('threads'),
    lanes: arg('lanes'),
    limit: arg('limit'),
    reserve: arg('reserve'),
    ttlMs: arg('ttl-ms'),
    durationMs: arg('duration-ms') ?? (quick ? 6000 : 20_000),
  });
  printBudget(result);
  process.exit(0);
}
