/**
 * Redis Cluster failover: 3 masters with one replica each (6 redis-server
 * processes on free ports, `redis-cli --cluster create --cluster-replicas 1`,
 * cluster-node-timeout 2000 ms), always killed in afterAll.
 *
 * The master that owns the `{cluster}` slot is SIGKILLed under continuous
 * writes; its replica is promoted by the cluster itself (no sentinels). The
 * laws, as for Sentinel (redis-sentinel.test.ts):
 * - the publisher and every reader (RedisMembership with redisCluster,
 *   SSUBSCRIBE on the slot's master) follow the promoted replica, and every
 *   reader ends on the version and document it stores — none stays behind;
 * - with waitReplicas: 1 (WAIT 1 in the script's pipeline, on the slot's
 *   master), every acknowledged write is present after the failover: a
 *   Cluster promotes a replica of the dead master, and its only replica here
 *   acknowledged every acknowledged write; every other write was reported
 *   failed to the writer.
 * - without WAIT, acknowledged writes may be lost (asynchronous
 *   replication): counted, and readers converge all the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { MembershipPublisher, type MembershipPublisherOptions } from '../../src/membership/redis-publisher.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { converged, writer, type Reader } from '../helpers/membership-writer.js';
import { command, startCluster, type ClusterTopology } from '../helpers/redis-topology.js';

describe('Redis Cluster with replicas: the slot master SIGKILLed under continuous writes', () => {
  let topo: ClusterTopology;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    topo = await startCluster({ masters: 3, replicas: 1 });
  }, 90_000);
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c().catch(() => {});
    await topo?.stop();
  });
  const publisher = (cluster: string, extra: Partial<MembershipPublisherOptions> = {}) => {
    const p = new MembershipPublisher({ redisCluster: topo.addresses, cluster, logger: captureLog('warn').logger, ...extra });
    closers.push(() => p.close());
    return p;
  };
  const reader = async (cluster: string): Promise<Reader> => {
    const seen: MembershipSnapshot[] = [];
    const log = captureLog('debug');
    const source = new RedisMembership({ redisCluster: topo.addresses, cluster, logger: log.logger, backoff: { baseMs: 20, maxMs: 200 } });
    closers.push(() => source.close());
    await source.start((s) => seen.push(s));
    return { source, seen, log };
  };
  const slotOf = async (cluster: string) => Number(await command(topo.nodes.find((n) => n.running)!.port, 'CLUSTER', 'KEYSLOT', cluster));
  /** Kills the master of `cluster`'s slot; resolves with the old and the promoted port. */
  const killOwner = async (cluster: string) => {
    const slot = await slotOf(cluster);
    const old = await topo.ownerOf(slot);
    await topo.nodes.find((n) => n.port === old)!.kill();
    return { old, now: await topo.waitForNewOwner(slot, old, 45_000) };
  };
  /** Restarts killed nodes (they rejoin as replicas of the promoted masters) and waits for every replica in sync. */
  const healthy = async () => {
    for (const n of topo.nodes) if (!n.running) await n.restart();
    await until(
      async () => {
        const info = String(await command(topo.nodes[0]!.port, 'CLUSTER', 'INFO').catch(() => ''));
        return info.includes('cluster_state:ok') && info.includes('cluster_known_nodes:6');
      },
      'six nodes known, cluster ok',
      30_000,
    );
    await topo.waitForReplicasInSync(30_000);
  };
  it('with waitReplicas: 1 the publisher and every reader follow the promoted replica; every acknowledged write is present, every other one was reported failed', async () => {
    const cluster = 'cfo';
    const pub = publisher(cluster, { waitReplicas: 1, waitTimeoutMs: 2000 });
    await pub.apply({ cluster, backends: [{ id: 'seed', address: '127.0.0.1:1' }] });
    const readers = await Promise.all([reader(cluster), reader(cluster), reader(cluster)]);
    const w = writer(pub, 'w');
    await until(() => w.acked.length >= 15, '15 replicated writes before the failover', 20_000);
    const { old, now } = await killOwner(cluster);
    expect(now).not.toBe(old);
    const switched = Date.now();
    // The promoted master has no replica until the old master comes back (as its replica): until then every write is NotReplicated.
    await topo.nodes.find((n) => n.port === old)!.restart();
    await until(() => w.acked.filter((a) => a.at > switched).length >= 10, '10 writes replicated by the promoted master', 45_000);
    await w.stop();
    const stored = await converged(readers, pub, { deadlineMs: 30_000, resubscribed: true });
    const present = new Set(stored.document.backends.map((b) => b.id));
    // Acknowledged (replicated) writes survived the failover: every one of them.
    expect(w.acked.filter((a) => !present.has(a.id))).toEqual([]);
    // Acknowledged versions only grow, across the failover too.
    const versions = w.acked.map((a) => a.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    // Every write is acknowledged or reported failed with a code the caller can branch on; a failed one may or may not be stored.
    // DuplicateIdentity, as in the Sentinel test: ioredis re-sends a script whose reply the killed master never sent
    // (autoResendUnfulfilledCommands); when that first run was applied and replicated, the re-sent one finds the
    // version moved, the publisher re-reads, and its own add finds the id already there. (A CI run under load saw
    // a code outside the first three; listed here with the entries, so the next one names itself.)
    expect(w.failed.filter((f) => !['NotReplicated', 'Unavailable', 'Conflict', 'DuplicateIdentity'].includes(f.code))).toEqual([]);
    expect(w.acked.length + w.failed.length).toBeGreaterThanOrEqual(25);
    console.log(
      `cluster failover with WAIT 1: ${w.acked.length} acked (all present), ${w.failed.length} reported failed (${[...new Set(w.failed.map((f) => f.code))].join(', ')})`,
    );
  }, 150_000);

  it('without WAIT: the old master rejoins as a replica; a second failover under continuous writes; every reader converges on the stored snapshot', async () => {
    await healthy();
    const cluster = 'cfo2';
    const pub = publisher(cluster);
    await pub.apply({ cluster, backends: [{ id: 'seed', address: '127.0.0.1:1' }] });
    const readers = await Promise.all([reader(cluster), reader(cluster), reader(cluster)]);
    const w = writer(pub, 'n');
    await until(() => w.acked.length >= 30, '30 writes before the failover', 20_000);
    const { old, now } = await killOwner(cluster);
    expect(now).not.toBe(old);
    const switched = Date.now();
    await until(() => w.acked.filter((a) => a.at > switched).length >= 20, '20 writes acknowledged by the promoted replica', 45_000);
    await w.stop();
    const stored = await converged(readers, pub, { deadlineMs: 30_000, resubscribed: true });
    // The publisher followed: its last acknowledged write is the stored version, on the promoted master.
    expect(stored.version).toBe(w.acked.at(-1)!.version);
    const present = new Set(stored.document.backends.map((b) => b.id));
    const lost = w.acked.filter((a) => !present.has(a.id));
    console.log(
      `cluster failover without WAIT: ${w.acked.length} acked, ${lost.length} acked-then-lost, ${w.failed.length} reported failed`,
    );
  }, 150_000);
});
