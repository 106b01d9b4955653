import HashRing from 'hashring';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { RingHash, RING_HASH_MAX_SIZE } from '../../src/policy/ring-hash.js';
import { thrown } from '../helpers/thrown.js';

const KEYS = Array.from({ length: 20_000 }, (_, i) => (i % 5 === 0 ? `user:${i * 7919}` : `k${i}-${(i * 2654435761) % 1000003}`));

/** Servers as memcached clients name them, with weights; ids in sorted order (ties go to the smaller id in both). */
function servers(n: number, weight: (i: number) => number): { id: string; weight: number }[] {
  return Array.from({ length: n }, (_, i) => ({ id: `10.0.${Math.floor(i / 200)}.${(i % 200) + 1}:11211`, weight: weight(i) })).sort(
    (a, b) => (a.id < b.id ? -1 : 1),
  );
}

function oracleMap(list: { id: string; weight: number }[]): Map<string, string> {
  const ring = new HashRing(Object.fromEntries(list.map((s) => [s.id, { weight: s.weight }])), 'md5');
  return new Map(KEYS.map((k) => [k, ring.get(k)]));
}

describe('RingHash (ketama)', () => {
  it.each([
    ['3 equal servers, no minimum', 3, () => 1, 1],
    ['7 equal servers, no minimum', 7, () => 1, 1],
    ['10 weighted servers (1..5), default minimum', 10, (i: number) => (i % 5) + 1, undefined],
    ['25 servers with weights 1..100', 25, (i: number) => ((i * 37) % 100) + 1, undefined],
  ])('maps 20,000 keys to the same server as the hashring oracle: %s', (_name, n, weight, minimumRingSize) => {
    const list = servers(n, weight);
    const expected = oracleMap(list);
    const ring = new RingHash({ keyHash: 'md5', minimumRingSize });
    const backends = list.map((s) => new Backend(s.id, { weight: s.weight }));
    // The slice in another order: the ring depends on the members, not their order.
    const slice = [...backends].reverse();
    let same = 0;
    for (const k of KEYS) if (slice[ring.pick(slice, { key: k })]!.id === expected.get(k)) same++;
    expect(same).toBe(KEYS.length);
  });

  it('has 160 points per member at equal weights (40 digests × 4), libketama weighted counts otherwise', () => {
    const ring = new RingHash({ minimumRingSize: 1 });
    ring.prepare(servers(4, () => 1).map((s) => new Backend(s.id)));
    expect(ring.ringSize).toBe(4 * 160);
    // In doubles (as hashring computes) 1/7 × 40 × 7 = 39.99…: 39 digests each. libketama's
    // floats round 1/7 up and give 40; this is the one place the two references differ.
    ring.prepare(servers(7, () => 1).map((s) => new Backend(s.id)));
    expect(ring.ringSize).toBe(7 * 39 * 4);
    // ⌊w/W × 40 × n⌋ digests: weights 1, 2, 3 → ⌊20⌋, ⌊40⌋, ⌊60⌋ → 480 points.
    ring.prepare(['a', 'b', 'c'].map((id, i) => new Backend(id, { weight: i + 1 })));
    expect(ring.ringSize).toBe((20 + 40 + 60) * 4);
  });

  it("reaches Envoy's minimum ring size (1024 by default) by an integer factor, keeping ketama's points", () => {
    const ring = new RingHash();
    ring.prepare([new Backend('a'), new Backend('b')]);
    // 2 × 160 = 320 points < 1024: × 4 → 1280.
    expect(ring.ringSize).toBe(1280);
    const big = new RingHash({ minimumRingSize: 5000 });
    big.prepare([new Backend('a'), new Backend('b')]);
    expect(big.ringSize).toBe(320 * Math.ceil(5000 / 320));
  });

  it('stays within maximumRingSize, each member keeping at least one digest', () => {
    const ring = new RingHash({ minimumRingSize: 1, maximumRingSize: 1000 });
    const backends = Array.from({ length: 50 }, (_, i) => new Backend(`m${i}`));
    ring.prepare(backends);
    expect(ring.ringSize).toBeLessThanOrEqual(1000);
    const owners = new Set<number>();
    for (let k = 0; k < 20_000; k++) owners.add(ring.pick(backends, { key: `x${k}` }));
    expect(owners.size).toBe(50);
  });

  it('refuses ring sizes outside [1, 8M] and a maximum below the minimum, naming the option', () => {
    expect(thrown(() => new RingHash({ minimumRingSize: 0 })).message).toMatch(/options\.minimumRingSize/);
    expect(thrown(() => new RingHash({ maximumRingSize: RING_HASH_MAX_SIZE + 1 })).message).toMatch(/options\.maximumRingSize/);
    expect(thrown(() => new RingHash({ minimumRingSize: 2048, maximumRingSize: 1024 })).message).toMatch(/options\.maximumRingSize/);
    expect(thrown(() => new RingHash({ keyHash: 'fnv' as never })).message).toMatch(/options\.keyHash/);
    expect(thrown(() => new RingHash({ balanceFactor: 1 })).message).toMatch(/options\.balanceFactor/);
    expect(thrown(() => new RingHash({ ringSize: 3 } as never)).code).toBe('InvalidConfig');
  });

  it('same key → same member for every instance and slice order (murmur3 key hash)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.string(), { minLength: 1, maxLength: 30 }),
        (ids, keys) => {
          const a = ids.map((id) => new Backend(id));
          const b = [...a].reverse();
          const r1 = new RingHash();
          const r2 = new RingHash();
          for (const key of keys) expect(a[r1.pick(a, { key })]!.id).toBe(b[r2.pick(b, { key })]!.id);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('removing one of 10 moves only its own keys; each member holds its share within ±20 % over 20,000 keys', () => {
    const ids = Array.from({ length: 10 }, (_, i) => `s${i}`);
    const all = ids.map((id) => new Backend(id));
    const ring = new RingHash();
    const before = KEYS.map((key) => all[ring.pick(all, { key })]!.id);
    const counts = new Map<string, number>();
    for (const id of before) counts.set(id, (counts.get(id) ?? 0) + 1);
    // 160 × 10 points: the share's spread is about 1/√160 ≈ 8 %; ±20 % is 2.5 σ of the point spread.
    for (const id of ids) expect(Math.abs(counts.get(id)! / KEYS.length - 0.1)).toBeLessThan(0.02);
    const rest = all.filter((b) => b.id !== 's3');
    const after = KEYS.map((key) => rest[ring.pick(rest, { key })]!.id);
    for (let i = 0; i < KEYS.length; i++) if (before[i] !== 's3') expect(after[i]).toBe(before[i]);
  });

  it("passes an ineligible owner's keys to the ring successor without a rebuild; other keys stay", () => {
    const down = { v: false };
    const all = ['a', 'b', 'c', 'd'].map((id) => new Backend(id, { status: 'ready' }));
    const flaky = new (class extends Backend {
      override isEligible(): boolean {
        return !down.v;
      }
    })('e');
    const slice = [...all, flaky];
    const ring = new RingHash();
    const before = KEYS.slice(0, 5000).map((key) => ring.pick(slice, { key }));
    down.v = true;
    const after = KEYS.slice(0, 5000).map((key) => ring.pick(slice, { key }));
    for (let i = 0; i < before.length; i++) {
      if (before[i] !== 4) expect(after[i]).toBe(before[i]);
      else expect(after[i]).not.toBe(4);
    }
    expect(before.filter((i) => i === 4).length).toBeGreaterThan(500);
  });

  it('Empty, NoEligibleCandidates, round robin without a key, and a bad key', () => {
    const ring = new RingHash();
    expect(thrown(() => ring.pick([], { key: 'x' })).code).toBe('Empty');
    const none = [new Backend('a', { status: 'draining' }), new Backend('b', { status: 'unavailable' })];
    expect(thrown(() => ring.pick(none, { key: 'x' })).code).toBe('NoEligibleCandidates');
    const two = [new Backend('a'), new Backend('b')];
    expect([ring.pick(two), ring.pick(two), ring.pick(two)]).toEqual([0, 1, 0]);
    expect(thrown(() => ring.pick(two, { key: {} as never })).message).toMatch(/context\.key/);
    // Numbers hash as their decimal string.
    expect(ring.pick(two, { key: 12345 })).toBe(ring.pick(two, { key: '12345' }));
  });
});
