/**
 * One worker thread of a bench/db-budget.ts process: a pg.Pool of `lanes`
 * over routedStream (connection leases under the process's budget share),
 * each lane checking out a client, running one short query, returning it.
 * The acquire wait is the time from asking the pool for a client to having
 * one, retries after `Overloaded` (the share is full) included.
 */
import { parentPort, workerData } from 'node:worker_threads';
import pg from 'pg';
import { routedStream } from '../src/net.js';
import { Router, createLogger } from '../src/runtime.js';

/** What a worker reports when stopped. */
export interface WorkerCounts {
  done: number;
  overloaded: number;
  tooMany: number;
  other: number;
  waitsMs: number[];
}

if (parentPort !== null) {
  const port = parentPort;
  const router = Router.attach(workerData.attachment, { policy: 'p2c:connections', logger: createLogger({ level: 'silent' }) });
  const pool = new pg.Pool({
    stream: routedStream(router),
    user: 'postgres',
    database: 'postgres',
    max: workerData.lanes as number,
    idleTimeoutMillis: 200,
    // Recycled every second, so a share that shrinks takes effect under a load that never idles.
    maxLifetimeSeconds: 1,
  });
  pool.on('error', () => {});
  const counts: WorkerCounts = { done: 0, overloaded: 0, tooMany: 0, other: 0, waitsMs: [] };
  let running = true;
  const lane = async (): Promise<void> => {
    while (running) {
      const t0 = performance.now();
      let client: pg.PoolClient | undefined;
      while (running && client === undefined) {
        try {
          client = await pool.connect();
        } catch (err) {
          const e = err as { code?: string; message?: string };
          if (e.code === 'Overloaded') counts.overloaded++;
          else if (/too many clients|remaining connection slots/.test(String(e.message))) counts.tooMany++;
          else counts.other++;
          await new Promise((r) => setTimeout(r, 5));
        }
      }
      if (client === undefined) break;
      counts.waitsMs.push(performance.now() - t0);
      try {
        await client.query('SELECT pg_sleep(0.005)');
        counts.done++;
        client.release();
      } catch (err) {
        if (/too many clients/.test(String((err as Error).message))) counts.tooMany++;
        else counts.other++;
        client.release(true);
      }
    }
  };
  const lanes = Array.from({ length: workerData.lanes as number }, lane);
  port.postMessage({ ready: true });
  port.on('message', (msg: string) => {
    if (msg !== 'stop') return;
    running = false;
    void Promise.all(lanes)
      .then(() => pool.end())
      .then(() => port.postMessage(counts));
  });
}
