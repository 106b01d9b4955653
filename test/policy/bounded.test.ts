/**
 * Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam
 * 2018) on Maglev and RingHash: the laws of the paper, on the policies.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { Maglev, type MaglevOptions } from '../../src/policy/maglev.js';
import { RingHash, type RingHashOptions } from '../../src/policy/ring-hash.js';
import type { Policy } from '../../src/policy/types.js';
import { thrown } from '../helpers/thrown.js';

type Make = (o: MaglevOptions & RingHashOptions) => Policy;
const FAMILIES: [string, Make][] = [
  ['Maglev', (o) => new Maglev({ ...o, tableSize: 4099 })],
  ['RingHash', (o) => new RingHash(o)],
];

/** n backends whose load is a counter, the counters' O(1) total, and place / remove. */
function bins(n: number) {
  const counts = new Int32Array(n);
  const state = { total: 0 };
  const backends = Array.from({ length: n }, (_, i) => new Backend(`bin-${i}`, { load: () => counts[i]! }));
  return { counts, state, backends, totalLoad: () => state.total };
}

/** Keys placed one after another (no departures), each staying where it landed. */
function placeAll(make: Make, n: number, keys: readonly string[], c: number | undefined): string[] {
  const b = bins(n);
  const p = make(c === undefined ? {} : { balanceFactor: c, totalLoad: b.totalLoad });
  return keys.map((key) => {
    const i = p.pick(b.backends, { key });
    b.counts[i]!++;
    b.state.total++;
    return b.backends[i]!.id;
  });
}

describe.each(FAMILIES)('%s with bounded loads', (_name, make) => {
  it('every placement leaves its backend at most ⌈c × average⌉ (average including it), through arrivals and departures', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 24 }),
        fc.constantFrom(1.1, 1.25, 1.5, 2),
        fc.array(fc.oneof(fc.string({ minLength: 1, maxLength: 10 }), fc.constant(null)), { minLength: 50, maxLength: 400 }),
        (n, c, ops) => {
          const b = bins(n);
          const p = make({ balanceFactor: c, totalLoad: b.totalLoad });
          const placed: number[] = [];
          let onlyArrivals = true;
          for (const op of ops) {
            if (op === null) {
              // A departure: the oldest placed key leaves.
              const i = placed.shift();
              if (i === undefined) continue;
              b.counts[i]!--;
              b.state.total--;
              onlyArrivals = false;
              continue;
            }
            const i = p.pick(b.backends, { key: op });
            b.counts[i]!++;
            b.state.total++;
            placed.push(i);
            expect(b.counts[i]!).toBeLessThanOrEqual(Math.ceil((c * b.state.total) / n));
            if (onlyArrivals) {
              // With arrivals only, the bound holds for every backend at every moment.
              let max = 0;
              for (const v of b.counts) max = Math.max(max, v);
              expect(max).toBeLessThanOrEqual(Math.ceil((c * b.state.total) / n));
            }
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('a key stays on its unbounded successor whenever that backend is under capacity', () => {
    const b = bins(12);
    const bounded = make({ balanceFactor: 1.25, totalLoad: b.totalLoad });
    const plain = make({});
    let kept = 0;
    let moved = 0;
    for (let k = 0; k < 5000; k++) {
      const key = `user-${k}`;
      const owner = plain.pick(b.backends, { key });
      const cap = Math.ceil((1.25 * (b.state.total + 1)) / 12);
      const i = bounded.pick(b.backends, { key });
      if (b.counts[owner]! + 1 <= cap) {
        expect(i).toBe(owner);
        kept++;
      } else {
        expect(i).not.toBe(owner);
        moved++;
      }
      b.counts[i]!++;
      b.state.total++;
    }
    // Both branches were exercised.
    expect(kept).toBeGreaterThan(1000);
    expect(moved).toBeGreaterThan(10);
  });

  it('adding a backend moves at most the unbounded moves + 1/(ε²·n) of the keys (the paper: O(1/ε²)/n)', () => {
    const keys = Array.from({ length: 10_000 }, (_, k) => `key-${k}`);
    for (const n of [10, 50]) {
      const plainBefore = placeAll(make, n, keys, undefined);
      const plainAfter = placeAll(make, n + 1, keys, undefined);
      let plainMoved = 0;
      for (let k = 0; k < keys.length; k++) if (plainBefore[k] !== plainAfter[k]) plainMoved++;
      for (const c of [1.25, 1.5, 2]) {
        const before = placeAll(make, n, keys, c);
        const after = placeAll(make, n + 1, keys, c);
        let moved = 0;
        for (let k = 0; k < keys.length; k++) if (before[k] !== after[k]) moved++;
        const eps = c - 1;
        expect(moved / keys.length).toBeLessThanOrEqual(plainMoved / keys.length + 1 / (eps * eps * n));
      }
    }
  });

  it('sums the slice when no totalLoad is given (standalone use), with the same decisions', () => {
    const b = bins(8);
    const withTotal = make({ balanceFactor: 1.5, totalLoad: b.totalLoad });
    const summed = make({ balanceFactor: 1.5 });
    for (let k = 0; k < 2000; k++) {
      const key = `s${k}`;
      const i = withTotal.pick(b.backends, { key });
      expect(summed.pick(b.backends, { key })).toBe(i);
      b.counts[i]!++;
      b.state.total++;
    }
  });

  it('skips ineligible backends and throws NoEligibleCandidates when none is left', () => {
    const b = bins(4);
    const slice = b.backends.map((x, i) => (i === 0 ? x : new Backend(x.id, { status: 'draining', load: () => b.counts[i]! })));
    const p = make({ balanceFactor: 1.25, totalLoad: b.totalLoad });
    for (let k = 0; k < 200; k++) expect(p.pick(slice, { key: `k${k}` })).toBe(0);
    const none = b.backends.map((x) => new Backend(x.id, { status: 'unavailable' }));
    expect(thrown(() => make({ balanceFactor: 1.25 }).pick(none, { key: 'x' })).code).toBe('NoEligibleCandidates');
  });

  it('refuses a balance factor that is not a finite number above 1 and a totalLoad that is not a function', () => {
    for (const bad of [1, 0.5, Number.NaN, Number.POSITIVE_INFINITY, '1.5']) {
      expect(thrown(() => make({ balanceFactor: bad as never })).message).toMatch(/options\.balanceFactor/);
    }
    expect(thrown(() => make({ balanceFactor: 1.5, totalLoad: 3 as never })).message).toMatch(/options\.totalLoad/);
  });
});
