/**
 * Membership metrics with the Redis control plane: the source kind, its
 * lineage and its connection state follow a real redis-server that is
 * killed and restarted.
 */
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { bindMembership } from '../../src/membership/source.js';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { collectMetrics } from '../../src/metrics/collect.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { until } from '../helpers/until.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

const logger = createLogger({ level: 'silent' });

describe('membership metrics from Redis', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('source="redis", the lineage in force, version; source_up 0 while Redis is down and 1 once it is back', async () => {
    const pub = new MembershipPublisher({ url: redis.url, cluster: 'm', logger });
    await pub.apply({ cluster: 'm', backends: [{ id: 'a', address: '127.0.0.1:7001' }] });
    const balancer = new Balancer({ logger });
    const source = new RedisMembership({ url: redis.url, cluster: 'm', logger, backoff: { baseMs: 20, maxMs: 100 } });
    const binding = await bindMembership(source, balancer, { logger });
    const registry = new Registry();
    collectMetrics(balancer, { registry, cluster: 'm', source });
    const val = async (name: string, labels: Record<string, string> = {}) =>
      parseMetricsText(await registry.metrics())
        .get(name)
        ?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    try {
      await until(() => source.connected, 'subscriber ready');
      expect(await val('poise_membership_info', { cluster: 'm', source: 'redis', lineage: balancer.lineage! })).toBe(1);
      expect(balancer.lineage).toMatch(/^[0-9a-f]{32}$/);
      expect(await val('poise_membership_version', { cluster: 'm' })).toBe(1);
      expect(await val('poise_membership_source_up', { source: 'redis' })).toBe(1);
      await redis.kill();
      await until(async () => (await val('poise_membership_source_up', { source: 'redis' })) === 0, 'source_up 0 with Redis down');
      // The membership in force stays (last good state), and says so.
      expect(await val('poise_membership_applied')).toBe(1);
      await redis.restart();
      await until(async () => (await val('poise_membership_source_up', { source: 'redis' })) === 1, 'source_up 1 after the restart');
    } finally {
      await binding.close();
      await pub.close();
      balancer.close();
    }
  });
});
