/**
 * RedisMembership + MembershipPublisher against real redis-server processes
 * started on free ports (always stopped in afterAll).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { bindMembership } from '../../src/membership/source.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { freePort } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { rejection } from '../helpers/thrown.js';

const be = (id: string, port: number, extra: Record<string, unknown> = {}) => ({ id, address: `127.0.0.1:${port}`, ...extra });

interface Reader {
  source: RedisMembership;
  seen: MembershipSnapshot[];
  log: ReturnType<typeof captureLog>;
}
async function reader(
  url: string,
  cluster: string,
  extra: Partial<ConstructorParameters<typeof RedisMembership>[0]> = {},
): Promise<Reader> {
  const log = captureLog();
  const seen: MembershipSnapshot[] = [];
  const source = new RedisMembership({ url, cluster, logger: log.logger, backoff: { baseMs: 20, maxMs: 200 }, ...extra });
  await source.start((s) => seen.push(s));
  return { source, seen, log };
}

describe('Redis control plane', () => {
  let redis: TestRedis;
  let admin: Redis;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c().catch(() => {});
    admin?.disconnect();
    await redis?.stop();
  });
  const publisher = (cluster: string, extra: Record<string, unknown> = {}) => {
    const p = new MembershipPublisher({ url: redis.url, cluster, logger: captureLog().logger, ...extra });
    closers.push(() => p.close());
    return p;
  };
  const track = (r: Reader) => (closers.push(() => r.source.close()), r);

  it('writes are atomic: snapshot and notice carry the same version; ops return the new version', async () => {
    const pub = publisher('ops');
    expect(await pub.apply({ cluster: 'ops', backends: [be('a', 1), be('b', 2)] })).toBe(1);
    const r = track(await reader(redis.url, 'ops'));
    expect(r.source.version).toBe(1);
    expect(await pub.add(be('c', 3, { weight: 4 }))).toBe(2);
    expect(await pub.drain('a')).toBe(3);
    expect(await pub.setWeight('b', 9)).toBe(4);
    expect(await pub.undrain('a')).toBe(5);
    expect(await pub.remove('c')).toBe(6);
    await until(() => r.source.version === 6, 'reader at version 6');
    expect(r.seen.map((s) => s.version)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(r.seen.map((s) => s.backends.map((b) => `${b.id}:${b.status}:${b.weight}`))).toEqual([
      ['a:ready:1', 'b:ready:1'],
      ['a:ready:1', 'b:ready:1', 'c:ready:4'],
      ['a:draining:1', 'b:ready:1', 'c:ready:4'],
      ['a:draining:1', 'b:ready:9', 'c:ready:4'],
      ['a:ready:1', 'b:ready:9', 'c:ready:4'],
      ['a:ready:1', 'b:ready:9'],
    ]);
    expect((await pub.show())!.version).toBe(6);
    expect(r.log.find('version gap')).toHaveLength(0);
  });

  it('priority through Redis: under the default p2c:latency a priority-1 backend gets 0 of 200 picks while priority 0 is healthy, and takes over when it drains', async () => {
    const pub = publisher('tiers');
    await pub.apply({ cluster: 'tiers', backends: [be('api-1', 1, { weight: 2 }), be('api-2', 2), be('standby', 3, { priority: 1 })] });
    const log = captureLog();
    const balancer = new Balancer({ logger: log.logger });
    const binding = await bindMembership(new RedisMembership({ url: redis.url, cluster: 'tiers', logger: log.logger }), balancer, {
      logger: log.logger,
    });
    closers.push(async () => {
      await binding.close();
      balancer.close();
    });
    const router = balancer.router();
    const picks = (n: number): Map<string, number> => {
      const counts = new Map<string, number>();
      for (let i = 0; i < n; i++) {
        const lease = router.acquire();
        counts.set(lease.id, (counts.get(lease.id) ?? 0) + 1);
        lease.release('success', { latencyMs: 5 });
      }
      return counts;
    };
    const healthy = picks(200);
    expect(healthy.get('standby') ?? 0).toBe(0);
    expect((healthy.get('api-1') ?? 0) + (healthy.get('api-2') ?? 0)).toBe(200);
    // Both priority-0 backends drain: priority 0 has no members left, priority 1 takes every pick.
    await pub.drain('api-1');
    const version = await pub.drain('api-2');
    await until(() => router.refresh() === version, `router at version ${version}`);
    expect(picks(50).get('standby')).toBe(50);
    router.close();
  });

  it('a write failing validation changes nothing, in Redis and in readers', async () => {
    const pub = publisher('val');
    await pub.apply({ cluster: 'val', backends: [be('a', 1)] });
    const before = await admin.get(pub.keys.snapshot);
    await expect(pub.apply({ cluster: 'val', backends: [be('a', 1, { weight: -2 })] })).rejects.toThrow(
      'backends[0].weight: must be an integer in [1, 4294967295], got -2',
    );
    await expect(pub.add(be('a', 2))).rejects.toThrow('backend.id: "a" already exists in cluster "val"');
    await expect(pub.drain('nope')).rejects.toThrow('id: no backend "nope" in cluster "val"');
    await expect(pub.setWeight('a', 0)).rejects.toThrow('weight: must be an integer in [1, 4294967295], got 0');
    await expect(pub.apply({ cluster: 'other', backends: [] })).rejects.toThrow(
      'cluster: must be "val" (the cluster this publisher writes), got "other"',
    );
    await expect(pub.apply({ cluster: 'val', version: 1, backends: [] })).rejects.toThrow(
      'version: 1 is not newer than the stored version 1; nothing written',
    );
    await expect(pub.apply({ cluster: 'val', backends: [] }, { ifVersion: 5 })).rejects.toThrow(
      'ifVersion: the stored version is 1, not 5; nothing written',
    );
    // Each refusal carries the code callers branch on (and the CLI maps to its exit code).
    expect(await rejection(pub.drain('nope'))).toMatchObject({ code: 'NotFound' });
    expect(await rejection(pub.apply({ cluster: 'val', version: 1, backends: [] }))).toMatchObject({ code: 'Conflict' });
    expect(await rejection(pub.apply({ cluster: 'val', backends: [] }, { ifVersion: 5 }))).toMatchObject({ code: 'Conflict' });
    expect(await rejection(pub.add(be('a', 2)))).toMatchObject({ code: 'DuplicateIdentity' });
    expect(await rejection(pub.setWeight('a', 0))).toMatchObject({ code: 'InvalidWeight' });
    expect(await rejection(pub.apply({ cluster: 'val', backends: [] }, { ifVersion: -1 }))).toMatchObject({ code: 'InvalidConfig' });
    const tiny = publisher('val', { maxMessageBytes: 100 });
    await expect(tiny.apply({ cluster: 'val', backends: [be('a', 1), be('b', 2)] })).rejects.toThrow(
      /^document: \d+ bytes with its envelope exceeds the limit of 100 bytes/,
    );
    expect(await admin.get(pub.keys.snapshot)).toBe(before);
  });

  it('concurrent read-modify-write operations lose nothing', async () => {
    const pubs = [publisher('race'), publisher('race'), publisher('race')];
    await pubs[0]!.apply({ cluster: 'race', backends: [] });
    const versions = await Promise.all(Array.from({ length: 30 }, (_, i) => pubs[i % 3]!.add(be(`n${i}`, 1000 + i))));
    expect(new Set(versions).size).toBe(30);
    const shown = await pubs[0]!.show();
    expect(shown!.version).toBe(31);
    expect(shown!.document.backends.map((b) => b.id).sort()).toEqual(Array.from({ length: 30 }, (_, i) => `n${i}`).sort());
  });

  it('a lost notice (snapshot written without its notice) is healed by the version-gap re-read', async () => {
    const pub = publisher('gap');
    await pub.apply({ cluster: 'gap', backends: [be('a', 1)] });
    const r = track(await reader(redis.url, 'gap'));
    // Version 2 stored (same lineage) without a notice: the reader cannot know yet.
    const { lineage } = (await pub.show())!;
    await admin.set(
      pub.keys.snapshot,
      JSON.stringify({ version: 2, lineage, document: { cluster: 'gap', backends: [be('a', 1), be('lost', 2)] } }),
    );
    // Version 3 published normally (a delta on base 2): the reader holds 1, not 2 → re-read → it gets 3 from the snapshot.
    expect(await pub.add(be('b', 3))).toBe(3);
    await until(() => r.source.version === 3, 'reader at version 3');
    expect(r.log.find('delta notice is not based on the version held')).toHaveLength(1);
    expect(r.seen.at(-1)!.backends.map((b) => b.id)).toEqual(['a', 'lost', 'b']);
  });

  it('a notice published without its snapshot triggers a re-read; the snapshot is the truth', async () => {
    const pub = publisher('phantom');
    await pub.apply({ cluster: 'phantom', backends: [be('a', 1)] });
    const r = track(await reader(redis.url, 'phantom'));
    await admin.publish(pub.keys.channel, JSON.stringify({ version: 5, document: { cluster: 'phantom', backends: [be('ghost', 9)] } }));
    await until(() => r.log.find('notice skipped versions').length === 1, 'the gap re-read');
    expect(await pub.add(be('b', 2))).toBe(2);
    await until(() => r.source.version === 2, 'reader at version 2');
    expect(r.seen.flatMap((s) => s.backends.map((b) => b.id))).not.toContain('ghost');
  });

  it.each([
    ['malformed JSON', '{"version":2,"document":', 'notice: malformed JSON'],
    [
      'a wrong-typed field',
      JSON.stringify({ version: 2, document: { cluster: 'bad', backends: [be('a', 1, { priority: 'high' })] } }),
      'notice.document.backends[0].priority: must be an integer in [0, 4294967295], got "high"',
    ],
    [
      'a negative weight',
      JSON.stringify({ version: 2, document: { cluster: 'bad', backends: [be('a', 1, { weight: -2 })] } }),
      'notice.document.backends[0].weight: must be an integer in [1, 4294967295], got -2',
    ],
    [
      'a duplicate id',
      JSON.stringify({ version: 2, document: { cluster: 'bad', backends: [be('a', 1), be('a', 2)] } }),
      'notice.document.backends[1].id: duplicate id "a" (first at notice.document.backends[0])',
    ],
    [
      'an oversized message',
      JSON.stringify({ version: 2, document: { cluster: 'bad', backends: Array.from({ length: 40 }, (_, i) => be(`n${i}`, 100 + i)) } }),
      'exceeds the limit of 1024 bytes',
    ],
  ])('rejects %s as a notice and as a snapshot: nothing applied, reader keeps running', async (_name, payload, expected) => {
    const pub = publisher('bad');
    await admin.del(pub.keys.snapshot);
    await pub.apply({ cluster: 'bad', backends: [be('good', 1)] });
    const r = track(await reader(redis.url, 'bad', { maxMessageBytes: 1024 }));
    await admin.publish(pub.keys.channel, payload);
    await until(() => r.log.find('notice rejected').length === 1, 'the notice rejection');
    expect(String(r.log.find('notice rejected')[0]!['err'])).toContain(expected);
    // The same payload stored as the snapshot: a re-read rejects it too.
    await admin.set(pub.keys.snapshot, payload);
    r.source.resync('test');
    await until(() => r.log.find('snapshot rejected').length === 1, 'the snapshot rejection');
    expect(String(r.log.find('snapshot rejected')[0]!['err'])).toContain(
      expected.replace(/^notice/, 'snapshot').replaceAll('notice.', 'snapshot.'),
    );
    expect(r.source.version).toBe(1);
    expect(r.seen).toHaveLength(1);
    // Still alive: a good write (explicit version replaces the bad value) is applied.
    expect(await pub.apply({ cluster: 'bad', version: 7, backends: [be('good', 1), be('next', 2)] })).toBe(7);
    await until(() => r.source.version === 7, 'reader at version 7');
  });

  it('versions stay in [0, 2^53 − 1]: a reader applies 2^53 − 1; a stored 2^53 is refused naming snapshot.version, the last good state kept', async () => {
    const pub = publisher('range');
    expect(await pub.apply({ cluster: 'range', version: 9007199254740991, backends: [be('a', 1)] })).toBe(9007199254740991);
    const r = track(await reader(redis.url, 'range'));
    expect(r.source.version).toBe(9007199254740991);
    expect(r.seen.map((x) => x.version)).toEqual([9007199254740991]);
    const ceiling = await rejection(pub.add(be('b', 2)));
    expect(ceiling.code).toBe('CapacityExhausted');
    // What the old script stored after "cur + 1" rounded: refused, not crashed, nothing applied.
    const { lineage } = (await pub.show())!;
    await admin.set(
      pub.keys.snapshot,
      JSON.stringify({ version: 9007199254740992, lineage, document: { cluster: 'range', backends: [be('x', 9)] } }),
    );
    r.source.resync('test');
    await until(() => r.log.find('snapshot rejected').length === 1, 'the rejection');
    expect(r.log.find('snapshot rejected')[0]).toMatchObject({
      err: 'snapshot.version: must be an integer in [0, 9007199254740991], got 9007199254740992',
      code: 'Corrupt',
      field: 'snapshot.version',
    });
    expect(r.source.version).toBe(9007199254740991);
    expect(r.seen).toHaveLength(1);
    const shown = await rejection(pub.show());
    expect(shown.code).toBe('Corrupt');
  });

  it('identical malformed notices are logged once, then counted; a different one gets its own line', async () => {
    const pub = publisher('noisy');
    await pub.apply({ cluster: 'noisy', backends: [be('a', 1)] });
    const r = track(await reader(redis.url, 'noisy'));
    for (let i = 0; i < 5; i++) await admin.publish(pub.keys.channel, '{"version":2,"document":');
    await admin.publish(
      pub.keys.channel,
      JSON.stringify({ version: 2, document: { cluster: 'noisy', backends: [be('a', 1, { weight: -2 })] } }),
    );
    // Notices arrive in order: once version 2 is applied, every garbage notice before it was handled.
    expect(await pub.add(be('b', 2))).toBe(2);
    await until(() => r.source.version === 2, 'reader at version 2');
    const lines = r.log.find('notice rejected');
    expect(lines.map((l) => [l['err'], l['repeated']])).toEqual([
      ['notice: malformed JSON (Unexpected end of JSON input)', undefined],
      ['notice.document.backends[0].weight: must be an integer in [1, 4294967295], got -2', undefined],
    ]);
    // The count of the suppressed repeats comes with the end of the window (here: close).
    await r.source.close();
    const summary = r.log.find('notice rejected').filter((l) => l['repeated'] !== undefined);
    expect(summary.map((l) => [l['err'], l['repeated']])).toEqual([['notice: malformed JSON (Unexpected end of JSON input)', 4]]);
  });

  it('a reader holding one lineage adopts a snapshot of another whatever its version; an older one of its own lineage stays out', async () => {
    const pub = publisher('line');
    await pub.apply({ cluster: 'line', backends: [be('a', 1)] });
    await pub.add(be('b', 2));
    await pub.add(be('c', 3));
    const r = track(await reader(redis.url, 'line'));
    const first = r.source.lineage!;
    expect([r.source.version, first]).toEqual([3, (await pub.show())!.lineage]);
    // Same lineage, older (Redis restored from an older copy): kept out, with a warning.
    await admin.set(
      pub.keys.snapshot,
      JSON.stringify({ version: 2, lineage: first, document: { cluster: 'line', backends: [be('old', 1)] } }),
    );
    r.source.resync('test');
    await until(() => r.log.find('older than the version held in the same lineage').length === 1, 'the older-snapshot warning');
    expect(r.source.version).toBe(3);
    // The key deleted (Redis emptied): the next write draws a new lineage and starts at 1.
    await admin.del(pub.keys.snapshot);
    expect(await pub.apply({ cluster: 'line', backends: [be('x', 7)] })).toBe(1);
    const second = (await pub.show())!.lineage!;
    expect(second).not.toBe(first);
    await until(() => r.source.version === 1, 'reader adopting version 1 of the new lineage');
    expect([r.source.lineage, r.seen.at(-1)!.lineage, r.seen.at(-1)!.backends.map((b) => b.id)]).toEqual([second, second, ['x']]);
    const warned = r.log.find('membership lineage changed');
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, heldLineage: first, heldVersion: 3, lineage: second, version: 1 });
    expect(r.log.find('notice of another lineage')).toHaveLength(1);
  });

  it('problem says why no membership is in force: nothing stored (NotFound), a corrupt value (Corrupt); failFast rejects with Unavailable', async () => {
    const empty = track(await reader(redis.url, 'nothing-here'));
    expect(empty.seen).toHaveLength(0);
    expect(empty.source.problem?.code).toBe('NotFound');
    expect(empty.source.problem?.message).toBe(
      `redis ${redis.url}: no membership stored for cluster "nothing-here" (key poise:nothing-here:snapshot)`,
    );
    await admin.set('poise:corrupt:snapshot', '{"version":1,"document":{"cluster":"other","backends":[]}}');
    const corrupt = track(await reader(redis.url, 'corrupt'));
    expect(corrupt.source.problem?.code).toBe('Corrupt');
    expect(corrupt.source.problem?.message).toBe(
      'snapshot.document.cluster: must be "corrupt" (the cluster this reader follows), got "other"',
    );
    await admin.set('poise:corrupt:snapshot', '{"version":1,"document":{"cluster":"corrupt","backends":[]}}');
    corrupt.source.resync('test');
    await until(() => corrupt.source.version === 1, 'the corrupt value replaced');
    expect(corrupt.source.problem).toBeUndefined();
    const port = await freePort();
    const down = new RedisMembership({
      url: `redis://127.0.0.1:${port}`,
      cluster: 'down',
      failFast: true,
      startTimeoutMs: 5000,
      logger: captureLog().logger,
    });
    const err = await rejection(down.start(() => {}));
    expect(err.code).toBe('Unavailable');
    expect(err.message).toBe(
      `redis redis://127.0.0.1:${port}: unavailable at start (connect ECONNREFUSED 127.0.0.1:${port}), and no fallbackFile or lastKnown membership to run from`,
    );
  });

  it('Redis unavailable at start: runs from the fallback file, then switches to Redis when it appears', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-fallback-'));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const fallbackFile = path.join(dir, 'members.yaml');
    writeFileSync(fallbackFile, 'cluster: late\nbackends:\n  - { id: fb, address: "127.0.0.1:9" }\n');
    const lastKnown = path.join(dir, 'last-known.json');
    const port = await freePort();
    const url = `redis://127.0.0.1:${port}`;
    const r = track(await reader(url, 'late', { fallbackFile, lastKnown }));
    expect(r.seen.map((s) => [s.version, s.backends.map((b) => b.id)])).toEqual([[0, ['fb']]]);
    expect(r.log.find('Redis unavailable at start; running from the fallback file')).toHaveLength(1);
    // Redis comes up on the reader's port and gets a document.
    const onPort = await startRedis({ port });
    closers.push(() => onPort.stop());
    const pub = new MembershipPublisher({
      url,
      cluster: 'late',
      logger: captureLog().logger,
      redisOptions: { retryStrategy: (t) => (t > 50 ? null : 50) },
    });
    closers.push(() => pub.close());
    expect(await pub.apply({ cluster: 'late', backends: [be('real', 1)] })).toBe(1);
    await until(() => r.source.version === 1, 'reader switching to Redis version 1');
    expect(r.seen.at(-1)!.backends.map((b) => b.id)).toEqual(['real']);
    await until(() => {
      try {
        return JSON.parse(readFileSync(lastKnown, 'utf8')).version === 1;
      } catch {
        return false;
      }
    }, 'the last known snapshot file');
    // A new reader with Redis down starts from the last known snapshot (exact version), not the fallback.
    await onPort.kill();
    const r2 = track(await reader(url, 'late', { fallbackFile, lastKnown }));
    expect(r2.seen.map((s) => [s.version, s.backends.map((b) => b.id)])).toEqual([[1, ['real']]]);
    expect(r2.log.find('running from the last known snapshot')).toHaveLength(1);
  });

  it('a subscriber connection killed by the server re-subscribes and re-reads; a write in the gap is not lost', async () => {
    const pub = publisher('kick');
    await pub.apply({ cluster: 'kick', backends: [be('a', 1)] });
    const r = track(await reader(redis.url, 'kick'));
    // Drop every pub/sub connection, then write at once: the notice is published while the
    // reader is (most likely) unsubscribed; the re-read after re-subscribing must bring it in.
    expect(Number(await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub'))).toBeGreaterThanOrEqual(1);
    expect(await pub.add(be('b', 2))).toBe(2);
    await until(
      () => r.source.version === 2 && r.log.find('subscribed; reading the snapshot').length >= 2,
      'reader re-subscribed at version 2',
    );
    expect(r.seen.at(-1)!.backends.map((b) => b.id)).toEqual(['a', 'b']);
  });

  it('Redis killed and restarted with its data: readers reconnect on their own and converge, nothing skipped', async () => {
    const durable = await startRedis({ persist: true });
    closers.push(() => durable.stop());
    const pub = new MembershipPublisher({ url: durable.url, cluster: 'crash', logger: captureLog().logger });
    closers.push(() => pub.close());
    await pub.apply({ cluster: 'crash', backends: [be('a', 1)] });
    // A short warning window, so the outage below outlasts one.
    const readers = await Promise.all([0, 1, 2].map(async () => track(await reader(durable.url, 'crash', { warnWindowMs: 500 }))));
    expect(await pub.add(be('b', 2))).toBe(2);
    await until(() => readers.every((r) => r.source.version === 2), 'every reader at version 2');

    await durable.kill();
    // ioredis retries every 20 .. 200 ms while Redis is down; each reader logs one line, then, when the window ends, one
    // line with the count of the retries it did not log (rate-limited, count at the window's end).
    const reconnecting = (r: Reader) => r.log.find('redis subscriber reconnecting');
    await until(() => readers.every((r) => reconnecting(r).some((x) => x['repeated'] !== undefined)), "every reader's window summary");
    for (const r of readers) {
      const [first, summary] = reconnecting(r);
      expect(first!['repeated']).toBeUndefined();
      expect(summary).toMatchObject({ repeated: expect.any(Number), windowMs: 500 });
      expect(summary!['repeated']).toBeGreaterThanOrEqual(1);
    }
    await durable.restart();
    // Writes after the restart; the readers were never restarted.
    const ids = ['c', 'd', 'e'];
    let last = 0;
    for (const [i, id] of ids.entries()) last = await pub.add(be(id, 3 + i));
    expect(last).toBe(5);
    await until(() => readers.every((r) => r.source.version === 5), 'every reader at version 5');
    for (const r of readers) {
      expect(r.seen.at(-1)!.backends.map((b) => b.id)).toEqual(['a', 'b', 'c', 'd', 'e']);
      // Strictly increasing, no version applied twice.
      const vs = r.seen.map((s) => s.version);
      expect(vs).toEqual([...new Set(vs)].sort((x, y) => x - y));
      expect(r.log.find('subscribed; reading the snapshot').length).toBeGreaterThanOrEqual(2);
    }
  });

  it("Redis restarted empty: a re-apply above the readers' version brings them along", async () => {
    const volatile = await startRedis();
    closers.push(() => volatile.stop());
    const pub = new MembershipPublisher({ url: volatile.url, cluster: 'wipe', logger: captureLog().logger });
    closers.push(() => pub.close());
    await pub.apply({ cluster: 'wipe', backends: [be('a', 1)] });
    await pub.add(be('b', 2));
    const r = track(await reader(volatile.url, 'wipe'));
    expect(r.source.version).toBe(2);
    await volatile.kill();
    await volatile.restart();
    await until(() => r.log.find('no snapshot stored for this cluster yet').length > 0, 'the reader seeing the empty Redis');
    expect(await pub.apply({ cluster: 'wipe', version: 3, backends: [be('a', 1), be('b', 2), be('c', 3)] })).toBe(3);
    await until(() => r.source.version === 3, 'reader at version 3');
    expect(r.seen.at(-1)!.backends.map((b) => b.id)).toEqual(['a', 'b', 'c']);
  });

  it('passwords in the URL pass through to ioredis', async () => {
    const secured = await startRedis({ password: 'p@ss word' });
    closers.push(() => secured.stop());
    const pub = new MembershipPublisher({ url: secured.url, cluster: 'auth', logger: captureLog().logger });
    closers.push(() => pub.close());
    expect(await pub.apply({ cluster: 'auth', backends: [be('a', 1)] })).toBe(1);
    const r = track(await reader(secured.url, 'auth'));
    expect(r.source.version).toBe(1);
    const wrong = new MembershipPublisher({
      url: secured.url.replace('p%40ss', 'nope'),
      cluster: 'auth',
      logger: captureLog().logger,
      redisOptions: { maxRetriesPerRequest: 0, retryStrategy: () => null },
    });
    closers.push(() => wrong.close());
    await expect(wrong.show()).rejects.toThrow(/WRONGPASS|invalid username-password/);
  });

  it('rediss:// (TLS) passes through to ioredis, with the CA in redisOptions', async () => {
    const secure = await startRedis({ tls: true, password: 'tls-secret' });
    closers.push(() => secure.stop());
    expect(secure.url.startsWith('rediss://')).toBe(true);
    const redisOptions = { tls: { ca: secure.ca } };
    const pub = new MembershipPublisher({ url: secure.url, cluster: 'tls', logger: captureLog().logger, redisOptions });
    closers.push(() => pub.close());
    expect(await pub.apply({ cluster: 'tls', backends: [be('a', 1)] })).toBe(1);
    const r = track(await reader(secure.url, 'tls', { redisOptions }));
    expect(r.source.version).toBe(1);
    expect(await pub.drain('a')).toBe(2);
    await until(() => r.source.version === 2, 'TLS reader at version 2');
  });
});
