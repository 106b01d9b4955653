import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Backend, Localized, Prioritized, type Status } from '../../../src/core/candidate.js';
import { LocalityWeightedRandom } from '../../../src/policy/priority/policy.js';
import type { PriorityOptions } from '../../../src/policy/priority/options.js';
import { PriorityWeightedRandom } from '../../../src/policy/priority/policy.js';
import { caught } from '../../helpers/thrown.js';

/** Index, or the error code, of each of `n` picks. */
function run(pick: () => number, n: number): (number | string)[] {
  const out: (number | string)[] = [];
  for (let i = 0; i < n; i++) {
    const err = caught(() => out.push(pick()));
    if (err !== undefined) out.push(err.code);
  }
  return out;
}

const endpoint = fc.record({
  priority: fc.integer({ min: 0, max: 3 }),
  locality: fc.constantFrom('eu', 'us', 'ap'),
  weight: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 2 ** 32 - 1 })),
  status: fc.constantFrom<Status>('ready', 'ready', 'unavailable', 'draining'),
  panicEligible: fc.boolean(),
});

const options = fc.record({
  overprovisioningFactorPercent: fc.integer({ min: 100, max: 300 }),
  panicThresholdPercent: fc.integer({ min: 0, max: 100 }),
  panicMode: fc.constantFrom<'useAll' | 'failClosed'>('useAll', 'failClosed'),
  arithmetic: fc.constantFrom<'millionths' | 'envoy'>('millionths', 'envoy'),
  seed: fc.integer(),
});

interface Endpoint {
  priority: number;
  locality: string;
  weight: number;
  status: Status;
  panicEligible: boolean;
}

function build(es: Endpoint[]): Localized[] {
  return es.map(
    (e) =>
      new Localized(
        new Prioritized(
          new Backend(`e-${e.priority}-${e.locality}-${e.weight}`, { weight: e.weight, status: e.status }),
          e.priority,
          e.panicEligible,
        ),
        e.locality,
        1 + e.priority + e.locality.length, // consistent per (priority, locality)
      ),
  );
}

describe('prepared form ≡ per-decision form', () => {
  it('PriorityWeightedRandom({ prepared: true }) returns the same index (or error) sequence for the same seed and snapshot', () => {
    fc.assert(
      fc.property(fc.array(endpoint, { minLength: 0, maxLength: 40 }), options, (es, o: PriorityOptions) => {
        const c = build(es);
        const a = new PriorityWeightedRandom(o);
        const b = new PriorityWeightedRandom({ ...o, prepared: true });
        expect(run(() => b.pick(c), 60)).toEqual(run(() => a.pick(c), 60));
        if (c.length > 0) expect(b.plan(c)).toEqual(a.plan(c));
      }),
      { numRuns: 300 },
    );
  });

  it('LocalityWeightedRandom({ prepared: true }) returns the same index (or error) sequence for the same seed and snapshot', () => {
    fc.assert(
      fc.property(fc.array(endpoint, { minLength: 0, maxLength: 40 }), options, (es, o: PriorityOptions) => {
        const c = build(es);
        const a = new LocalityWeightedRandom(o);
        const b = new LocalityWeightedRandom({ ...o, prepared: true });
        expect(run(() => b.pick(c), 60)).toEqual(run(() => a.pick(c), 60));
        if (c.length > 0) expect(b.plan(c)).toEqual(a.plan(c));
      }),
      { numRuns: 300 },
    );
  });

  it('decide() agrees too, including priority and mode', () => {
    const c = [
      ...Array.from({ length: 4 }, (_, i) => new Prioritized(new Backend(`a${i}`, { status: i === 0 ? 'ready' : 'unavailable' }), 0)),
      ...Array.from({ length: 4 }, (_, i) => new Prioritized(new Backend(`b${i}`, { status: i === 0 ? 'ready' : 'unavailable' }), 1)),
    ];
    const a = new PriorityWeightedRandom({ seed: 99 });
    const b = new PriorityWeightedRandom({ seed: 99, prepared: true });
    for (let i = 0; i < 200; i++) expect(b.decide(c)).toEqual(a.decide(c));
  });
});

describe('prepared form: epochs', () => {
  it('options.prepared takes a boolean, and the error names it', () => {
    for (const make of [(o: PriorityOptions) => new PriorityWeightedRandom(o), (o: PriorityOptions) => new LocalityWeightedRandom(o)]) {
      expect(caught(() => make({ prepared: 'yes' } as unknown as PriorityOptions))).toMatchObject({
        code: 'InvalidConfig',
        message: 'options.prepared: must be a boolean, got "yes"',
      });
    }
  });

  it('re-prepares only for a different array identity or length; explicit prepare() takes a new health sample', () => {
    const backends = [new Backend('a'), new Backend('b')];
    const c = backends.map((b, i) => new Prioritized(b, i));
    const policy = new PriorityWeightedRandom({ seed: 1, prepared: true });
    expect(policy.decide(c)).toMatchObject({ index: 0, priority: 0 });
    backends[0]!.status = 'unavailable';
    // Same array, same length: the prepared plan (a healthy P0) stays in force.
    for (let i = 0; i < 50; i++) expect(policy.pick(c)).toBe(0);
    // A fresh array (the runtime's signal of a new epoch) re-prepares.
    const next = [...c];
    for (let i = 0; i < 50; i++) expect(policy.pick(next)).toBe(1);
    backends[0]!.status = 'ready';
    policy.prepare(next);
    expect(policy.pick(next)).toBe(0);
    // A changed length on the same array re-prepares as well.
    next.push(new Prioritized(new Backend('c'), 0));
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) seen.add(policy.pick(next));
    expect([...seen].sort()).toEqual([0, 2]);
  });

  it('a failed prepare keeps the previous prepared state', () => {
    const good = [new Localized(new Prioritized(new Backend('a'), 0), 'x', 1)];
    const bad = [new Localized(new Prioritized(new Backend('p'), 0), 'x', 1), new Localized(new Prioritized(new Backend('q'), 0), 'x', 2)];
    const policy = new LocalityWeightedRandom({ seed: 1, prepared: true });
    policy.prepare(good);
    expect(() => policy.prepare(bad)).toThrow(expect.objectContaining({ code: 'InconsistentTopology' }));
    expect(policy.plan(good).priorities[0]!.localities).toEqual([{ locality: 'x', shareMillionths: 1_000_000 }]);
    expect(policy.pick(good)).toBe(0);
  });
});
