import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { RoundRobin } from '../../src/policy/round-robin.js';
import { backends } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

const ids = (slice: readonly Backend[], picks: readonly number[]): string[] => picks.map((i) => slice[i]!.id);
const named = (...names: string[]): Backend[] => names.map((n) => new Backend(n));

describe('RoundRobin', () => {
  it('cycles through the slice in order', () => {
    const rr = new RoundRobin();
    const slice = backends(4);
    expect(Array.from({ length: 9 }, () => rr.pick(slice))).toEqual([0, 1, 2, 3, 0, 1, 2, 3, 0]);
  });

  it('continues after the last-served member when the slice changes', () => {
    const rr = new RoundRobin();
    const all = named('a', 'b', 'c', 'd', 'e');
    expect(ids(all, [rr.pick(all), rr.pick(all)])).toEqual(['a', 'b']);
    // c leaves: the next is d (c's successor that survived), not a restart at a.
    const noC = all.filter((b) => b.id !== 'c');
    expect(ids(noC, [rr.pick(noC), rr.pick(noC)])).toEqual(['d', 'e']);
    // a leaves right after e was served: the cycle wraps to b, not e again.
    const noA = noC.filter((b) => b.id !== 'a');
    expect(ids(noA, [rr.pick(noA), rr.pick(noA)])).toEqual(['b', 'd']);
    // d (the last served) leaves: e follows; a member added before it is reached in order.
    const next = named('f', 'b', 'e');
    expect(ids(next, [rr.pick(next), rr.pick(next), rr.pick(next)])).toEqual(['e', 'f', 'b']);
  });

  it('law: after any shrink, the next n′ picks serve every survivor exactly once, never the last served first', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 12 }),
        fc.nat({ max: 40 }),
        fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
        (n, served, keep) => {
          const rr = new RoundRobin();
          const old = backends(n);
          let last = -1;
          for (let k = 0; k < served; k++) last = rr.pick(old);
          const survivors = old.filter((_, i) => keep[i]);
          if (survivors.length < 2) return;
          const next = Array.from({ length: survivors.length }, () => survivors[rr.pick(survivors)]!.id);
          expect(new Set(next).size).toBe(survivors.length);
          if (last >= 0) expect(next[0]).not.toBe(old[last]!.id);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('steps over ineligible members (standalone callers)', () => {
    const rr = new RoundRobin();
    const slice = backends(5, { status: (i) => (i === 1 || i === 2 ? 'draining' : 'ready') });
    expect(Array.from({ length: 6 }, () => rr.pick(slice))).toEqual([0, 3, 4, 0, 3, 4]);
  });

  it('Empty / NoEligibleCandidates', () => {
    const rr = new RoundRobin();
    expect(thrown(() => rr.pick([])).code).toBe('Empty');
    expect(thrown(() => rr.pick(backends(3, { status: () => 'unavailable' }))).code).toBe('NoEligibleCandidates');
  });
});
