/**
 * The first write after start, against a real primary and replica
 * (test/helpers/db-servers.ts) with roles from the `postgres` check: no
 * sleep anywhere. In this thread `await balancer.ready()` then a write and a
 * read; in a worker thread (test/fixtures/ready-worker.mjs, the build)
 * `acquireAsync({ intent })` right after update(), which waits for the
 * first role verdicts through the LoadTable. The laws on an injected clock:
 * test/runtime/ready.test.ts.
 */
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Balancer, createLogger } from '../../dist/src/runtime.js';
import { routedStream } from '../../dist/src/net.js';
import { startPgReplica, startPostgres, type TestPgServer } from '../helpers/db-servers.js';

let primary: TestPgServer;
let replica: TestPgServer;
const logger = createLogger({ level: 'silent' });
const WORKER = new URL('../fixtures/ready-worker.mjs', import.meta.url);

beforeAll(async () => {
  primary = await startPostgres({ settings: { wal_level: 'replica', max_wal_senders: 5 } });
  replica = await startPgReplica(primary);
}, 120_000);

afterAll(async () => {
  await Promise.all([replica?.stop(), primary?.stop()]);
});

/** A Balancer with the guide's roles check (2 s interval, the default jitter). */
function checked(): Balancer {
  return new Balancer({ logger, health: { check: { kind: 'postgres', roles: true, intervalMs: 2000 } } });
}

/** Applies the two servers as the membership. */
function start(b: Balancer): void {
  b.update([
    { id: 'primary', address: `127.0.0.1:${primary.port}` },
    { id: 'replica', address: `127.0.0.1:${replica.port}` },
  ]);
}

describe('the first query after start (a real primary and replica, roles from the check)', () => {
  it('after await balancer.ready(): the first write runs on the primary, the first read on the replica', async () => {
    const b = checked();
    start(b);
    const router = b.router();
    try {
      // Before ready: what the issue saw.
      expect(() => router.acquire({ intent: 'write' }).release('success')).toThrow('no backend is a known primary');
      await b.ready({ timeoutMs: 10_000 });
      const writes = new pg.Pool({ stream: routedStream(router, { intent: 'write' }), user: 'postgres', database: 'postgres', max: 1 });
      const reads = new pg.Pool({ stream: routedStream(router, { intent: 'read' }), user: 'postgres', database: 'postgres', max: 1 });
      try {
        const w = await writes.query<{ port: number; r: boolean }>('SELECT inet_server_port() AS port, pg_is_in_recovery() AS r');
        expect(w.rows[0]).toEqual({ port: primary.port, r: false });
        const r = await reads.query<{ port: number; r: boolean }>('SELECT inet_server_port() AS port, pg_is_in_recovery() AS r');
        expect(r.rows[0]).toEqual({ port: replica.port, r: true });
      } finally {
        await Promise.all([writes.end(), reads.end()]);
      }
    } finally {
      b.close();
    }
  }, 30_000);

  it('in a worker thread, acquireAsync({ intent }) right after update() waits for the first role verdicts', async () => {
    // Ten fresh starts: each worker is attached first, and asks as soon as the owner has applied the membership.
    let refusedAtFirst = 0;
    for (let round = 0; round < 10; round++) {
      const b = checked();
      try {
        const worker = new Worker(WORKER, { workerData: { attachment: b.attachment(), timeoutMs: 10_000 } });
        b.watchWorker(worker);
        const next = (): Promise<unknown> =>
          new Promise((resolve, reject) => {
            worker.once('message', resolve);
            worker.once('error', reject);
            worker.once('exit', (code) => reject(new Error(`the worker exited (${code}) before it answered`)));
          });
        expect(await next()).toBe('attached');
        const answer = next();
        start(b);
        worker.postMessage('go');
        const reply = (await answer) as { immediate: string; write: { id?: string }; read: { id?: string } };
        await worker.terminate();
        if (reply.immediate === 'NoEligibleCandidates') refusedAtFirst++;
        expect(reply.write, `round ${round}`).toEqual({ id: 'primary' });
        // A read waits only while it would be refused: once the primary is known it may fall back to it (readFallback)
        // if the replica's first check is still out; never an error.
        expect(['primary', 'replica'], `round ${round}`).toContain(reply.read.id);
      } finally {
        b.close();
      }
    }
    // The wait was exercised: a plain acquire at that moment was refused (the first checks come 1–200 ms later).
    expect(refusedAtFirst).toBeGreaterThan(0);
  }, 120_000);
});
