/**
 * RedisMembership + MembershipPublisher through Redis Sentinel: 1 master,
 * 2 replicas and 3 sentinels (quorum 2, down-after 1000 ms), real
 * redis-server processes on free ports, always killed in afterAll.
 *
 * The failover laws:
 * - Without WAIT (Redis' default, asynchronous replication), a write the
 *   master acknowledged can be lost when it dies before a replica got it.
 *   What holds is convergence: the publisher and every reader follow the new
 *   master, and every reader ends on the snapshot the new master stores
 *   (version and content), including readers that had applied a version the
 *   failover lost.
 * - With waitReplicas: 1 (WAIT 1 after each write), a write is acknowledged
 *   only once a replica holds it; Sentinel promotes the replica with the
 *   largest replication offset, so every acknowledged write is present after
 *   the failover. A write that was not acknowledged was reported failed
 *   (NotReplicated, Unavailable, or a conflict of a resent in-flight write).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { MembershipPublisher, type MembershipPublisherOptions } from '../../src/membership/redis-publisher.js';
import { RedisMembership, type RedisMembershipOptions } from '../../src/membership/redis-source.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { converged, writer, type Reader } from '../helpers/membership-writer.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { command, startSentinelTopology, type SentinelTopology } from '../helpers/redis-topology.js';
import { rejection, thrown } from '../helpers/thrown.js';

const be = (id: string, port: number) => ({ id, address: `127.0.0.1:${port}` });

describe('Redis Sentinel: failover under continuous writes', () => {
  let topo: SentinelTopology;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    topo = await startSentinelTopology({ replicas: 2, sentinels: 3, downAfterMs: 1000, failoverTimeoutMs: 3000 });
  }, 60_000);
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c().catch(() => {});
    await topo?.stop();
  });
  const via = (form: 'options' | 'url'): Pick<RedisMembershipOptions, 'url' | 'sentinels' | 'sentinelName'> =>
    form === 'url'
      ? { url: `redis+sentinel://${topo.sentinelAddresses.join(',')}/${topo.name}` }
      : { sentinels: topo.sentinelAddresses, sentinelName: topo.name };
  const publisher = (cluster: string, extra: Partial<MembershipPublisherOptions> = {}) => {
    const p = new MembershipPublisher({ ...via('options'), cluster, logger: captureLog('warn').logger, ...extra });
    closers.push(() => p.close());
    return p;
  };
  const reader = async (cluster: string, form: 'options' | 'url'): Promise<Reader> => {
    const seen: MembershipSnapshot[] = [];
    const log = captureLog('debug');
    const source = new RedisMembership({ ...via(form), cluster, logger: log.logger, backoff: { baseMs: 20, maxMs: 200 } });
    closers.push(() => source.close());
    await source.start((s) => seen.push(s));
    return { source, seen, log };
  };
  const killMaster = async (): Promise<{ old: number; now: number }> => {
    const old = await topo.masterPort();
    await topo.nodes.find((n) => n.port === old)!.kill();
    return { old, now: await topo.waitForNewMaster(old) };
  };
  /** Restarts killed nodes (they rejoin as replicas of the current master) and waits for two replicas in sync. */
  const healthy = async () => {
    for (const n of topo.nodes) if (!n.running) await n.restart();
    await topo.waitForReplicas(2, 30_000);
  };
  it('both forms (sentinels + sentinelName, a redis+sentinel:// URL) find the master and follow its notices', async () => {
    const pub = publisher('forms');
    expect(await pub.apply({ cluster: 'forms', backends: [be('a', 1)] })).toBe(1);
    const readers = [await reader('forms', 'options'), await reader('forms', 'url')];
    for (const r of readers) expect(r.source.version).toBe(1);
    const tap = new Redis({ host: '127.0.0.1', port: await topo.masterPort() });
    closers.push(async () => tap.disconnect());
    const notices: string[] = [];
    tap.on('message', (_c: string, m: string) => notices.push(m));
    await tap.subscribe(pub.keys.channel);
    expect(await pub.drain('a')).toBe(2);
    for (const r of readers) await until(() => r.source.version === 2, 'notice 2');
    expect(readers.map((r) => r.seen.map((s) => s.version))).toEqual([
      [1, 2],
      [1, 2],
    ]);
    // The notice was a delta on version 1, and both readers applied it without re-reading the snapshot.
    await until(() => notices.length === 1, 'the tapped notice');
    expect(notices[0]).toMatch(
      /^\{"version":2,"lineage":"[0-9a-f]{32}","base":1,"ops":\[\{"op":"replace","backend":\{"id":"a","address":"127\.0\.0\.1:1","status":"draining"\}\}\],"digest":"[0-9a-f]{40}"\}$/,
    );
    for (const r of readers) expect(r.log.find('re-reading the snapshot')).toEqual([]);
    expect(readers.map((r) => r.seen[1]!.backends[0]!.status)).toEqual(['draining', 'draining']);
  });

  it('master SIGKILLed under continuous writes: the publisher and every reader follow the new master and end on its stored snapshot', async () => {
    const pub = publisher('fo');
    await pub.apply({ cluster: 'fo', backends: [be('seed', 1)] });
    const readers = await Promise.all([reader('fo', 'options'), reader('fo', 'url'), reader('fo', 'options'), reader('fo', 'url')]);
    const w = writer(pub, 'w');
    await until(() => w.acked.length >= 15, '15 writes acknowledged before the failover');
    const { old, now } = await killMaster();
    expect(now).not.toBe(old);
    const switched = Date.now();
    await until(() => w.acked.filter((a) => a.at > switched).length >= 15, '15 writes acknowledged by the new master', 30_000);
    await w.stop();
    const stored = await converged(readers, pub);
    // The publisher followed: its last acknowledged write is the stored version, on the new master.
    expect(stored.version).toBe(w.acked.at(-1)!.version);
    // Acknowledged versions only grow, also across the failover (the publisher's high-water floor).
    const versions = w.acked.map((a) => a.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    // Without WAIT, an acknowledged write may be lost: count, do not assert (asynchronous replication).
    const present = new Set(stored.document.backends.map((b) => b.id));
    const lost = w.acked.filter((a) => !present.has(a.id));
    console.log(
      `sentinel failover without WAIT: ${w.acked.length} acked, ${lost.length} acked-then-lost, ${w.failed.length} reported failed`,
    );
  }, 90_000);

  it('writes the failover lost (applied by readers, never replicated): the next write goes above them and every reader converges on the new master', async () => {
    await healthy();
    const pub = publisher('fork');
    await pub.apply({ cluster: 'fork', backends: [be('seed', 1)] });
    const readers = await Promise.all([reader('fork', 'options'), reader('fork', 'url'), reader('fork', 'options')]);
    for (let i = 0; i < 5; i++) await pub.add(be(`x${i}`, 10 + i));
    const master = await topo.masterPort();
    const admin = new Redis({ host: '127.0.0.1', port: master });
    closers.push(async () => admin.disconnect());
    expect(await admin.call('WAIT', '2', '5000')).toBe(2);
    const replicated = (await pub.show())!.version;
    // Fence the replicas off deterministically: new connections need a password they do not have, then drop theirs.
    // Connections already open (the publisher's, the readers') stay authenticated and keep working.
    await admin.call('CONFIG', 'SET', 'requirepass', 'fence');
    await admin.call('CLIENT', 'KILL', 'TYPE', 'replica');
    const lostIds = ['lost0', 'lost1', 'lost2'];
    for (const [i, id] of lostIds.entries()) expect(await pub.add(be(id, 20 + i))).toBe(replicated + 1 + i);
    for (const r of readers) await until(() => r.source.version === replicated + 3, 'readers applied the unreplicated versions');
    admin.disconnect();
    await topo.nodes.find((n) => n.port === master)!.kill();
    await topo.waitForNewMaster(master);
    // The new master never had them: its snapshot is the replicated version.
    const after = (await pub.show())!;
    expect(after.version).toBe(replicated);
    expect(after.document.backends.map((b) => b.id)).not.toContain('lost0');
    // The next write lands above every version this publisher published, so readers holding a lost version take it.
    expect(await pub.add(be('after', 30))).toBe(replicated + 4);
    const stored = await converged(readers, pub);
    expect(stored.document.backends.map((b) => b.id)).toEqual(['seed', 'x0', 'x1', 'x2', 'x3', 'x4', 'after']);
  }, 90_000);

  it('with waitReplicas: 1 every acknowledged write survives a SIGKILL of the master; every other write was reported failed', async () => {
    // The old masters come back as replicas of the new one: two replicas in sync again.
    await healthy();
    const pub = publisher('wait', { waitReplicas: 1, waitTimeoutMs: 2000 });
    await pub.apply({ cluster: 'wait', backends: [be('seed', 1)] });
    const readers = await Promise.all([reader('wait', 'options'), reader('wait', 'url')]);
    const w = writer(pub, 'r');
    await until(() => w.acked.length >= 15, '15 replicated writes before the failover');
    await killMaster();
    const switched = Date.now();
    await until(() => w.acked.filter((a) => a.at > switched).length >= 10, '10 replicated writes on the new master', 30_000);
    await w.stop();
    const stored = await converged(readers, pub);
    const present = new Set(stored.document.backends.map((b) => b.id));
    // The law: acknowledged ⇒ present.
    expect(w.acked.filter((a) => !present.has(a.id))).toEqual([]);
    // Every write is either acknowledged or reported failed (a failed one may or may not be present).
    const ids = [...w.acked.map((a) => a.id), ...w.failed.map((f) => f.id)];
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of present) if (id !== 'seed') expect(ids).toContain(id);
    expect(w.failed.every((f) => ['NotReplicated', 'Unavailable', 'DuplicateIdentity', 'Conflict'].includes(f.code))).toBe(true);
  }, 120_000);

  it('a manual SENTINEL FAILOVER under continuous writes: the demoted master drops its clients, and the publisher and every reader follow the promoted replica', async () => {
    await healthy();
    const pub = publisher('manual');
    await pub.apply({ cluster: 'manual', backends: [be('seed', 1)] });
    const readers = await Promise.all([reader('manual', 'options'), reader('manual', 'url')]);
    const w = writer(pub, 'm');
    await until(() => w.acked.length >= 10, '10 writes before the failover');
    const old = await topo.masterPort();
    expect(await command(topo.sentinels[0]!.port, 'SENTINEL', 'FAILOVER', topo.name)).toBe('OK');
    await topo.waitForNewMaster(old);
    const switched = Date.now();
    await until(() => w.acked.filter((a) => a.at > switched).length >= 10, '10 writes on the promoted replica', 30_000);
    await w.stop();
    const stored = await converged(readers, pub);
    expect(stored.version).toBe(w.acked.at(-1)!.version);
    // Not asserted: no loss. Sentinel promotes the replica (REPLICAOF NO ONE) before it reconfigures the old
    // master, and a write the old master acknowledges in between is lost — asynchronous replication again.
    // Sentinel turns the old master into a replica of the promoted one (asynchronously, after the switch).
    await until(
      async () => ((await command(old, 'ROLE').catch(() => [])) as unknown[])[0] === 'slave',
      'the old master reconfigured as a replica',
      20_000,
    );
  }, 90_000);

  it('validation: sentinels without a name, an empty list, a bad host:port, both sentinels and url', () => {
    expect(thrown(() => new RedisMembership({ sentinels: ['127.0.0.1:26379'], cluster: 'x' })).message).toBe(
      'options.sentinelName: required with sentinels',
    );
    expect(thrown(() => new MembershipPublisher({ sentinels: [], sentinelName: 'm', cluster: 'x' })).message).toBe(
      'options.sentinels: must name at least one "host:port", got an array',
    );
    expect(thrown(() => new MembershipPublisher({ sentinels: ['localhost:0'], sentinelName: 'm', cluster: 'x' })).message).toContain(
      'options.sentinels: element 0 "localhost:0": must be "host:port"',
    );
    expect(thrown(() => new MembershipPublisher({ sentinels: ['h:1'], sentinelName: 'a b', cluster: 'x' })).message).toBe(
      'options.sentinelName: must be 1 to 128 characters of [A-Za-z0-9._-], got "a b"',
    );
    expect(thrown(() => new RedisMembership({ url: 'redis://h:1', sentinels: ['h:1'], sentinelName: 'm', cluster: 'x' })).message).toBe(
      'options.sentinels: give exactly one of url, sentinels, redisCluster (got url and sentinels)',
    );
    expect(thrown(() => new RedisMembership({ url: 'redis://h:1', sentinelName: 'm', cluster: 'x' })).message).toBe(
      'options.sentinelName: only with sentinels, got "m"',
    );
    expect(thrown(() => new RedisMembership({ url: 'redis+sentinel://h:1/', cluster: 'x' })).message).toContain(
      '(master name "": must be 1 to 128 characters',
    );
    expect(thrown(() => new RedisMembership({ url: 'redis+sentinel://h:1,h:99999/m', cluster: 'x' })).message).toContain(
      '(sentinels: element 1 "h:99999": must be "host:port"',
    );
    expect(thrown(() => new RedisMembership({ url: 'redis+sentinel://h:1/m?db=x', cluster: 'x' })).message).toContain(
      '(db: must be an integer in [0, 99], got "x")',
    );
    expect(thrown(() => new RedisMembership({ url: 'redis+sentinel://h:1/m?tls=1', cluster: 'x' })).message).toContain(
      '(query parameter "tls": unknown (accepted: db))',
    );
    expect(thrown(() => new MembershipPublisher({ url: 'redis://h:1', cluster: 'x', waitReplicas: -1 })).message).toContain(
      'options.waitReplicas',
    );
  });
});

