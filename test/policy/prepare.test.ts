/**
 * The `Policy.prepare` contract: calling it is never required and never
 * changes a decision. A seeded policy that was prepared draws exactly the
 * sequence (indices and error codes) of a twin that prepares lazily inside
 * pick, for every slice, including after the slice changes; and a prepared
 * array is never prepared again by the picks on it (the hot path reuses it).
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { Backend, Localized, Prioritized, type Candidate, type Status } from '../../src/core/candidate.js';
import { LocalityWeightedRandom, PriorityWeightedRandom } from '../../src/policy/priority/policy.js';
import type { Policy } from '../../src/policy/types.js';
import { SINGLE_TIER_POLICIES } from '../helpers/policy.js';
import { caught } from '../helpers/thrown.js';

type AnyPolicy = Policy<Localized<Prioritized<Backend>>>;

/** Every public policy; all accept prioritized, localized candidates. */
const POLICIES: Record<string, (seed: number) => AnyPolicy> = {
  ...SINGLE_TIER_POLICIES,
  PriorityWeightedRandom: (seed) => new PriorityWeightedRandom({ seed }),
  LocalityWeightedRandom: (seed) => new LocalityWeightedRandom({ seed }),
  PreparedPriorityWeightedRandom: (seed) => new PriorityWeightedRandom({ seed, prepared: true }),
  PreparedLocalityWeightedRandom: (seed) => new LocalityWeightedRandom({ seed, prepared: true }),
};

const member = fc.record({
  weight: fc.integer({ min: 1, max: 10 }),
  status: fc.constantFrom<Status>('ready', 'ready', 'draining', 'unavailable'),
  load: fc.integer({ min: 0, max: 3 }),
  priority: fc.integer({ min: 0, max: 2 }),
  locality: fc.constantFrom('eu', 'us'),
});
type Member = typeof member extends fc.Arbitrary<infer T> ? T : never;

function slice(ms: readonly Member[]): Localized<Prioritized<Backend>>[] {
  return ms.map(
    (m, i) =>
      new Localized(
        new Prioritized(new Backend(`b${i}`, { weight: m.weight, status: m.status, load: () => m.load }), m.priority),
        m.locality,
      ),
  );
}

/** Index, or error code, of each of `n` picks (keyed by the pick's number). */
function draws(policy: AnyPolicy, cands: readonly Candidate[], n: number): (number | string)[] {
  const out: (number | string)[] = [];
  for (let i = 0; i < n; i++) {
    const err = caught(() => out.push(policy.pick(cands as Localized<Prioritized<Backend>>[], { key: `k${i}` })));
    if (err !== undefined) out.push(err.code);
  }
  return out;
}

describe('Policy.prepare', () => {
  for (const [name, make] of Object.entries(POLICIES)) {
    it(`${name}: once prepared for an array, picks on that array never prepare again; a new array is prepared at most once`, () => {
      const policy = make(1);
      const a = slice(
        Array.from({ length: 8 }, (_, i) => ({ weight: 1 + (i % 3), status: 'ready', load: i % 2, priority: 0, locality: 'eu' })),
      );
      const b = a.slice(0, 5);
      policy.prepare(a);
      const spy = vi.spyOn(policy, 'prepare');
      for (let i = 0; i < 200; i++) policy.pick(a, { key: `k${i}` });
      expect(spy).not.toHaveBeenCalled();
      for (let i = 0; i < 200; i++) policy.pick(b, { key: `k${i}` });
      expect(spy.mock.calls.length).toBeLessThanOrEqual(1);
    });
  }

  for (const [name, make] of Object.entries(POLICIES)) {
    it(`${name}: preparing never changes the seeded decisions, across a membership change`, () => {
      fc.assert(
        fc.property(
          fc.array(member, { minLength: 1, maxLength: 12 }),
          fc.array(member, { minLength: 1, maxLength: 12 }),
          fc.integer({ min: 1, max: 2 ** 31 - 1 }),
          (first, second, seed) => {
            const prepared = make(seed);
            const lazy = make(seed);
            const a = slice(first);
            const b = slice(second);
            const expected = [...draws(lazy, a, 40), ...draws(lazy, b, 40)];
            const actual: (number | string)[] = [];
            for (const s of [a, b]) {
              // A slice pick refuses is refused by prepare too (a PoiseError); pick then throws the same.
              caught(() => prepared.prepare(s));
              actual.push(...draws(prepared, s, 40));
            }
            expect(actual).toEqual(expected);
          },
        ),
        { numRuns: 150 },
      );
    });
  }
});
