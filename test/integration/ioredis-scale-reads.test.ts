/**
 * poiseScaleReads against a real Redis Cluster (3 masters, 2 replicas each,
 * started here): reads of one shard go to its replicas by p2c:latency, and a
 * replica kept busy by a Lua loop gets a small share; pipelines and
 * auto-pipelining return every reply to its caller and leave no lease open;
 * a read that gets MOVED goes to the master ioredis is sent to.
 */
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { poiseScaleReads } from '../../src/outbound/ioredis-scale-reads.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { command, startCluster, type ClusterTopology } from '../helpers/redis-topology.js';
import { until } from '../helpers/until.js';

let topo: ClusterTopology;

beforeAll(async () => {
  topo = await startCluster({ masters: 3, replicas: 2 });
  // The premise: every node's CLUSTER SLOTS lists two replicas per range (right after the create, some list none yet).
  await until(
    async () => {
      for (const n of topo.nodes) {
        const slots = (await command(n.port, 'CLUSTER', 'SLOTS').catch(() => [])) as unknown[][];
        if (slots.length === 0 || slots.some((r) => r.length !== 5)) return false;
      }
      return true;
    },
    'every node to list two replicas per slot range',
    60_000,
    100,
  );
}, 120_000);
afterAll(async () => {
  await topo?.stop();
});

/** The shard that serves `slot`: its master's and replicas' `host:port`, as CLUSTER SLOTS names them. */
async function shardOf(slot: number, port = topo.nodes[0]!.port): Promise<{ master: string; replicas: string[]; masterId: string }> {
  const slots = (await command(port, 'CLUSTER', 'SLOTS')) as [number, number, [string, number, string], ...[string, number, string][]][];
  const range = slots.find(([lo, hi]) => slot >= lo && slot <= hi)!;
  const [, , m, ...rs] = range;
  return { master: `${m[0]}:${m[1]}`, masterId: m[2], replicas: rs.map((r) => `${r[0]}:${r[1]}`) };
}