describe('waitReplicas on a server without enough replicas', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('a write WAIT cannot confirm is stored and published, and reported NotReplicated naming the version and the count', async () => {
    const pub = new MembershipPublisher({
      url: redis.url,
      cluster: 'nr',
      waitReplicas: 1,
      waitTimeoutMs: 50,
      logger: captureLog('error').logger,
    });
    const seen: MembershipSnapshot[] = [];
    const source = new RedisMembership({ url: redis.url, cluster: 'nr', logger: captureLog('error').logger, startTimeoutMs: 200 });
    try {
      const err = await rejection(pub.apply({ cluster: 'nr', backends: [be('a', 1)] }));
      expect(err.code).toBe('NotReplicated');
      expect(err.message).toBe(
        'waitReplicas: version 1 was written on the master but acknowledged by 0 of 1 replicas within 50 ms; a failover before it replicates can lose it (read back with show())',
      );
      expect((await pub.show())?.version).toBe(1);
      await source.start((s) => seen.push(s));
      expect(seen.map((s) => s.version)).toEqual([1]);
      // Read-modify-write operations report it the same way, and the next version still follows.
      const drained = await rejection(pub.drain('a'));
      expect(drained.code === 'NotReplicated' && drained.message.startsWith('waitReplicas: version 2 was written')).toBe(true);
      await until(() => source.version === 2, 'notice 2');
    } finally {
      await source.close();
      await pub.close();
    }
  });
});

