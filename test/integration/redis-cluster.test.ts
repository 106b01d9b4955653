/**
 * RedisMembership + MembershipPublisher against a real 3-master Redis
 * Cluster (redis-server --cluster-enabled yes, joined with
 * `redis-cli --cluster create`), started on free ports and always killed.
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MembershipSnapshot, ResolvedBackendSpec } from '../../src/core/spec.js';
import { Rng } from '../../src/core/rng.js';
import { compactSpec } from '../../src/core/spec-fields.js';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { command, startCluster, type ClusterTopology } from '../helpers/redis-topology.js';
import { rejection, thrown } from '../helpers/thrown.js';

const be = (id: string, port: number) => ({ id, address: `127.0.0.1:${port}` });

describe('Redis Cluster: sharded pub/sub, one hash slot per cluster', () => {
  let topo: ClusterTopology;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    topo = await startCluster({ masters: 3 });
  }, 60_000);
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c().catch(() => {});
    await topo?.stop();
  });
  const publisher = (cluster: string, extra: Record<string, unknown> = {}) => {
    const p = new MembershipPublisher({ redisCluster: topo.addresses, cluster, logger: captureLog().logger, ...extra });
    closers.push(() => p.close());
    return p;
  };
  const reader = async (cluster: string) => {
    const seen: MembershipSnapshot[] = [];
    const log = captureLog();
    const source = new RedisMembership({ redisCluster: topo.addresses, cluster, logger: log.logger, backoff: { baseMs: 20, maxMs: 200 } });
    closers.push(() => source.close());
    await source.start((s) => seen.push(s));
    return { source, seen, log };
  };

  it('the snapshot key and the channel carry the {cluster} hash tag and hash to one slot', async () => {
    const pub = publisher('db');
    expect(pub.keys).toEqual({ snapshot: 'poise:{db}:snapshot', channel: 'poise:{db}:notices' });
    const slotKey = Number(await command(topo.nodes[0]!.port, 'CLUSTER', 'KEYSLOT', pub.keys.snapshot));
    const slotChannel = Number(await command(topo.nodes[0]!.port, 'CLUSTER', 'KEYSLOT', pub.keys.channel));
    expect(slotChannel).toBe(slotKey);
    expect(await pub.apply({ cluster: 'db', backends: [be('a', 1)] })).toBe(1);
    // The key lives on the slot's owner, and only there.
    const owner = await topo.ownerOf(slotKey);
    for (const n of topo.nodes) {
      const exists = Number(await command(n.port, 'EXISTS', pub.keys.snapshot).catch(() => 0));
      expect(exists).toBe(n.port === owner ? 1 : 0);
    }
  });

  it('clusters whose names hash to slots on different masters each follow their own versions through SSUBSCRIBE', async () => {
    // Names chosen so that their slots sit on three different masters (checked, not assumed).
    const names: string[] = [];
    const owners = new Set<number>();
    for (let i = 0; names.length < 3 && i < 200; i++) {
      const name = `c${i}`;
      const owner = await topo.ownerOf(Number(await command(topo.nodes[0]!.port, 'CLUSTER', 'KEYSLOT', `{${name}}`)));
      if (!owners.has(owner)) {
        owners.add(owner);
        names.push(name);
      }
    }
    expect(owners.size).toBe(3);
    const pubs = names.map((n) => publisher(n));
    for (const [i, n] of names.entries()) await pubs[i]!.apply({ cluster: n, backends: [be('a', 1)] });
    const readers = await Promise.all(names.map((n) => reader(n)));
    for (const r of readers) expect(r.source.version).toBe(1);
    // 20 changes per cluster, interleaved; every reader must see exactly its own versions 2..21, in order, from notices.
    for (let v = 2; v <= 21; v++) for (const i of names.keys()) expect(await pubs[i]!.add(be(`b${v}`, v))).toBe(v);
    for (const [i, r] of readers.entries()) {
      await until(() => r.source.version === 21, `reader of ${names[i]} at version 21`);
      expect(r.seen.map((s) => s.version)).toEqual(Array.from({ length: 21 }, (_, k) => k + 1));
      expect(r.seen.at(-1)!.backends.map((b) => b.id)).toEqual(['a', ...Array.from({ length: 20 }, (_, k) => `b${k + 2}`)]);
      expect(r.seen.every((s) => s.cluster === names[i])).toBe(true);
      // Notices, not re-reads: one "subscribed" snapshot read at start and no version gaps.
      expect(r.log.find('notice skipped versions')).toEqual([]);
    }
  });

  it('deltas over SPUBLISH: two publishers, 120 operations; readers apply every version from its notice and end on the stored document', async () => {
    const pubs = [publisher('delta'), publisher('delta', { notices: 'full' })];
    await pubs[0]!.apply({ cluster: 'delta', backends: [be('a', 1), be('b', 2)] });
    const readers = await Promise.all([reader('delta'), reader('delta')]);
    const tap = new Cluster(
      topo.addresses.map((a) => ({ host: '127.0.0.1', port: Number(a.split(':')[1]) })),
      { shardedSubscribers: true },
    );
    closers.push(async () => tap.disconnect());
    const notices: string[] = [];
    tap.on('smessage', (_c: string, m: string) => notices.push(m));
    await tap.ssubscribe(pubs[0]!.keys.channel);
    const rng = new Rng(16);
    for (let i = 0; i < 120; i++) {
      // Publisher 0 sends deltas, publisher 1 whole snapshots (an older release in a mixed fleet).
      const pub = pubs[i % 2]!;
      const k = rng.below(4);
      if (k === 0) await pub.add(be(`n${i}`, 100 + i));
      else if (k === 1) await pub.setWeight(rng.below(2) === 0 ? 'a' : 'b', 1 + rng.below(100));
      else if (k === 2) await pub.drain(rng.below(2) === 0 ? 'a' : 'b');
      else await pub.undrain(rng.below(2) === 0 ? 'a' : 'b');
    }
    const stored = (await pubs[0]!.show())!;
    expect(stored.version).toBe(121);
    for (const r of readers) {
      await until(() => r.source.version === 121, 'reader at version 121');
      expect(r.seen.map((s) => s.version)).toEqual(Array.from({ length: 121 }, (_, k) => k + 1));
      expect(r.seen.at(-1)!.backends.map((b) => compactSpec(b as ResolvedBackendSpec))).toEqual(stored.document.backends);
      expect(r.log.find('re-reading the snapshot')).toEqual([]);
    }
    await until(() => notices.length === 120, 'the 120 tapped notices');
    expect(notices.map((m) => m.includes('"base":'))).toEqual(Array.from({ length: 120 }, (_, k) => k % 2 === 0));
  });

  it('a notice is a sharded message: SSUBSCRIBE on the slot owner receives it, a plain SUBSCRIBE does not', async () => {
    const pub = publisher('shard');
    await pub.apply({ cluster: 'shard', backends: [be('a', 1)] });
    const client = new Cluster(
      topo.addresses.map((a) => ({ host: '127.0.0.1', port: Number(a.split(':')[1]) })),
      { shardedSubscribers: true },
    );
    const plain = new Cluster(topo.addresses.map((a) => ({ host: '127.0.0.1', port: Number(a.split(':')[1]) })));
    closers.push(async () => {
      client.disconnect();
      plain.disconnect();
    });
    const sharded: string[] = [];
    const classic: string[] = [];
    client.on('smessage', (_c: string, m: string) => sharded.push(m));
    plain.on('message', (_c: string, m: string) => classic.push(m));
    await client.ssubscribe(pub.keys.channel);
    await plain.subscribe(pub.keys.channel);
    await pub.drain('a');
    await until(() => sharded.length === 1, 'the sharded notice');
    expect(JSON.parse(sharded[0]!).version).toBe(2);
    // Give a classic delivery every chance to arrive (it must not: SPUBLISH only reaches shard subscribers).
    await pub.undrain('a');
    await until(() => sharded.length === 2, 'the second sharded notice');
    expect(classic).toEqual([]);
  });

  it('waitReplicas on a Cluster: the script and WAIT travel in one pipeline to the slot master (no replicas here: NotReplicated, and the write is stored)', async () => {
    const pub = publisher('waited', { waitReplicas: 1, waitTimeoutMs: 50 });
    const err = await rejection(pub.apply({ cluster: 'waited', backends: [be('a', 1)] }));
    expect(err.code).toBe('NotReplicated');
    expect(err.message).toContain('waitReplicas: version 1 was written on the master but acknowledged by 0 of 1 replicas within 50 ms');
    expect((await publisher('waited').show())?.version).toBe(1);
  });

  it('validation: an empty list, a bad host:port and a repeated node are refused, naming redisCluster', () => {
    expect(thrown(() => new MembershipPublisher({ redisCluster: [], cluster: 'x' })).message).toBe(
      'options.redisCluster: must name at least one "host:port", got an array',
    );
    expect(thrown(() => new RedisMembership({ redisCluster: ['127.0.0.1'], cluster: 'x' })).message).toContain(
      'options.redisCluster: element 0 "127.0.0.1": must be "host:port"',
    );
    expect(thrown(() => new RedisMembership({ redisCluster: ['127.0.0.1:7000', '127.0.0.1:7000'], cluster: 'x' })).message).toContain(
      'element 1 "127.0.0.1:7000": repeated',
    );
    expect(thrown(() => new RedisMembership({ redisCluster: ['127.0.0.1:7000'], url: 'redis://127.0.0.1', cluster: 'x' })).message).toBe(
      'options.redisCluster: give exactly one of url, sentinels, redisCluster (got url and redisCluster)',
    );
  });
});