/** GET calls a node has served (INFO commandstats). */
async function gets(address: string): Promise<number> {
  const info = String(await command(Number(address.split(':')[1]), 'INFO', 'commandstats'));
  return Number(/cmdstat_get:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

function setup(opts: { autoPipelining?: boolean; slotsRefreshInterval?: number } = {}) {
  const balancer = new Balancer({ capacity: 16 });
  const router = balancer.router({ policy: 'p2c:latency' });
  const scaleReads = poiseScaleReads(router);
  const cluster = new Cluster([{ host: '127.0.0.1', port: topo.nodes[0]!.port }], {
    scaleReads,
    enableAutoPipelining: opts.autoPipelining ?? false,
    ...(opts.slotsRefreshInterval === undefined ? {} : { slotsRefreshInterval: opts.slotsRefreshInterval }),
  });
  const stop = scaleReads.follow(cluster, balancer);
  return {
    balancer,
    router,
    cluster,
    async ready(): Promise<void> {
      await until(() => cluster.status === 'ready', 'the cluster client ready', 30_000);
      await until(
        () => topo.addresses.every((a) => router.refresh() >= 0 && router.member(a) !== undefined),
        'all 9 nodes in the table',
        30_000,
      );
    },
    async close(): Promise<void> {
      stop();
      await cluster.quit();
      router.close();
      balancer.close();
    },
  };
}

describe('poiseScaleReads on a Redis Cluster with replicas', () => {
  it('follow() puts every node in the table, a shard per tier: replicas 2s, the master alone in 2s + 1', async () => {
    const s = setup();
    try {
      await s.ready();
      const shard = await shardOf(0);
      const masterTier = s.router.member(shard.master)!.priority;
      expect(masterTier % 2).toBe(1);
      for (const r of shard.replicas) expect(s.router.member(r)!.priority).toBe(masterTier - 1);
      const tiers = new Set(topo.addresses.map((a) => s.router.member(a)!.priority));
      expect(tiers).toEqual(new Set([0, 1, 2, 3, 4, 5]));
    } finally {
      await s.close();
    }
  }, 60_000);

  it('a replica kept busy (a 20 ms Lua loop, back to back) serves under 15 % of 3000 reads of its shard; the master none; every lease ends', async () => {
    const s = setup();
    const tag = '{poise}';
    const shard = await shardOf(Number(await s.cluster.cluster('KEYSLOT', tag)));
    await s.ready();
    for (let i = 0; i < 50; i++) await s.cluster.set(`${tag}:${i}`, `v${i}`);
    await topo.waitForReplicasInSync();
    const [slow, fast] = shard.replicas as [string, string];
    // The busy loop: a no-writes script a replica runs, holding its event loop 20 ms each time.
    const busy = new Redis({ host: '127.0.0.1', port: Number(slow.split(':')[1]) });
    let spinning = true;
    const spin = (async () => {
      while (spinning) {
        await busy.eval(
          "#!lua flags=no-writes\nlocal s = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 20000 return 1",
          0,
        );
      }
    })();
    try {
      const before = { slow: await gets(slow), fast: await gets(fast), master: await gets(shard.master) };
      // 3000 reads, 8 at a time, each checked against its key's value.
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < 3000) {
            const i = next++ % 50;
            expect(await s.cluster.get(`${tag}:${i}`)).toBe(`v${i}`);
          }
        }),
      );
      const served = {
        slow: (await gets(slow)) - before.slow,
        fast: (await gets(fast)) - before.fast,
        master: (await gets(shard.master)) - before.master,
      };
      expect(served.slow + served.fast).toBe(3000);
      expect(served.master).toBe(0);
      expect(served.slow / 3000).toBeLessThan(0.15);
      expect(s.router.openLeases).toBe(0);
    } finally {
      spinning = false;
      await spin;
      busy.disconnect();
      await s.close();
    }
  }, 120_000);

  it('auto-pipelining and explicit pipelines: 2000 concurrent GETs and 100 pipelines of 20 each get their own key’s reply, from replicas only; no lease stays open', async () => {
    const s = setup({ autoPipelining: true });
    try {
      await s.ready();
      const keys = Array.from({ length: 200 }, (_, i) => `k${i}`);
      await Promise.all(keys.map((k) => s.cluster.set(k, `value-of-${k}`)));
      for (let t = 0; t < 10; t++) for (let j = 0; j < 20; j++) await s.cluster.set(`{p${t}}:${j}`, `p${t}-${j}`);
      await topo.waitForReplicasInSync();
      const masters = new Set<string>();
      for (const a of topo.addresses) if (s.router.member(a)!.priority % 2 === 1) masters.add(a);
      const before = new Map<string, number>();
      for (const a of topo.addresses) before.set(a, await gets(a));
      // Auto-pipelining: 2000 GETs issued in the same ticks, batched per shard by ioredis.
      const replies = await Promise.all(Array.from({ length: 2000 }, (_, i) => s.cluster.get(keys[i % 200]!)));
      expect(replies).toEqual(Array.from({ length: 2000 }, (_, i) => `value-of-${keys[i % 200]}`));
      // Explicit pipelines: 20 GETs of one hash tag each, answered in order.
      const piped = await Promise.all(
        Array.from({ length: 100 }, (_, p) => {
          const pl = s.cluster.pipeline();
          for (let j = 0; j < 20; j++) pl.get(`{p${p % 10}}:${j}`);
          return pl.exec();
        }),
      );
      expect(piped.map((res) => res!.map(([err, v]) => (err === null ? v : err)))).toEqual(
        Array.from({ length: 100 }, (_, p) => Array.from({ length: 20 }, (_, j) => `p${p % 10}-${j}`)),
      );
      const pl = s.cluster.pipeline();
      for (let j = 0; j < 20; j++) pl.get(`{t}:${j}`);
      await Promise.all(Array.from({ length: 20 }, (_, j) => s.cluster.set(`{t}:${j}`, `t${j}`)));
      await topo.waitForReplicasInSync();
      const ordered = await pl.exec();
      expect(ordered!.map(([, v]) => v)).toEqual(Array.from({ length: 20 }, (_, j) => `t${j}`));
      let onMasters = 0;
      let onReplicas = 0;
      for (const a of topo.addresses) {
        const n = (await gets(a)) - before.get(a)!;
        if (masters.has(a)) onMasters += n;
        else onReplicas += n;
      }
      expect(onMasters).toBe(0);
      expect(onReplicas).toBe(2000 + 100 * 20 + 20);
      await until(() => s.router.openLeases === 0, 'every lease released');
    } finally {
      await s.close();
    }
  }, 120_000);

  it('a read that gets MOVED (its slot moved to another shard) is answered by the new owner’s master, each send on a leased node', async () => {
    const s = setup({ slotsRefreshInterval: 600_000 });
    try {
      await s.ready();
      const key = 'moved-key';
      const slot = Number(await s.cluster.cluster('KEYSLOT', key));
      const from = await shardOf(slot);
      const to = await shardOf((slot + 5462) % 16384);
      expect(to.master).not.toBe(from.master);
      // The client learns the old owner first (a read of the still-empty slot from its replicas).
      expect(await s.cluster.get(key)).toBeNull();
      // Move the empty slot: every master assigns it to the new owner; the value is written there.
      for (const a of topo.addresses) {
        const port = Number(a.split(':')[1]);
        const role = (await command(port, 'ROLE')) as unknown[];
        if (role[0] === 'master') await command(port, 'CLUSTER', 'SETSLOT', slot, 'NODE', to.masterId);
      }
      await until(
        async () => {
          for (const n of topo.nodes) if ((await shardOf(slot, n.port)).master !== to.master) return false;
          return true;
        },
        'every node to see the slot moved',
        30_000,
        50,
      );
      await command(Number(to.master.split(':')[1]), 'SET', key, 'moved-value');
      const before = await gets(to.master);
      const acquire = s.router.acquire.bind(s.router);
      const leased: string[] = [];
      s.router.acquire = (opts) => {
        const l = acquire(opts);
        leased.push(l.id);
        return l;
      };
      expect(await s.cluster.get(key)).toBe('moved-value');
      // The first send went to a replica of the old shard (leased there), the MOVED one to the new master (leased there).
      expect(from.replicas).toContain(leased[0]);
      expect(leased).toContain(to.master);
      expect((await gets(to.master)) - before).toBe(1);
      expect(s.router.openLeases).toBe(0);
    } finally {
      await s.close();
    }
  }, 120_000);
});
