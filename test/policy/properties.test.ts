import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backend, type Status } from '../../src/core/candidate.js';
import type { Policy } from '../../src/policy/types.js';
import { SINGLE_TIER_POLICIES } from '../helpers/policy.js';
import { caught } from '../helpers/thrown.js';

const POLICIES = SINGLE_TIER_POLICIES;

const member = fc.record({
  weight: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.constant(0xffff_ffff)),
  status: fc.constantFrom<Status>('ready', 'draining', 'unavailable'),
  load: fc.integer({ min: 0, max: 3 }),
});
const key = fc.option(fc.oneof(fc.string({ maxLength: 8 }), fc.integer()), { nil: undefined });

/** Every pick is an eligible in-bounds index, or exactly Empty / NoEligibleCandidates. */
function checkPick(policy: Policy, slice: readonly Backend[], k: string | number | undefined): void {
  const eligible = slice.filter((b) => b.isEligible()).length;
  let index = -1;
  const err = caught(() => (index = policy.pick(slice, k === undefined ? undefined : { key: k })));
  if (err !== undefined) {
    expect(err.code).toBe(slice.length === 0 ? 'Empty' : 'NoEligibleCandidates');
    expect(eligible).toBe(0);
    return;
  }
  expect(Number.isInteger(index)).toBe(true);
  expect(index).toBeGreaterThanOrEqual(0);
  expect(index).toBeLessThan(slice.length);
  expect(slice[index]!.isEligible()).toBe(true);
}

describe('property: every policy returns an eligible in-bounds index or the precise PoiseError', () => {
  for (const [name, make] of Object.entries(POLICIES)) {
    it(name, () => {
      fc.assert(
        fc.property(
          fc.array(member, { maxLength: 12 }),
          fc.array(fc.tuple(fc.nat(), fc.constantFrom<Status>('ready', 'draining', 'unavailable')), { maxLength: 4 }),
          fc.array(key, { minLength: 1, maxLength: 6 }),
          fc.integer(),
          (members, flips, keys, seed) => {
            const policy = make(seed);
            const slice = members.map((m, i) => new Backend(`m${i}`, { weight: m.weight, status: m.status, load: () => m.load }));
            for (const k of keys) checkPick(policy, slice, k);
            // Health changes in place (same array): the policy must not serve a member that became ineligible.
            for (const [at, status] of flips) if (slice.length > 0) slice[at % slice.length]!.status = status;
            for (const k of keys) checkPick(policy, slice, k);
            // A fresh slice (membership change) with one member fewer.
            const smaller = slice.slice(1);
            for (const k of keys) checkPick(policy, smaller, k);
          },
        ),
        { numRuns: 300 },
      );
    });
  }
});
