import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  Backend,
  Localized,
  Prioritized,
  type LocalityCandidate,
  type PriorityCandidate,
  type Status,
} from '../../../src/core/candidate.js';
import { LocalityWeightedRandom } from '../../../src/policy/priority/policy.js';
import { F_ELIGIBLE, F_MEMBER, F_PANIC, flagsOf } from '../../../src/policy/priority/flags.js';
import { PriorityWeightedRandom } from '../../../src/policy/priority/policy.js';
import { PriorityEngine } from '../../../src/policy/priority/sample.js';
import { caught, thrown } from '../../helpers/thrown.js';

/** The three predicates called one by one: what flagsOf must equal. */
function called(c: PriorityCandidate): number {
  return (c.isMember() ? F_MEMBER : 0) | (c.isEligible() ? F_ELIGIBLE : 0) | (c.isPanicEligible() ? F_PANIC : 0);
}

/** Index, or the error code and message, of each of `n` picks. */
function run(pick: () => number, n: number): (number | string)[] {
  const out: (number | string)[] = [];
  for (let i = 0; i < n; i++) {
    const err = caught(() => out.push(pick()));
    if (err !== undefined) out.push(`${err.code}: ${err.message}`);
  }
  return out;
}

const status = fc.constantFrom<Status>('ready', 'unavailable', 'draining');

/** A plain-object inner candidate (not a Backend): always the generic path. */
function plain(id: string, s: Status): { id: string; weight: number; status: Status; isEligible(): boolean; load(): number } {
  return { id, weight: 1, status: s, isEligible: () => s === 'ready', load: () => 0 };
}

const shape = fc.record({
  status,
  panicEligible: fc.boolean(),
  // 0 Prioritized(Backend), 1 Localized(Prioritized(Backend)), 2 Localized(Backend),
  // 3 Prioritized(plain object), 4 Backend with an overridden isEligible, 5 Prioritized with an overridden isMember,
  // 6 Localized with an overridden isPanicEligible.
  kind: fc.integer({ min: 0, max: 6 }),
  flip: fc.boolean(),
});

function make(s: { status: Status; panicEligible: boolean; kind: number; flip: boolean }, i: number): PriorityCandidate {
  const b = new Backend(`b${i}`, { status: s.status });
  switch (s.kind) {
    case 0:
      return new Prioritized(b, 0, s.panicEligible);
    case 1:
      return new Localized(new Prioritized(b, 1, s.panicEligible), 'z');
    case 2:
      return new Localized(b, 'z');
    case 3:
      return new Prioritized(plain(`p${i}`, s.status), 0, s.panicEligible);
    case 4: {
      b.isEligible = () => s.flip;
      return new Localized(new Prioritized(b, 0, s.panicEligible), 'z');
    }
    case 5: {
      const p = new Prioritized(b, 0, s.panicEligible);
      p.isMember = () => s.flip;
      return new Localized(p, 'z');
    }
    default: {
      const l = new Localized(new Prioritized(b, 0, s.panicEligible), 'z');
      l.isPanicEligible = () => s.flip;
      return l;
    }
  }
}

describe('flagsOf: field reads for the library wrappers, method calls otherwise', () => {
  it('equals the three predicates for every wrapper chain, status and override', () => {
    fc.assert(
      fc.property(fc.array(shape, { minLength: 1, maxLength: 30 }), (shapes) => {
        shapes.forEach((s, i) => {
          const c = make(s, i);
          expect(flagsOf(c)).toBe(called(c));
        });
      }),
      { numRuns: 300 },
    );
  });

  it('sees a status changed in place (it reads the field, not a cached answer)', () => {
    const b = new Backend('a');
    const c = new Localized(new Prioritized(b, 0), 'z');
    expect(flagsOf(c)).toBe(F_MEMBER | F_ELIGIBLE | F_PANIC);
    b.status = 'unavailable';
    expect(flagsOf(c)).toBe(F_MEMBER | F_PANIC);
    b.status = 'draining';
    expect(flagsOf(c)).toBe(0);
    expect(flagsOf(new Prioritized(new Backend('x', { status: 'unavailable' }), 0, false))).toBe(F_MEMBER);
  });

  it('an overridden predicate decides the pick', () => {
    const b = new Backend('a');
    b.isEligible = () => false; // the status still says ready
    const c = [new Prioritized(b, 0), new Prioritized(new Backend('b'), 1)];
    expect(new PriorityWeightedRandom({ seed: 1 }).pick(c)).toBe(1);
  });
});

