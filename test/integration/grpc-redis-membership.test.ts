/**
 * Membership through Redis to a grpc-js channel: a backend added with the
 * publisher reaches the channel through one membership event (RedisMembership's
 * notice → Balancer.apply → the table's epoch → the poise: resolver), and
 * from then on takes its round-robin share of calls; one removed takes none.
 */
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { poiseServiceConfig, registerPoiseCluster } from '../../src/grpc.js';
import { createLogger } from '../../src/log.js';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { bindMembership } from '../../src/membership/source.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { TestClient, type TestServer, echo, startServer } from '../helpers/grpc-servers.js';
import { startRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe('poise-lb/grpc with RedisMembership', () => {
  it('a backend published to Redis gets calls after one membership event; one removed gets none', async () => {
    const redis = await startRedis();
    cleanup.push(() => redis.stop());
    const servers: TestServer[] = [await startServer('s0'), await startServer('s1'), await startServer('s2')];
    cleanup.push(() => Promise.all(servers.map((s) => s.stop())));
    const spec = (s: TestServer) => ({ id: s.name, address: s.address });
    const pub = new MembershipPublisher({ url: redis.url, cluster: 'grpc', logger });
    cleanup.push(() => pub.close());
    await pub.apply({ cluster: 'grpc', backends: [spec(servers[0]!), spec(servers[1]!)] });
    const balancer = new Balancer({ logger });
    cleanup.push(() => balancer.close());
    const binding = await bindMembership(new RedisMembership({ url: redis.url, cluster: 'grpc', logger }), balancer, { logger });
    cleanup.push(() => binding.close());
    cleanup.push(registerPoiseCluster('grpc-redis', balancer));
    const client = new TestClient('poise:///grpc-redis', grpc.credentials.createInsecure(), {
      'grpc.service_config': poiseServiceConfig({ policy: 'round-robin' }),
    });
    cleanup.push(() => client.close());
    for (let i = 0; i < 4; i++) await echo(client);
    expect(servers[0]!.calls + servers[1]!.calls).toBe(4);

    let events = 0;
    balancer.on('membership', () => events++);
    await pub.add(spec(servers[2]!));
    await until(async () => {
      await echo(client);
      return servers[2]!.calls > 0;
    }, 's2 answers a call');
    expect(events).toBe(1);
    // Round robin over three READY members: 30 calls in a row give it 10.
    const before = servers[2]!.calls;
    for (let i = 0; i < 30; i++) await echo(client);
    expect(servers[2]!.calls - before).toBe(10);

    await pub.remove('s0');
    await until(() => events === 2, 'the removal applied');
    const s0 = servers[0]!.calls;
    for (let i = 0; i < 10; i++) await echo(client);
    expect(servers[0]!.calls).toBe(s0);
    expect(servers[1]!.calls + servers[2]!.calls).toBeGreaterThanOrEqual(10);
  });
});