describe("the publisher's high-water floor (one server, Redis set back by hand)", () => {
  let redis: TestRedis;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

  it('after the stored value goes back in its lineage, the next write is above the highest version this publisher wrote; a new lineage starts at 1', async () => {
    const pub = new MembershipPublisher({ url: redis.url, cluster: 'hw', logger: captureLog('error').logger });
    const other = new MembershipPublisher({ url: redis.url, cluster: 'hw', logger: captureLog('error').logger });
    const seen: MembershipSnapshot[] = [];
    const source = new RedisMembership({ url: redis.url, cluster: 'hw', logger: captureLog('error').logger });
    try {
      expect(await pub.apply({ cluster: 'hw', backends: [be('a', 1)] })).toBe(1);
      const v1 = (await admin.get(pub.keys.snapshot))!;
      await source.start((s) => seen.push(s));
      expect(await pub.add(be('b', 2))).toBe(2);
      expect(await pub.add(be('c', 3))).toBe(3);
      await until(() => source.version === 3, 'reader at 3');
      // What a failover that lost versions 2 and 3 leaves behind: version 1 of the same lineage.
      await admin.set(pub.keys.snapshot, v1);
      expect(await pub.add(be('d', 4))).toBe(4);
      await until(() => source.version === 4, 'reader at 4');
      expect(seen.at(-1)!.backends.map((b) => b.id)).toEqual(['a', 'd']);
      // Another publisher has no high-water mark of its own beyond what it wrote: stored + 1.
      await admin.set(pub.keys.snapshot, v1);
      expect(await other.add(be('e', 5))).toBe(2);
      // Redis emptied: a new lineage, from version 1, whatever the publisher wrote before.
      await admin.flushall();
      expect(await pub.apply({ cluster: 'hw', backends: [be('z', 9)] })).toBe(1);
      await until(() => seen.at(-1)!.backends[0]!.id === 'z', 'the new lineage adopted');
      expect(seen.at(-1)!.version).toBe(1);
    } finally {
      await source.close();
      await pub.close();
      await other.close();
    }
  });
});