// Many (priority, locality) keys: more than the key table's 64, so the
// per-decision form's one-pass aggregation falls back to the sorted path.
const wide = fc.record({
  priority: fc.integer({ min: 0, max: 30 }),
  locality: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'),
  weight: fc.oneof(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 2 ** 32 - 1 })),
  status,
  panicEligible: fc.boolean(),
});

function buildWide(es: { priority: number; locality: string; weight: number; status: Status; panicEligible: boolean }[]): Localized[] {
  return es.map(
    (e, i) =>
      new Localized(
        new Prioritized(new Backend(`w${i}`, { weight: e.weight, status: e.status }), e.priority, e.panicEligible),
        e.locality,
        1 + ((e.priority * 7 + e.locality.charCodeAt(0)) % 5),
      ),
  );
}

describe('per-decision aggregation ≡ prepared (sorted) layout beyond the fast path', () => {
  it('agrees with more than 64 distinct keys (heapsort fallback)', () => {
    fc.assert(
      fc.property(fc.array(wide, { minLength: 60, maxLength: 220 }), fc.integer(), (es, seed) => {
        const c = buildWide(es);
        expect(run(() => new LocalityWeightedRandom({ seed, prepared: true }).pick(c), 1)).toEqual(
          run(() => new LocalityWeightedRandom({ seed }).pick(c), 1),
        );
        const a = new LocalityWeightedRandom({ seed });
        const b = new LocalityWeightedRandom({ seed, prepared: true });
        expect(run(() => b.pick(c), 40)).toEqual(run(() => a.pick(c), 40));
        const pa = new PriorityWeightedRandom({ seed, panicMode: 'failClosed' });
        const pb = new PriorityWeightedRandom({ seed, panicMode: 'failClosed', prepared: true });
        expect(run(() => pb.pick(c), 40)).toEqual(run(() => pa.pick(c), 40));
      }),
      { numRuns: 60 },
    );
  });

  it('throws the same InconsistentTopology message from pick and plan, whatever the order', () => {
    fc.assert(
      fc.property(fc.array(wide, { minLength: 1, maxLength: 40 }), fc.nat(), (es, at) => {
        const c = buildWide(es);
        const victim = c[at % c.length]!;
        const bad = new Localized(victim.inner, victim.locality, victim.localityWeight === 9 ? 8 : 9);
        const shuffled = [...c];
        shuffled.splice(at % (c.length + 1), 0, bad);
        const policy = new LocalityWeightedRandom({ seed: 1 });
        const err = thrown(() => policy.plan(shuffled));
        const planMessage = `${err.code}: ${err.message}`;
        expect(planMessage).toMatch(/^InconsistentTopology: /);
        expect(run(() => policy.pick(shuffled), 1)).toEqual([planMessage]);
        expect(run(() => new LocalityWeightedRandom({ seed: 1, prepared: true }).pick(shuffled), 1)).toEqual([planMessage]);
      }),
      { numRuns: 200 },
    );
  });
});

