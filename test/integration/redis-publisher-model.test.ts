/**
 * Law: every publisher operation either succeeds — the stored version goes up
 * by exactly one, the lineage stays the one the first write drew, and the
 * stored document equals the model's — or fails with the PoiseError code the
 * model predicts and changes nothing. Random operation sequences against a real
 * redis-server, compared with a plain in-memory model.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoiseError } from '../../src/core/errors.js';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { captureLog } from '../helpers/log-capture.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

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
              const err = await run(pub, o).catch((e: unknown) => e);
              expect(err).toBeInstanceOf(PoiseError);
              expect((err as PoiseError).code).toBe(expected.error);
            } else {
              expect(await run(pub, o)).toBe(version + 1);
              version += 1;
              model = expected;
            }
            const stored = await pub.show();
            expect(stored).toEqual({ version, lineage, document: { cluster, backends: model } });
          }
        } finally {
          await pub.close();
        }
      }),
      { numRuns: 25, seed: 20261202 },
    );
  });
});
