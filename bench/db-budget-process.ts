/**
 * One process of bench/db-budget.ts (dist/bench/db-budget-process.js),
 * forked with IPC: a Balancer over one PostgreSQL, a FleetConnectionBudget
 * on Redis, and `threads` worker threads (dist/bench/db-budget-worker.js),
 * each a pg.Pool of `lanes` over routedStream running queries until told to
 * stop.
 *
 * Messages: parent → { kind: 'start', ... } | { kind: 'status' } | { kind: 'stop', release };
 * child → { kind: 'ready' } | { kind: 'status', share, connections } | { kind: 'stopped', counts, waitsMs }.
 */
import { Worker } from 'node:worker_threads';
import { FleetConnectionBudget } from '../src/redis.js';
import { Balancer, createLogger } from '../src/runtime.js';
import type { WorkerCounts } from './db-budget-worker.js';

const WORKER = new URL('./db-budget-worker.js', import.meta.url);
const logger = createLogger({ level: 'silent' });
let balancer: Balancer;
let budget: FleetConnectionBudget;
let workers: Worker[] = [];

function ask<T>(w: Worker, msg: string): Promise<T> {
  return new Promise((resolve) => {
    w.once('message', resolve);
    w.postMessage(msg);
  });
}

process.on('message', (msg: { kind: string; [k: string]: unknown }) => {
  void (async () => {
    if (msg.kind === 'start') {
      balancer = new Balancer({ capacity: 4, logger });
      balancer.update({
        version: 1,
        cluster: msg.cluster as string,
        backends: [{ id: 'pg', address: `127.0.0.1:${msg.pgPort as number}` }],
      });
      budget = new FleetConnectionBudget({
        balancer,
        url: msg.url as string,
        limitPerBackend: msg.limit as number,
        reserve: msg.reserve as number,
        ttlMs: msg.ttlMs as number,
        logger,
      });
      await budget.start();
      const data = { attachment: balancer.attachment(), lanes: msg.lanes };
      workers = Array.from({ length: msg.threads as number }, () => new Worker(WORKER, { workerData: data }));
      await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))));
      process.send!({ kind: 'ready' });
    } else if (msg.kind === 'status') {
      process.send!({
        kind: 'status',
        share: balancer.ownerTable.budget.share(0) ?? null,
        connections: balancer.ownerTable.connections(0),
      });
    } else if (msg.kind === 'stop') {
      const per = await Promise.all(workers.map((w) => ask<WorkerCounts>(w, 'stop')));
      await Promise.all(workers.map((w) => w.terminate()));
      await budget.close({ release: msg.release === true });
      balancer.close();
      const counts = { done: 0, overloaded: 0, tooMany: 0, other: 0 };
      for (const c of per) for (const k of Object.keys(counts) as (keyof typeof counts)[]) counts[k] += c[k];
      process.send!({ kind: 'stopped', counts, waitsMs: per.flatMap((c) => c.waitsMs) });
    }
  })();
});
