// Active checks against real servers of the kinds they speak: a redis-server
// of the test's own answers PING with PONG, the local PostgreSQL reaches
// ReadyForQuery. (What is down, and why, is in test/health/active.test.ts.)
import { afterEach, describe, expect, it } from 'vitest';
import type { HealthCheckOptions } from '../../src/health/config.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { captureLog } from '../helpers/log-capture.js';
import { startRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** The active-check state of backend `address` under `check`, once it has settled on up or down. */
async function settled(check: HealthCheckOptions, address: string): Promise<string> {
  const b = new Balancer({ capacity: 4, logger: captureLog('silent').logger, health: { check } });
  closers.push(() => b.close());
  b.update([{ id: 'x', address }]);
  const state = () => b.healthStats().backends.find((x) => x.id === 'x')!.check;
  await until(() => state() === 'up' || state() === 'down', `the ${check.kind} check of ${address} to settle`);
  return state();
}

describe('active checks against real servers', () => {
  it('redis: PING → PONG is up', async () => {
    const redis = await startRedis();
    closers.push(() => redis.stop());
    expect(await settled({ kind: 'redis', intervalMs: 20, jitterPercent: 0, rise: 1, fall: 1 }, `127.0.0.1:${redis.port}`)).toBe('up');
  });

  it('postgres: the startup handshake reaches ReadyForQuery', async () => {
    const check: HealthCheckOptions = {
      kind: 'postgres',
      database: 'test',
      intervalMs: 20,
      jitterPercent: 0,
      rise: 1,
      fall: 1,
      timeoutMs: 1000,
    };
    expect(await settled(check, '127.0.0.1:5432')).toBe('up');
  });
});
