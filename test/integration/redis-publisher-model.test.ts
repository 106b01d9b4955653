/**
 * Law: every publisher operation either succeeds — the stored version goes up
 * by exactly one, the lineage stays the one the first write drew, and the
 * stored document equals the model's — or fails with the PoiseError code the
 * model predicts and changes nothing. Random operation sequences against a real
 * redis-server, compared with a plain in-memory model.
 */
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { captureLog } from '../helpers/log-capture.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { rejection } from '../helpers/thrown.js';

type Op =
  | { kind: 'add'; id: string; weight: number }
  | { kind: 'remove' | 'drain' | 'undrain'; id: string }
  | { kind: 'weight'; id: string; weight: number };

interface ModelBackend {
  id: string;
  address: string;
  weight?: number;
  status?: 'draining';
}

const ids = ['a', 'b', 'c', 'd'];
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('add' as const), id: fc.constantFrom(...ids), weight: fc.integer({ min: -1, max: 5 }) }),
  fc.record({ kind: fc.constantFrom('remove' as const, 'drain' as const, 'undrain' as const), id: fc.constantFrom(...ids) }),
  fc.record({ kind: fc.constant('weight' as const), id: fc.constantFrom(...ids), weight: fc.integer({ min: -1, max: 5 }) }),
);

type Failure = { error: 'NotFound' | 'DuplicateIdentity' | 'InvalidWeight' };

/** The model: what the stored backends must be after `o`, or the code of the error when the operation must fail. */
function step(model: ModelBackend[], o: Op): ModelBackend[] | Failure {
  const i = model.findIndex((b) => b.id === o.id);
  const valid = (w: number) => w >= 1;
  switch (o.kind) {
    case 'add':
      if (!valid(o.weight)) return { error: 'InvalidWeight' };
      if (i >= 0) return { error: 'DuplicateIdentity' };
      return [...model, { id: o.id, address: `127.0.0.1:${7000 + ids.indexOf(o.id)}`, ...(o.weight === 1 ? {} : { weight: o.weight }) }];
    case 'remove':
      return i < 0 ? { error: 'NotFound' } : model.filter((b) => b.id !== o.id);
    case 'drain':
    case 'undrain': {
      if (i < 0) return { error: 'NotFound' };
      const { status: _drop, ...rest } = model[i]!;
      const next = model.slice();
      next[i] = o.kind === 'drain' ? { ...rest, status: 'draining' } : rest;
      return next;
    }
    case 'weight': {
      if (!valid(o.weight)) return { error: 'InvalidWeight' };
      if (i < 0) return { error: 'NotFound' };
      const { weight: _w, ...rest } = model[i]!;
      const next = model.slice();
      next[i] = o.weight === 1 ? rest : { ...rest, weight: o.weight };
      return next;
    }
  }
}

function run(pub: MembershipPublisher, o: Op): Promise<number> {
  switch (o.kind) {
    case 'add':
      return pub.add({ id: o.id, address: `127.0.0.1:${7000 + ids.indexOf(o.id)}`, weight: o.weight });
    case 'remove':
      return pub.remove(o.id);
    case 'drain':
      return pub.drain(o.id);
    case 'undrain':
      return pub.undrain(o.id);
    case 'weight':
      return pub.setWeight(o.id, o.weight);
  }
}

describe('MembershipPublisher against a model', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  /** The stored membership as a publisher that never wrote it decodes it. */
  async function fresh(cluster: string) {
    const reader = new MembershipPublisher({ url: redis.url, cluster, logger: captureLog().logger });
    try {
      return await reader.show();
    } finally {
      await reader.close();
    }
  }

  it('consecutive changes reuse the last written document (no re-parse), and any other stored value — even of the same version — is decoded', async () => {
    const cluster = 'memo';
    const pub = new MembershipPublisher({ url: redis.url, cluster, logger: captureLog().logger });
    const admin = new Redis(redis.url);
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const backends = Array.from({ length: 300 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${10000 + i}` }));
      await pub.apply({ cluster, backends });
      await pub.setWeight('b0', 2); // decodes the stored value once
      const big = () => parse.mock.calls.filter(([text]) => typeof text === 'string' && text.length > 10_000).length;
      const before = big();
      for (let i = 1; i <= 20; i++) expect(await pub.setWeight(`b${i}`, 3)).toBe(2 + i);
      expect(big()).toBe(before); // 20 writes, no snapshot parsed
      // Another writer stores a different document under the same version number (a failover's fork):
      const stored = JSON.parse((await admin.get('poise:memo:snapshot'))!) as { version: number; lineage: string };
      const forked = {
        version: stored.version,
        lineage: stored.lineage,
        document: { cluster, backends: [{ id: 'x', address: '127.0.0.1:9' }] },
      };
      await admin.set('poise:memo:snapshot', JSON.stringify(forked));
      expect(await pub.setWeight('x', 4)).toBe(stored.version + 1);
      expect((await pub.show())!.document.backends).toEqual([{ id: 'x', address: '127.0.0.1:9', weight: 4 }]);
      expect(await fresh(cluster)).toEqual(await pub.show());
    } finally {
      parse.mockRestore();
      admin.disconnect();
      await pub.close();
    }
  });

  it('each operation bumps the version by one and matches the model, or fails and changes nothing', async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 12 }), async (ops) => {
        const cluster = `model${round++}`;
        const pub = new MembershipPublisher({ url: redis.url, cluster, logger: captureLog().logger });
        try {
          let model: ModelBackend[] = [];
          let version = await pub.apply({ cluster, backends: [] });
          const lineage = (await pub.show())!.lineage;
          expect(lineage).toMatch(/^[0-9a-f]{32}$/);
          for (const o of ops) {
            const expected = step(model, o);
            if ('error' in expected) {
              const err = await rejection(run(pub, o));
              expect(err.code).toBe(expected.error);
            } else {
              expect(await run(pub, o)).toBe(version + 1);
              version += 1;
              model = expected;
            }
            const stored = await pub.show();
            expect(stored).toEqual({ version, lineage, document: { cluster, backends: model } });
            // A publisher that has written reuses what it wrote; one that has not decodes the stored bytes: the same.
            expect(await fresh(cluster)).toEqual(stored);
          }
        } finally {
          await pub.close();
        }
      }),
      { numRuns: 25, seed: 20261202 },
    );
  });
});