describe('one long-lived per-decision policy across changing snapshots', () => {
  // The per-decision engine keeps its key table, key order and scan hints
  // between calls; a long-lived instance must still decide exactly like a
  // prepared policy that re-prepares every new array from scratch.
  const small = fc.record({
    priority: fc.integer({ min: 0, max: 4 }),
    locality: fc.constantFrom('a', 'b', 'c', 'd'),
    weight: fc.integer({ min: 1, max: 9 }),
    status,
    panicEligible: fc.boolean(),
  });
  const snapshots = fc.array(fc.oneof(fc.array(small, { minLength: 1, maxLength: 30 }), fc.array(wide, { minLength: 1, maxLength: 120 })), {
    minLength: 2,
    maxLength: 8,
  });

  it('matches a re-preparing prepared policy, pick for pick', () => {
    fc.assert(
      fc.property(snapshots, fc.integer(), fc.boolean(), (list, seed, reuse) => {
        const arrays = list.map(buildWide);
        // Sometimes hand over the same candidate objects again, reordered (same keys, new order).
        if (reuse) arrays.push([...arrays[0]!].reverse(), arrays[0]!.slice(1));
        const a = new LocalityWeightedRandom({ seed });
        const b = new LocalityWeightedRandom({ seed, prepared: true });
        const pa = new PriorityWeightedRandom({ seed });
        const pb = new PriorityWeightedRandom({ seed, prepared: true });
        for (const c of arrays) {
          if (c.length === 0) continue;
          expect(run(() => a.pick(c), 5)).toEqual(run(() => b.pick(c), 5));
          expect(run(() => pa.pick(c), 5)).toEqual(run(() => pb.pick(c), 5));
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('key table reuse after a shrinking snapshot', () => {
  it('never creates a duplicate key from a stale slot', () => {
    // [P0, P1, P2] fills slots 0..2; [P2] overwrites slot 0, leaving a stale P2 in slot 2;
    // [P2, P1, P2] must then find P2 at slot 0, not open a second P2 key at slot 2.
    const m = (id: string, priority: number, s: Status = 'ready'): Prioritized => new Prioritized(new Backend(id, { status: s }), priority);
    const snapshots = [
      [m('a', 0), m('b', 1), m('c', 2)],
      [m('d', 2)],
      [m('e', 2), m('f', 1, 'unavailable'), m('g', 2), m('h', 2, 'unavailable')],
    ];
    for (let seed = 0; seed < 20; seed++) {
      const a = new PriorityWeightedRandom({ seed });
      const b = new PriorityWeightedRandom({ seed, prepared: true });
      for (const c of snapshots) expect(run(() => a.pick(c), 20)).toEqual(run(() => b.pick(c), 20));
      expect(a.plan(snapshots[2]!).priorities.map((p) => p.priority)).toEqual([1, 2]);
    }
  });
});

describe('validation of sampled values', () => {
  // A hand-written candidate, so that any value reaches the policy.
  function raw(weight: unknown, priority: unknown, localityWeight: unknown): LocalityCandidate {
    return {
      id: 'raw',
      weight: weight as number,
      priority: priority as number,
      locality: 'z',
      localityWeight: localityWeight as number,
      isEligible: () => true,
      isMember: () => true,
      isPanicEligible: () => true,
      load: () => 0,
    };
  }
  const odd = fc.oneof(
    fc.constantFrom<unknown>(0, -0, -1, 1.5, 2 ** 32, 2 ** 32 - 1, 2 ** 53, NaN, Infinity, -Infinity, '3', 3n, null, undefined, true, {}),
    fc.integer({ min: -10, max: 2 ** 32 + 10 }),
    fc.double(),
  );
  const isWeight = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 2 ** 32 - 1;
  const isPriority = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 2 ** 32 - 1;

  it('throws InvalidWeight / InvalidConfig exactly for out-of-range weights, priorities and locality weights', () => {
    fc.assert(
      fc.property(odd, odd, odd, (w, p, lw) => {
        const c = [raw(w, p, lw)];
        const expected = !isWeight(w)
          ? 'InvalidWeight: candidates[0].weight'
          : !isPriority(p)
            ? 'InvalidConfig: candidates[0].priority'
            : !isWeight(lw)
              ? 'InvalidWeight: candidates[0].localityWeight'
              : undefined;
        const [got] = run(() => new LocalityWeightedRandom({ seed: 1 }).pick(c), 1);
        if (expected === undefined) expect(got).toBe(0);
        else expect(String(got).startsWith(`${expected}:`)).toBe(true);
        const [prepared] = run(() => new LocalityWeightedRandom({ seed: 1, prepared: true }).pick(c), 1);
        expect(prepared).toEqual(got);
      }),
      { numRuns: 500 },
    );
  });
});

describe('PriorityEngine.sample: groups equal a direct computation from the candidates', () => {
  // The reference: sort (priority, locality, index), then sum each group
  // member by member — what the per-key histogram and its fold must equal.
  function reference(c: readonly LocalityCandidate[], withLocality: boolean) {
    const order = c
      .map((_, i) => i)
      .sort((a, b) => {
        const pa = c[a]!.priority;
        const pb = c[b]!.priority;
        if (pa !== pb) return pa - pb;
        const la = withLocality ? c[a]!.locality : '';
        const lb = withLocality ? c[b]!.locality : '';
        return la < lb ? -1 : la > lb ? 1 : a - b;
      });
    type Sums = {
      start: number;
      end: number;
      allN: number;
      memberN: number;
      memberW: number;
      eligibleN: number;
      eligibleW: number;
      panicN: number;
      panicW: number;
    };
    const open = (start: number): Sums => ({
      start,
      end: start,
      allN: 0,
      memberN: 0,
      memberW: 0,
      eligibleN: 0,
      eligibleW: 0,
      panicN: 0,
      panicW: 0,
    });
    const add = (s: Sums, x: LocalityCandidate): void => {
      s.end++;
      s.allN++;
      if (!x.isMember()) return;
      s.memberN++;
      s.memberW += x.weight;
      if (x.isEligible()) {
        s.eligibleN++;
        s.eligibleW += x.weight;
      }
      if (x.isEligible() || x.isPanicEligible()) {
        s.panicN++;
        s.panicW += x.weight;
      }
    };
    const priorities: (Sums & { value: number })[] = [];
    const localities: (Sums & { weight: number; priority: number })[] = [];
    order.forEach((i, k) => {
      const x = c[i]!;
      let p = priorities.at(-1);
      if (p === undefined || p.value !== x.priority) priorities.push((p = { ...open(k), value: x.priority }));
      add(p, x);
      if (!withLocality) return;
      let l = localities.at(-1);
      const first = l === undefined ? undefined : c[order[l.start]!]!;
      if (l === undefined || l.priority !== x.priority || first!.locality !== x.locality) {
        localities.push((l = { ...open(k), weight: x.localityWeight, priority: x.priority }));
      }
      add(l, x);
    });
    return { order, priorities, localities };
  }

  function observed(e: PriorityEngine, withLocality: boolean) {
    const priorities = Array.from({ length: e.pCount }, (_, p) => ({
      value: e.pValue[p]!,
      start: e.pStart[p]!,
      end: e.pEnd[p]!,
      allN: e.pAllN[p]!,
      memberN: e.pMemberN[p]!,
      memberW: e.pMemberW[p]!,
      eligibleN: e.pEligibleN[p]!,
      eligibleW: e.pEligibleW[p]!,
      panicW: e.pPanicW[p]!,
    }));
    const localities = withLocality
      ? Array.from({ length: e.lCount }, (_, l) => ({
          start: e.lStart[l]!,
          end: e.lEnd[l]!,
          weight: e.lWeight[l]!,
          memberN: e.lMemberN[l]!,
          memberW: e.lMemberW[l]!,
          eligibleN: e.lEligibleN[l]!,
          eligibleW: e.lEligibleW[l]!,
          panicN: e.lPanicN[l]!,
          panicW: e.lPanicW[l]!,
        }))
      : [];
    return { order: Array.from(e.order.subarray(0, e.n)), priorities, localities };
  }

  const entry = fc.record({
    priority: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 40 })),
    locality: fc.constantFrom('a', 'b', 'c'),
    weight: fc.oneof(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 2 ** 32 - 1 })),
    status,
    panicEligible: fc.boolean(),
  });

  it('order, group ranges, counts and weight sums, for one engine reused across snapshots', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(entry, { minLength: 1, maxLength: 150 }), { minLength: 1, maxLength: 5 }),
        fc.boolean(),
        (list, withLocality) => {
          const e = new PriorityEngine();
          for (const es of list) {
            const c = buildWide(es);
            e.sample(c, withLocality);
            const want = reference(c, withLocality);
            const got = observed(e, withLocality);
            expect(got.order).toEqual(want.order);
            expect(got.priorities).toEqual(want.priorities.map(({ panicN: _, ...p }) => p));
            expect(got.localities).toEqual(want.localities.map(({ allN: _, priority: __, ...l }) => l));
            if (withLocality) {
              for (let p = 0; p < e.pCount; p++) {
                const ls = want.localities.filter((l) => l.priority === e.pValue[p]);
                expect(e.pLocEnd[p]! - e.pLocStart[p]!).toBe(ls.length);
                expect(e.lStart[e.pLocStart[p]!]).toBe(ls[0]!.start);
              }
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
