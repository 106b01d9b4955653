/**
 * The fleet retry budget (FleetRetryBudget, Redis): 8 processes × 2 worker
 * threads calling connect() at a low rate while every backend refuses, with
 * no budget, a local budget per process, and the fleet budget; and the
 * floor share following the fleet's processes and Redis going away.
 * Sized for a 2-core machine: a 2 s window; the fleet mode runs the issue's
 * 30 s of failure, then the backends return and every thread's requests
 * succeed once the ejections in force at their return have ended. The
 * other two modes run 4 s each: their figures are fixed by the rules (no
 * budget: exactly 3 attempts per request; a local budget: a whole floor per
 * process and window), so a longer run changes nothing but the runtime.
 */
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../dist/src/log.js';
import { FleetRetryBudget } from '../../dist/src/budget/redis-retry-budget.js';
import { Balancer } from '../../dist/src/runtime/balancer.js';
import { freePort } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';
import { FleetProcess } from '../helpers/fleet-process.js';

const NODE = new URL('../fixtures/retry-fleet-node.mjs', import.meta.url);

/** A backend back on `port`: accepts every dial (and closes it). */
function listenOn(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer((sock) => sock.on('error', () => {}).end());
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}
const logger = createLogger({ level: 'silent' });

// 20 % of requests, a floor of 2 retries/s (4 per 2 s window). Each process
// makes 2 threads × 1 request per 400 ms = 10 requests per window: its own
// 20 % is 2 retries per window, below a whole floor of 4 but above the fleet
// floor's share (4 / 8 = 0.5, less than one retry).
const BUDGET = { ratio: 0.2, minRetriesPerSecond: 2, ttlMs: 2000 };
const PROCESSES = 8;
/** The fleet mode's failure phase (the issue's 30 s), and the other modes'. */
const FLEET_FAILING_MS = 30_000;
const OTHER_FAILING_MS = 4000;
/** Fleet-mode routers eject after 5 failures, for 1 s doubling up to 4 s: one ejection time is at most 4 s. */
const EJECTION = { consecutiveFailures: 5, baseMs: 1000, maxMs: 4000 };

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe('fleet retry budget', () => {
  it('8 processes × 2 threads, every backend failing (30 s for the fleet budget): ≤ 1.2 attempts per request with the fleet budget (local-only and none beside it); once the backends return, every request after the ejections in force end succeeds', async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    const procs = Array.from({ length: PROCESSES }, () => new FleetProcess(NODE));
    const figures: Record<string, { requests: number; attempts: number; perRequest: number }> = {};
    const servers: Server[] = [];
    let recovery: { succeeded: number; afterDeadline: number[]; failedAfterDeadline: number; ejectedForMs: number }[] = [];
    try {
      await Promise.all(procs.map((p) => p.started));
      const cluster = `fleet-${process.pid}-${Date.now()}`;
      for (const mode of ['none', 'local', 'fleet'] as const) {
        const ready = await Promise.all(
          procs.map((p) =>
            p.ask<{ processes: number }>({ cmd: 'setup', mode, budget: BUDGET, ports, url: redis.url, cluster, processes: PROCESSES }),
          ),
        );
        if (mode === 'fleet') expect(ready.every((r) => r.processes === PROCESSES)).toBe(true);
        const fleet = mode === 'fleet';
        const results = await Promise.all(
          procs.map((p) =>
            p.ask<{ requests: number; attempts: number }>({
              cmd: 'go',
              threads: 2,
              everyMs: 400,
              durationMs: fleet ? FLEET_FAILING_MS : OTHER_FAILING_MS,
              ...(fleet ? { ejection: EJECTION } : {}),
            }),
          ),
        );
        if (fleet) {
          // The backends return: every dial is accepted from now on.
          for (const port of ports) servers.push(await listenOn(port));
          recovery = await Promise.all(
            procs.map((p) =>
              p.ask<(typeof recovery)[number]>({
                cmd: 'go',
                threads: 2,
                everyMs: 400,
                durationMs: EJECTION.maxMs + 2000,
                ejection: EJECTION,
                recover: true,
              }),
            ),
          );
        }
        await Promise.all(procs.map((p) => p.ask({ cmd: 'teardown' })));
        const requests = results.reduce((s, r) => s + r.requests, 0);
        const attempts = results.reduce((s, r) => s + r.attempts, 0);
        figures[mode] = { requests, attempts, perRequest: attempts / requests };
      }
    } finally {
      for (const p of procs) void p.kill();
      for (const srv of servers) srv.close();
    }
    console.log('attempts per request (8 processes × 2 threads, all backends failing):', JSON.stringify(figures));
    console.log(
      'recovery (ejection left at the return, ms, per process):',
      JSON.stringify(recovery.map((r) => r.ejectedForMs)),
      'requests after it per thread:',
      JSON.stringify(recovery.flatMap((r) => r.afterDeadline)),
    );
    // Recovery within one ejection time: what was ejected when the backends returned had at most 4 s left,
    // every thread made requests after that, and none of them failed.
    for (const r of recovery) {
      expect(r.ejectedForMs).toBeLessThanOrEqual(EJECTION.maxMs);
      for (const n of r.afterDeadline) expect(n).toBeGreaterThan(0);
    }
    expect(recovery.length).toBe(PROCESSES);
    expect(recovery.reduce((s, r) => s + r.failedAfterDeadline, 0)).toBe(0);
    // No budget: every request tries all three backends.
    expect(figures['none']!.attempts).toBe(3 * figures['none']!.requests);
    // The fleet's floor is shared: the retries stay within 20 % of the requests.
    expect(figures['fleet']!.perRequest).toBeLessThanOrEqual(1.2);
    // A whole floor per process adds up over the fleet (4 per window each, over 10 requests): above the fleet's.
    expect(figures['local']!.perRequest).toBeGreaterThan(figures['fleet']!.perRequest);
  });

  it('the floor is divided among the processes counted in the window, and the whole floor comes back while Redis is away', async () => {
    const cluster = `share-${process.pid}-${Date.now()}`;
    // 1 retry/s over 10 s: a floor of 10; no ratio, so what a process may retry is its floor share alone.
    const budget = { ratio: 0, minRetriesPerSecond: 1, ttlMs: 10_000 };
    const balancers = [0, 1].map(() => new Balancer({ capacity: 4, logger, retryBudget: budget }));
    const fleets = balancers.map((balancer) => new FleetRetryBudget({ balancer, cluster, url: redis.url, logger, intervalMs: 60_000 }));
    try {
      await fleets[0]!.start();
      expect(fleets[0]!.fleet).toEqual({ processes: 1, requests: 0, retries: 0 });
      await fleets[1]!.start();
      expect(fleets[1]!.fleet?.processes).toBe(2);
      await fleets[0]!.sync();
      for (const b of balancers) expect(b.retryBudgetStats()).toMatchObject({ processes: 2, available: 5 });
      // The counts of each process reach the fleet's window.
      const router = balancers[0]!.router();
      for (let i = 0; i < 3; i++) router.retryBudget.onRequest();
      expect(router.retryBudget.tryRetry()).toBe(true);
      expect(await fleets[0]!.sync()).toEqual({ processes: 2, requests: 3, retries: 1 });
      router.close();
      // Redis away: each process falls back to its local budget, the whole floor.
      await redis.kill();
      expect(await fleets[1]!.sync()).toBeUndefined();
      expect(balancers[1]!.retryBudgetStats()).toMatchObject({ processes: 1, available: 10 });
      await redis.restart();
      await until(async () => (await fleets[1]!.sync()) !== undefined, 'the fleet budget back on Redis');
      // The restarted Redis kept nothing: this process is the only one counted until the other's next round.
      expect(balancers[1]!.retryBudgetStats()).toMatchObject({ processes: 1, available: 10 });
      // The other process's client reconnects on its own schedule: its next round that reaches Redis counts both.
      await until(async () => {
        await fleets[0]!.sync();
        return balancers[0]!.retryBudgetStats().processes === 2;
      }, 'the other process counted again');
    } finally {
      for (const f of fleets) await f.close();
      for (const b of balancers) b.close();
    }
  });
});
