/**
 * poisePreferredSlaves against a real Sentinel set-up (1 master, 2 replicas,
 * 2 sentinels, started here): ioredis clients with `role: 'slave'` spread
 * over the replicas by connection count, and a replica the router does not
 * know is never chosen. Which replica a client reached is asked of it.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { poisePreferredSlaves } from '../../src/outbound/ioredis-scale-reads.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { startSentinelTopology, type SentinelTopology } from '../helpers/redis-topology.js';

let topo: SentinelTopology;

beforeAll(async () => {
  topo = await startSentinelTopology({ replicas: 2, sentinels: 2 });
}, 120_000);
afterAll(async () => {
  await topo?.stop();
});

/** The port of the server a client is connected to. */
async function portOf(client: Redis): Promise<number> {
  const info = await client.info('server');
  return Number(/tcp_port:(\d+)/.exec(info)![1]);
}

async function clients(n: number, router: ReturnType<Balancer['router']>): Promise<{ ports: number[]; quit(): Promise<void> }> {
  const made: { client: Redis; pick: ReturnType<typeof poisePreferredSlaves> }[] = [];
  for (let i = 0; i < n; i++) {
    const pick = poisePreferredSlaves(router);
    const client = new Redis({
      sentinels: topo.sentinelAddresses.map((a) => ({ host: '127.0.0.1', port: Number(a.split(':')[1]) })),
      name: topo.name,
      role: 'slave',
      preferredSlaves: pick,
    });
    await client.ping();
    made.push({ client, pick });
  }
  const ports: number[] = [];
  for (const m of made) ports.push(await portOf(m.client));
  return {
    ports,
    async quit() {
      for (const m of made) {
        await m.client.quit();
        m.pick.release();
      }
    },
  };
}

describe('poisePreferredSlaves on a Sentinel set-up', () => {
  it('p2c:connections: 6 clients land 3 and 3 on the two replicas, never on the master; their leases end with release()', async () => {
    const masterPort = await topo.masterPort();
    const replicas = topo.nodes.filter((n) => n.port !== masterPort);
    expect(replicas.length).toBe(2);
    const balancer = new Balancer({ capacity: 4 });
    balancer.update(replicas.map((r) => ({ id: `127.0.0.1:${r.port}`, address: `127.0.0.1:${r.port}` })));
    const router = balancer.router({ policy: 'p2c:connections' });
    const made = await clients(6, router);
    try {
      expect(made.ports.filter((p) => p === replicas[0]!.port).length).toBe(3);
      expect(made.ports.filter((p) => p === replicas[1]!.port).length).toBe(3);
      expect(router.openLeases).toBe(6);
    } finally {
      await made.quit();
      expect(router.openLeases).toBe(0);
      router.close();
      balancer.close();
    }
  }, 60_000);

  it('a replica the router does not know is never chosen while a known one is offered', async () => {
    const masterPort = await topo.masterPort();
    const known = topo.nodes.find((n) => n.port !== masterPort)!;
    const balancer = new Balancer({ capacity: 4 });
    balancer.update([{ id: `127.0.0.1:${known.port}`, address: `127.0.0.1:${known.port}` }]);
    const router = balancer.router({ policy: 'p2c:connections' });
    const made = await clients(4, router);
    try {
      expect(made.ports).toEqual(Array(4).fill(known.port));
    } finally {
      await made.quit();
      router.close();
      balancer.close();
    }
  }, 60_000);
});
