/**
 * The fleet retry budget (FleetRetryBudget, Redis): 8 processes × 2 worker
 * threads calling connect() at a low rate while every backend refuses, with
 * no budget, a local budget per process, and the fleet budget; and the
 * floor share following the fleet's processes and Redis going away.
 * Sized for a 2-core machine: a 2 s window, 4 s of traffic per mode.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../dist/src/log.js';
import { FleetRetryBudget } from '../../dist/src/membership/redis-retry-budget.js';
import { Balancer } from '../../dist/src/runtime/balancer.js';
import { freePort } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';
import { FleetProcess } from '../helpers/fleet-process.js';

const NODE = new URL('../fixtures/retry-fleet-node.mjs', import.meta.url);
const logger = createLogger({ level: 'silent' });

// 20 % of requests, a floor of 2 retries/s (4 per 2 s window). Each process
// makes 2 threads × 1 request per 400 ms = 10 requests per window: its own
// 20 % is 2 retries per window, below a whole floor of 4 but above the fleet
// floor's share (4 / 8 = 0.5, less than one retry).
const BUDGET = { ratio: 0.2, minRetriesPerSecond: 2, ttlMs: 2000 };
const PROCESSES = 8;

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

describe('fleet retry budget', () => {
  it('8 processes × 2 threads, every backend failing: ≤ 1.2 attempts per request with the fleet budget (local-only and none beside it)', async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    const procs = Array.from({ length: PROCESSES }, () => new FleetProcess(NODE));
    const figures: Record<string, { requests: number; attempts: number; perRequest: number }> = {};
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
        const results = await Promise.all(
          procs.map((p) => p.ask<{ requests: number; attempts: number }>({ cmd: 'go', threads: 2, everyMs: 400, durationMs: 4000 })),
        );
        await Promise.all(procs.map((p) => p.ask({ cmd: 'teardown' })));
        const requests = results.reduce((s, r) => s + r.requests, 0);
        const attempts = results.reduce((s, r) => s + r.attempts, 0);
        figures[mode] = { requests, attempts, perRequest: attempts / requests };
      }
    } finally {
      for (const p of procs) void p.kill();
    }
    console.log('attempts per request (8 processes × 2 threads, all backends failing):', JSON.stringify(figures));
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
