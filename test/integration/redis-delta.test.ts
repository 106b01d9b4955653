/**
 * Delta notices against a real redis-server (started on a free port, always
 * stopped): the exact notice format, convergence of readers under random
 * operations from two publishers, a notice lost while the subscriber is
 * disconnected, every kind of bad delta (nothing applied, the snapshot
 * re-read), and a mixed fleet of delta and full-payload publishers.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { isPoiseError } from '../../src/core/errors.js';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { compactSpec } from '../../src/core/spec-fields.js';
import { MembershipPublisher, type MembershipPublisherOptions } from '../../src/membership/redis-publisher.js';
import { decodeEnvelope } from '../../src/membership/redis-keys.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

const be = (id: string, port: number, extra: Record<string, unknown> = {}) => ({ id, address: `127.0.0.1:${port}`, ...extra });
const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');

interface Reader {
  source: RedisMembership;
  seen: MembershipSnapshot[];
  log: ReturnType<typeof captureLog>;
}

/** The document part of a stored snapshot, as the exact text the script stored. */
function storedDocumentText(stored: string): string {
  const m = /^\{"version":\d+,"lineage":"[0-9a-f]{32}","document":(.*)\}$/.exec(stored);
  if (m === null) throw new Error(`not a stored snapshot: ${stored.slice(0, 80)}`);
  return m[1]!;
}

/** What a reader routes on, in the stored (compact) form. */
const compact = (s: MembershipSnapshot) => s.backends.map((b) => compactSpec(b as Parameters<typeof compactSpec>[0]));

describe('delta notices', () => {
  let redis: TestRedis;
  let admin: Redis;
  let tap: Redis;
  const notices: { channel: string; message: string }[] = [];
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    tap = new Redis(redis.url);
    tap.on('pmessage', (_p: string, channel: string, message: string) => notices.push({ channel, message }));
    await tap.psubscribe('poise:*:notices');
  });
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c().catch(() => {});
    tap?.disconnect();
    admin?.disconnect();
    await redis?.stop();
  });
  const publisher = (cluster: string, extra: Partial<MembershipPublisherOptions> = {}) => {
    const p = new MembershipPublisher({ url: redis.url, cluster, logger: captureLog('warn').logger, ...extra });
    closers.push(() => p.close());
    return p;
  };
  const reader = async (cluster: string, extra: Partial<ConstructorParameters<typeof RedisMembership>[0]> = {}): Promise<Reader> => {
    const log = captureLog();
    const seen: MembershipSnapshot[] = [];
    const source = new RedisMembership({ url: redis.url, cluster, logger: log.logger, backoff: { baseMs: 20, maxMs: 200 }, ...extra });
    closers.push(() => source.close());
    await source.start((s) => seen.push(s));
    return { source, seen, log };
  };
  const noticesOf = (pub: MembershipPublisher) => notices.filter((n) => n.channel === pub.keys.channel).map((n) => n.message);
  /** Waits until the tap saw `count` notices of `pub` (the tap is one more subscriber; Redis delivers in publish order). */
  const tapped = async (pub: MembershipPublisher, count: number) => {
    await until(() => noticesOf(pub).length >= count, `${count} notices of ${pub.keys.channel}`);
    return noticesOf(pub);
  };

  it('every single-backend operation publishes {version, lineage, base, ops, digest}; the digest is SHA-1 of the stored document', async () => {
    const pub = publisher('fmt');
    expect(await pub.apply({ cluster: 'fmt', backends: [be('a', 1), be('b', 2)] })).toBe(1);
    const { lineage } = (await pub.show())!;
    const first = (await admin.get(pub.keys.snapshot))!;
    const ops = [
      () => pub.add(be('c', 3, { weight: 4, locality: 'z1' })),
      () => pub.drain('a'),
      () => pub.setWeight('b', 9),
      () => pub.undrain('a'),
      () => pub.remove('c'),
    ];
    const stored: string[] = [];
    for (const op of ops) {
      await op();
      stored.push((await admin.get(pub.keys.snapshot))!);
    }
    const got = await tapped(pub, 6);
    // The first write (into an empty key: no base) publishes the whole snapshot, byte for byte what it stored.
    expect(got[0]).toBe(first);
    expect(JSON.parse(got[0]!)).toEqual({ version: 1, lineage, document: { cluster: 'fmt', backends: [be('a', 1), be('b', 2)] } });
    const expectedOps = [
      [{ op: 'add', backend: be('c', 3, { weight: 4, locality: 'z1' }) }],
      [{ op: 'replace', backend: be('a', 1, { status: 'draining' }) }],
      [{ op: 'replace', backend: be('b', 2, { weight: 9 }) }],
      [{ op: 'replace', backend: be('a', 1) }],
      [{ op: 'remove', id: 'c' }],
    ];
    for (let i = 0; i < ops.length; i++) {
      const version = i + 2;
      expect(got[i + 1]).toBe(
        `{"version":${version},"lineage":"${lineage}","base":${version - 1},"ops":${JSON.stringify(expectedOps[i])},"digest":"${sha1(storedDocumentText(stored[i]!))}"}`,
      );
    }
  });

  it('apply publishes a delta when its ops are at most half the document, and the whole snapshot for a reorder or a large change', async () => {
    const pub = publisher('app');
    const many = Array.from({ length: 20 }, (_, i) => be(`n${i}`, 100 + i));
    await pub.apply({ cluster: 'app', backends: many });
    const r = await reader('app');
    // One weight changed, one removed, one appended: 3 ops, a delta.
    const small = [...many.slice(1, 5), be('n5', 105, { weight: 7 }), ...many.slice(6), be('x', 999)];
    expect(await pub.apply({ cluster: 'app', backends: small })).toBe(2);
    // The same backends in another order: not expressible as ops, the whole snapshot.
    expect(await pub.apply({ cluster: 'app', backends: [...small].reverse() })).toBe(3);
    // Every backend's weight changed: 20 replace ops are larger than half the document, the whole snapshot.
    expect(await pub.apply({ cluster: 'app', backends: many.map((b) => ({ ...b, weight: 3 })) })).toBe(4);
    // A conditional apply with ifVersion: a delta against exactly that version.
    expect(await pub.apply({ cluster: 'app', backends: many }, { ifVersion: 4 })).toBe(5);
    const kinds = (await tapped(pub, 5)).map((m) => (m.includes('"base":') ? 'delta' : 'full'));
    expect(kinds).toEqual(['full', 'delta', 'full', 'full', 'full']);
    await until(() => r.source.version === 5, 'reader at version 5');
    expect(r.seen.map((s) => s.version)).toEqual([1, 2, 3, 4, 5]);
    expect(compact(r.seen[1]!)).toEqual(small);
    expect(compact(r.seen[2]!)).toEqual([...small].reverse());
    expect(compact(r.seen[4]!)).toEqual(many);
    expect(r.log.find('re-reading the snapshot')).toEqual([]);
  });

  it('an apply whose delta lost a race to another writer still applies (as the whole snapshot), and readers converge', async () => {
    const pub = publisher('lost-race');
    const other = publisher('lost-race');
    const many = Array.from({ length: 10 }, (_, i) => be(`n${i}`, 100 + i));
    await pub.apply({ cluster: 'lost-race', backends: many });
    const r = await reader('lost-race');
    // 60 rounds of: two applies of small changes and a drain, concurrently; every call resolves.
    for (let round = 0; round < 60; round++) {
      const versions = await Promise.all([
        pub.apply({ cluster: 'lost-race', backends: many.map((b, i) => (i === round % 10 ? { ...b, weight: round + 2 } : b)) }),
        other.apply({ cluster: 'lost-race', backends: [...many, be(`r${round}`, 5000 + round)] }),
        other.drain(`n${(round + 3) % 10}`).catch((e: unknown) => (isPoiseError(e, 'NotFound') ? -1 : Promise.reject(e))),
      ]);
      expect(versions.every((v) => v === -1 || v > 1)).toBe(true);
    }
    const stored = (await pub.show())!;
    await until(() => r.source.version === stored.version, `reader at version ${stored.version}`);
    expect(compact(r.seen.at(-1)!)).toEqual(stored.document.backends);
  });

  it('two publishers, 240 random operations: every reader applies every version in order and ends on exactly the stored document', async () => {
    const cluster = 'conv';
    const pubs = [publisher(cluster), publisher(cluster)];
    await pubs[0]!.apply({ cluster, backends: Array.from({ length: 8 }, (_, i) => be(`s${i}`, 100 + i)) });
    const readers = await Promise.all([reader(cluster), reader(cluster), reader(cluster)]);
    let next = 0;
    const run = async (p: number, seed: number) => {
      const rng = new Rng(seed);
      const pub = pubs[p]!;
      const outcome = { ok: 0, notFound: 0, duplicate: 0 };
      for (let i = 0; i < 120; i++) {
        const { document } = (await pub.show())!;
        const ids = document.backends.map((b) => b.id);
        const pickId = () => ids[rng.below(Math.max(ids.length, 1))] ?? 'none';
        const kind = rng.below(7);
        try {
          if (kind === 0 || ids.length < 3) await pub.add(be(`p${p}-${next++}`, 1000 + rng.below(5000), { weight: 1 + rng.below(50) }));
          else if (kind === 1) await pub.remove(pickId());
          else if (kind === 2) await pub.drain(pickId());
          else if (kind === 3) await pub.undrain(pickId());
          else if (kind === 4) await pub.setWeight(pickId(), 1 + rng.below(1000));
          else if (kind === 5) {
            // A small apply: one backend's priority changed (a delta when the ops are small enough).
            const j = rng.below(document.backends.length);
            const backends = document.backends.map((b, k) => (k === j ? { ...b, priority: rng.below(3) } : b));
            await pub.apply({ cluster, backends });
          } else {
            // A reorder: always the whole snapshot.
            await pub.apply({ cluster, backends: [...document.backends].reverse() });
          }
          outcome.ok++;
        } catch (err) {
          // The other publisher removed the chosen id (or added it) between show() and the operation: refused, nothing written.
          if (isPoiseError(err, 'NotFound')) outcome.notFound++;
          else if (isPoiseError(err, 'DuplicateIdentity')) outcome.duplicate++;
          else throw err;
        }
      }
      return outcome;
    };
    const outcomes = await Promise.all([run(0, 101), run(1, 202)]);
    const stored = (await pubs[0]!.show())!;
    expect(stored.version).toBe(1 + outcomes[0]!.ok + outcomes[1]!.ok);
    expect(outcomes[0]!.ok + outcomes[1]!.ok).toBeGreaterThanOrEqual(200);
    for (const r of readers) {
      await until(() => r.source.version === stored.version, `reader at version ${stored.version}`);
      // Every version, in order, each from its notice: a delta on the version held, or the whole snapshot.
      expect(r.seen.map((s) => s.version)).toEqual(Array.from({ length: stored.version }, (_, k) => k + 1));
      expect(compact(r.seen.at(-1)!)).toEqual(stored.document.backends);
      expect(r.log.find('re-reading the snapshot')).toEqual([]);
      expect(r.log.find('rejected')).toEqual([]);
    }
    const published = noticesOf(pubs[0]!);
    const deltas = published.filter((m) => m.includes('"base":')).length;
    // Every operation but the reorders (and the first write) is a delta; the reorders are the whole snapshot.
    expect(deltas).toBeGreaterThan(published.length / 2);
    expect(published.length - deltas).toBeGreaterThan(1);
  }, 120_000);

  it('a notice dropped while the subscriber connection is killed heals: resubscribe, re-read, and deltas apply again afterwards', async () => {
    const cluster = 'drop';
    const pub = publisher(cluster);
    await pub.apply({ cluster, backends: [be('a', 1), be('b', 2)] });
    const r = await reader(cluster, { redisOptions: { connectionName: 'drop-reader' } });
    const subscriberId = async () => {
      const list = String(await admin.client('LIST'));
      const line = list.split('\n').find((l) => l.includes(' name=drop-reader ') && /flags=\S*P/.test(l));
      return /^id=(\d+)/.exec(line ?? '')?.[1];
    };
    for (let round = 0; round < 20; round++) {
      const before = r.log.find('subscribed; reading the snapshot').length;
      // Kill the reader's subscriber connection; the change written right after falls in the gap (the reader waits >= 20 ms to reconnect).
      const id = await subscriberId();
      expect(id).toMatch(/^\d+$/);
      expect(Number(await admin.client('KILL', 'ID', id!))).toBe(1);
      const v = await pub.setWeight('a', round + 2);
      await until(() => r.log.find('subscribed; reading the snapshot').length > before, 'the re-subscription');
      await until(() => r.source.version === v, `reader at version ${v}`);
      // After the re-read, the next change is a delta on the version held.
      const w = await pub.setWeight('b', round + 2);
      await until(() => r.source.version === w, `reader at version ${w}`);
      expect(compact(r.seen.at(-1)!)).toEqual((await pub.show())!.document.backends);
    }
    expect(r.log.find('rejected')).toEqual([]);
  });

  describe('a bad delta: nothing of it applied, the snapshot re-read', () => {
    /**
     * The reader holds version 1 (a, b). Version 2 is stored as (a, "truth")
     * without a notice; then the bad delta for version 2 is published. A
     * reader that re-reads gets (a, truth); a reader that applied the delta,
     * or that ignored it, would not.
     */
    const cases: [string, (l: string, digestOf: (doc: unknown) => string) => string, string][] = [
      ['malformed JSON', (l) => `{"version":2,"lineage":"${l}","base":1,"ops":[`, 'notice: malformed JSON'],
      [
        'an unknown operation',
        (l) => `{"version":2,"lineage":"${l}","base":1,"ops":[{"op":"rename","id":"b"}],"digest":"${'0'.repeat(40)}"}`,
        'notice.ops[0].op: unknown operation "rename" (accepted: remove, replace, add)',
      ],
      [
        'an unknown field',
        (l) => `{"version":2,"lineage":"${l}","base":1,"ops":[],"digest":"${'0'.repeat(40)}","extra":1}`,
        'notice.extra: unknown field of a delta notice',
      ],
      [
        'a base not below the version',
        (l) => `{"version":2,"lineage":"${l}","base":2,"ops":[],"digest":"${'0'.repeat(40)}"}`,
        'notice.base: must be in [1, version − 1] = [1, 1], got 2',
      ],
      [
        'a negative weight in an op',
        (l) =>
          `{"version":2,"lineage":"${l}","base":1,"ops":[{"op":"replace","backend":{"id":"b","address":"127.0.0.1:2","weight":-2}}],"digest":"${'0'.repeat(40)}"}`,
        'notice.ops[0].backend.weight: must be an integer in [1, 4294967295], got -2',
      ],
      [
        'a remove of a backend the document does not have',
        (l) => `{"version":2,"lineage":"${l}","base":1,"ops":[{"op":"remove","id":"zz"}],"digest":"${'0'.repeat(40)}"}`,
        'notice.ops[0].id: no backend "zz" in the held document',
      ],
      [
        'an add that duplicates an id (an invalid document)',
        (l, d) =>
          `{"version":2,"lineage":"${l}","base":1,"ops":[{"op":"add","backend":{"id":"a","address":"127.0.0.1:9"}}],"digest":"${d({ cluster: 'bad', backends: [be('a', 1), be('b', 2), be('a', 9)] })}"}`,
        'notice.document.backends[2].id: duplicate id "a" (first at notice.document.backends[0])',
      ],
      [
        'an add that breaks the locality weight law (an invalid document)',
        (l, d) =>
          `{"version":2,"lineage":"${l}","base":1,"ops":[{"op":"add","backend":{"id":"c","address":"127.0.0.1:3","localityWeight":5}}],"digest":"${d({ cluster: 'bad', backends: [be('a', 1), be('b', 2), be('c', 3, { localityWeight: 5 })] })}"}`,
        'notice.document.backends[2].localityWeight: 5 contradicts 1 at notice.document.backends[0] for priority 0, locality ""',
      ],
      [
        'valid ops whose result does not match the digest',
        (l) => `{"version":2,"lineage":"${l}","base":1,"ops":[{"op":"remove","id":"b"}],"digest":"${'0'.repeat(40)}"}`,
        'notice.digest: the ops applied to the held document give another document than the publisher stored',
      ],
    ];
    /** A reader holding version 1 (a, b) of `cluster`, and version 2 (a, truth) stored without a notice. */
    const holdingOne = async (cluster: string) => {
      const pub = publisher(cluster);
      await admin.del(pub.keys.snapshot);
      await pub.apply({ cluster, backends: [be('a', 1), be('b', 2)] });
      const { lineage } = (await pub.show())!;
      const r = await reader(cluster);
      await admin.set(
        pub.keys.snapshot,
        JSON.stringify({ version: 2, lineage, document: { cluster, backends: [be('a', 1), be('truth', 7)] } }),
      );
      return { pub, r, lineage: lineage! };
    };
    it.each(cases)('%s', async (_name, make, expected) => {
      const { pub, r, lineage } = await holdingOne('bad');
      await admin.publish(
        pub.keys.channel,
        make(lineage, (doc) => sha1(JSON.stringify(doc))),
      );
      await until(() => r.source.version === 2, 'reader at version 2 (from the snapshot)');
      expect(r.log.find('notice rejected').map((l) => String(l['err']))).toEqual([expect.stringContaining(expected)]);
      expect(r.log.find('notice rejected')[0]!['code']).toBe('Corrupt');
      expect(r.seen.map((s) => s.version)).toEqual([1, 2]);
      expect(compact(r.seen[1]!)).toEqual([be('a', 1), be('truth', 7)]);
      await r.source.close();
    });

    it.each([
      ['a wrong base (the reader holds 1, the delta is on 4)', (l: string) => ({ version: 5, lineage: l, base: 4 })],
      ['another lineage', (_l: string) => ({ version: 2, lineage: 'f'.repeat(32), base: 1 })],
    ])('%s: not applied, the snapshot re-read (not logged as garbage)', async (_name, head) => {
      const { pub, r, lineage } = await holdingOne('base');
      // Ops and digest that would be valid on (a, b): the result (a) must not be applied.
      const h = head(lineage);
      const digest = sha1(JSON.stringify({ cluster: 'base', backends: [be('a', 1)] }));
      await admin.publish(
        pub.keys.channel,
        `{"version":${h.version},"lineage":"${h.lineage}","base":${h.base},"ops":[{"op":"remove","id":"b"}],"digest":"${digest}"}`,
      );
      await until(() => r.source.version === 2, 'reader at version 2 (from the snapshot)');
      expect(r.seen.map((s) => compact(s))).toEqual([
        [be('a', 1), be('b', 2)],
        [be('a', 1), be('truth', 7)],
      ]);
      expect(r.log.find('notice rejected')).toEqual([]);
      await r.source.close();
    });
  });

  it('a reader holding another document under the same version (writes lost in a failover, then rewritten) re-reads instead of diverging', async () => {
    const pub = publisher('fork');
    await pub.apply({ cluster: 'fork', backends: [be('a', 1), be('b', 2)] });
    await pub.add(be('lost', 3)); // version 2, applied by the reader
    const r = await reader('fork');
    expect(compact(r.seen.at(-1)!)).toEqual([be('a', 1), be('b', 2), be('lost', 3)]);
    // The new master has version 2 with another document (what another publisher wrote after the failover).
    const { lineage } = (await pub.show())!;
    await admin.set(
      pub.keys.snapshot,
      JSON.stringify({ version: 2, lineage, document: { cluster: 'fork', backends: [be('a', 1), be('other', 4)] } }),
    );
    // A delta on base 2: the ops apply to the reader's document, but the digest says it is not the publisher's base.
    const fresh = publisher('fork');
    expect(await fresh.setWeight('a', 5)).toBe(3);
    await until(() => r.source.version === 3, 'reader at version 3');
    expect(compact(r.seen.at(-1)!)).toEqual([be('a', 1, { weight: 5 }), be('other', 4)]);
    expect(r.log.find('notice rejected').map((l) => l['field'])).toEqual(['notice.digest']);
  });

  it('mixed fleet: full-payload notices (an older publisher, or notices: "full") and deltas interleave; readers converge', async () => {
    const cluster = 'mixed';
    const modern = publisher(cluster);
    const older = publisher(cluster, { notices: 'full' });
    await older.apply({ cluster, backends: [be('a', 1), be('b', 2)] });
    const r = await reader(cluster);
    const rng = new Rng(7);
    for (let i = 0; i < 60; i++) {
      const pub = rng.below(2) === 0 ? modern : older;
      if (i % 3 === 0) await pub.add(be(`m${i}`, 100 + i));
      else await pub.setWeight(rng.below(2) === 0 ? 'a' : 'b', 1 + rng.below(100));
      // An older release's publisher (the write script before delta notices) stored and published the same bytes.
      if (i % 10 === 9) {
        const cur = (await older.show())!;
        const text = `{"version":${cur.version + 1},"lineage":"${cur.lineage}","document":${JSON.stringify(cur.document)}}`;
        await admin.set(older.keys.snapshot, text);
        await admin.publish(older.keys.channel, text);
      }
    }
    const stored = (await modern.show())!;
    await until(() => r.source.version === stored.version, `reader at version ${stored.version}`);
    expect(r.seen.map((s) => s.version)).toEqual(Array.from({ length: stored.version }, (_, k) => k + 1));
    expect(compact(r.seen.at(-1)!)).toEqual(stored.document.backends);
    expect(r.log.find('re-reading the snapshot')).toEqual([]);
    const published = noticesOf(modern);
    const full = published.filter((m) => !m.includes('"base":'));
    expect(full.length).toBeGreaterThan(10);
    expect(published.length - full.length).toBeGreaterThan(10);
    // Every full-payload notice decodes with the envelope decoder of releases before delta notices (unchanged: version, lineage, document only).
    for (const m of full) expect(decodeEnvelope(m, { cluster, maxBytes: 1 << 20, what: 'notice' }).document.cluster).toBe(cluster);
    // A delta notice is refused by that decoder, naming the field: readers of earlier releases must be upgraded before publishers use deltas.
    expect(() => decodeEnvelope(published.find((m) => m.includes('"base":'))!, { cluster, maxBytes: 1 << 20, what: 'notice' })).toThrow(
      /^notice\.base: unknown field \(accepted: version, lineage, document\)$/,
    );
  });

  it('single-backend operations keep the health block, and readers apply their deltas onto the held health block', async () => {
    const pub = publisher('hc');
    const health = { outlier: { intervalMs: 86_400_000, baseEjectionTimeMs: 600_000 } };
    await pub.apply({ cluster: 'hc', backends: [be('a', 1), be('b', 2)], health });
    const r = await reader('hc');
    expect(await pub.drain('a')).toBe(2);
    expect(await pub.setWeight('b', 3)).toBe(3);
    await until(() => r.source.version === 3, 'reader at version 3');
    expect(JSON.parse((await admin.get(pub.keys.snapshot))!).document.health).toEqual(health);
    expect(r.seen.map((s) => s.health)).toEqual([health, health, health]);
    expect(r.log.find('re-reading the snapshot')).toEqual([]);
  });

  it('options.notices is validated', () => {
    expect(() => new MembershipPublisher({ url: redis.url, cluster: 'x', notices: 'small' as never })).toThrow(
      'options.notices: must be "delta" or "full", got "small"',
    );
  });
});
