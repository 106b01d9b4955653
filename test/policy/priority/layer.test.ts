/**
 * The priority and locality layer around every policy (`within`): the
 * layer chooses the priority (seed 000: overprovisioning, spill-over, panic)
 * and the locality (seed 001), the configured policy chooses inside.
 *
 * Distribution bands are ±5σ of a binomial count (σ = √(N·p·(1 − p))); each
 * test states N and p, and the bias it would catch.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backend, Localized, Prioritized, type Status } from '../../../src/core/candidate.js';
import { LeastLoaded } from '../../../src/policy/least-loaded.js';
import { Maglev } from '../../../src/policy/maglev.js';
import { PowerOfTwo } from '../../../src/policy/power-of-two.js';
import { LocalityWeightedRandom, PriorityWeightedRandom } from '../../../src/policy/priority/policy.js';
import type { Policy } from '../../../src/policy/types.js';
import { binomialSigma, SINGLE_TIER_POLICIES } from '../../helpers/policy.js';
import { caught, thrown } from '../../helpers/thrown.js';

/** Every single-tier policy, each run inside the layer. */
const INNER = SINGLE_TIER_POLICIES;
const KEYED = new Set(['Rendezvous', 'Maglev']);

/** A layered policy with `name` inside (one instance per group, each seeded from `seed`). */
function layered(name: string, seed: number, options: { panicMode?: 'useAll' | 'failClosed' } = {}): PriorityWeightedRandom {
  const make = INNER[name]!;
  return new PriorityWeightedRandom({ prepared: true, seed, within: (g) => make(seed + g), stickyKeys: KEYED.has(name), ...options });
}

/** `total` members at `priority`, the first `healthy` ready and the rest unavailable. */
function level(priority: number, total: number, healthy: number, weight = 1): Prioritized[] {
  return Array.from(
    { length: total },
    (_, i) => new Prioritized(new Backend(`p${priority}-${i}`, { weight, status: i < healthy ? 'ready' : 'unavailable' }), priority),
  );
}

const member = fc.record({
  weight: fc.integer({ min: 1, max: 6 }),
  status: fc.constantFrom<Status>('ready', 'ready', 'ready', 'unavailable', 'draining'),
  priority: fc.integer({ min: 0, max: 2 }),
  panicEligible: fc.boolean(),
});

describe('the layer: priority first, then the configured policy', () => {
  for (const name of Object.keys(INNER)) {
    it(`${name}: over random memberships, a pick lands only on a priority with a share, on a member selectable there; never below a fully available priority`, () => {
      fc.assert(
        fc.property(fc.array(member, { minLength: 1, maxLength: 14 }), fc.integer({ min: 1, max: 2 ** 30 }), (ms, seed) => {
          const cands = ms.map(
            (m, i) => new Prioritized(new Backend(`b${i}`, { weight: m.weight, status: m.status }), m.priority, m.panicEligible),
          );
          const policy = layered(name, seed);
          const plan = policy.plan(cands);
          const share = new Map(plan.priorities.map((p) => [p.priority, p]));
          // When the most preferred priority with members has every member ready, nothing below it may be picked.
          const top = Math.min(...ms.filter((m) => m.status !== 'draining').map((m) => m.priority));
          const topFull = Number.isFinite(top) && ms.every((m) => m.priority !== top || m.status !== 'unavailable');
          for (let k = 0; k < 60; k++) {
            let index = -1;
            const err = caught(() => (index = policy.pick(cands, { key: `k${k}` })));
            if (err !== undefined) {
              expect(['NoEligibleCandidates', 'PanicRejected']).toContain(err.code);
              continue;
            }
            const c = cands[index]!;
            const level = share.get(c.priority)!;
            expect(level.shareMillionths).toBeGreaterThan(0);
            expect(c.isEligible() || (level.panic && c.isPanicEligible())).toBe(true);
            if (topFull) expect(c.priority).toBe(top);
          }
        }),
        { numRuns: 150 },
      );
    });
  }

  it('every inner policy: P0 fully available with a large-weight P1 standby → 0 of 2,000 picks on P1', () => {
    const cands = [...level(0, 3, 3), ...level(1, 2, 2, 1000)];
    for (const name of Object.keys(INNER)) {
      const policy = layered(name, 4);
      for (let k = 0; k < 2000; k++) expect(cands[policy.pick(cands, { key: `user-${k}` })]!.priority).toBe(0);
    }
  });

  it('every inner policy: P0 at 50 % raw (70 % effective) spills 30 % to P1 — 30,000 picks, P1 within 5σ of 9,000', () => {
    // p = 0.3, N = 30,000: σ ≈ 79.4, band ±397 (1.3 share points; "no spill" or "spill by raw availability" fail by > 1,000).
    const N = 30_000;
    const cands = [...level(0, 4, 2), ...level(1, 4, 4)];
    for (const name of Object.keys(INNER)) {
      const policy = layered(name, 9);
      let p1 = 0;
      for (let k = 0; k < N; k++) {
        const c = cands[policy.pick(cands, { key: `user-${k}` })]!;
        expect(c.isEligible()).toBe(true);
        if (c.priority === 1) p1++;
      }
      expect(Math.abs(p1 - 0.3 * N), name).toBeLessThanOrEqual(5 * binomialSigma(N, 0.3));
    }
  });

  it('every inner policy: overprovisioning 140 % keeps all traffic on P0 at 5 of 7 available (exactly 100 % effective)', () => {
    const cands = [...level(0, 7, 5), ...level(1, 2, 2)];
    for (const name of Object.keys(INNER)) {
      const policy = layered(name, 2);
      for (let k = 0; k < 1000; k++) expect(cands[policy.pick(cands, { key: `k${k}` })]!.priority).toBe(0);
    }
  });

  it('every inner policy: use-all panic (P0 at 1 of 4 ready, nothing else) routes over every panic-eligible P0 member by weight', () => {
    // Global shortage (35 % effective); raw 25 % < 50 %: panic over all four. p = 1/4 each, N = 8,000: σ ≈ 38.7, band ±194.
    const N = 8000;
    const cands = level(0, 4, 1);
    for (const name of Object.keys(INNER)) {
      const policy = layered(name, 3);
      const counts = [0, 0, 0, 0];
      for (let k = 0; k < N; k++) counts[policy.pick(cands, { key: `user-${k}` })]!++;
      expect(policy.decide(cands)).toMatchObject({ priority: 0, mode: 'panic' });
      // Keyed policies place keys by hash: each member still takes a quarter of distinct keys.
      for (const c of counts)
        expect(Math.abs(c - N / 4), `${name}: ${counts.join(' / ')}`).toBeLessThanOrEqual(5 * binomialSigma(N, 1 / 4));
    }
  });

  it('every inner policy: fail-closed panic throws PanicRejected; a panic-ineligible member is never revived', () => {
    const closed = level(0, 4, 1);
    const optOut = [...level(0, 3, 1), new Prioritized(new Backend('stay-down', { status: 'unavailable' }), 0).withPanicEligibility(false)];
    for (const name of Object.keys(INNER)) {
      expect(thrown(() => layered(name, 1, { panicMode: 'failClosed' }).pick(closed)).code).toBe('PanicRejected');
      const policy = layered(name, 1);
      for (let k = 0; k < 500; k++) expect(optOut[policy.pick(optOut, { key: `k${k}` })]!.id).not.toBe('stay-down');
    }
  });

  it('with one healthy group nothing is drawn: the inner policy alone gives the same seeded sequence', () => {
    const loads = [3, 1, 4, 1, 5, 9, 2, 6];
    const bare = loads.map((l, i) => new Backend(`b${i}`, { load: () => l }));
    const wrapped = bare.map((b) => new Prioritized(b, 0));
    const alone = new PowerOfTwo({ seed: 77 });
    const inside = new PriorityWeightedRandom({ prepared: true, seed: 1, within: () => new PowerOfTwo({ seed: 77 }) });
    const a = Array.from({ length: 200 }, () => alone.pick(bare));
    const b = Array.from({ length: 200 }, () => inside.pick(wrapped));
    expect(b).toEqual(a);
  });

  it('keyed inside the layer: a key keeps its member across instances with different seeds, even while P0 spills', () => {
    const cands = [...level(0, 4, 2), ...level(1, 4, 4)];
    const a = layered('Maglev', 1);
    const b = layered('Maglev', 999);
    let spilled = 0;
    for (let k = 0; k < 2000; k++) {
      const i = a.pick(cands, { key: `user-${k}` });
      expect(b.pick(cands, { key: `user-${k}` })).toBe(i);
      expect(a.pick(cands, { key: `user-${k}` })).toBe(i);
      if (cands[i]!.priority === 1) spilled++;
    }
    // The key's hash chooses the priority: ≈ 30 % of keys spill (p = 0.3, N = 2,000: ±5σ = ±102).
    expect(Math.abs(spilled - 600)).toBeLessThanOrEqual(5 * binomialSigma(2000, 0.3));
  });

  it('locality inside the layer: X (weight 1, half available) and Y (weight 2) split ≈ 26 / 74 under least-loaded', () => {
    // Seed 001's example: effective weights 70 and 200 → X 70/270 = 25.9 %. N = 20,000: σ ≈ 62, band ±310.
    const N = 20_000;
    const x = [0, 1].map(
      (i) => new Localized(new Prioritized(new Backend(`x${i}`, { status: i === 0 ? 'ready' : 'unavailable' }), 0), 'X'),
    );
    const y = [0, 1].map((i) => new Localized(new Prioritized(new Backend(`y${i}`), 0), 'Y').withLocalityWeight(2));
    const cands = [...x, ...y];
    const policy = new LocalityWeightedRandom({ prepared: true, seed: 5, within: (g) => new LeastLoaded({ seed: g }) });
    let inX = 0;
    for (let k = 0; k < N; k++) if (cands[policy.pick(cands)]!.locality === 'X') inX++;
    expect(policy.plan(cands).priorities[0]!.localities!.map((l) => l.locality)).toEqual(['X', 'Y']);
    expect(Math.abs(inX - (N * 70) / 270)).toBeLessThanOrEqual(5 * binomialSigma(N, 70 / 270));
  });

  it('refuses within on a per-decision form, and a within that is not a function', () => {
    expect(thrown(() => new PriorityWeightedRandom({ within: () => new PowerOfTwo() })).message).toMatch(
      /^options\.within: needs the prepared form \(prepared: true\)/,
    );
    expect(thrown(() => new PriorityWeightedRandom({ prepared: true, within: 3 as unknown as () => Policy })).message).toBe(
      'options.within: must be a function returning a policy, got 3',
    );
    expect(thrown(() => new PriorityWeightedRandom({ prepared: true, stickyKeys: 'yes' as unknown as boolean })).code).toBe(
      'InvalidConfig',
    );
  });

  it('keeps each group’s policy across prepares: a Maglev table is built once per group, not per pick', () => {
    let built = 0;
    class CountingMaglev extends Maglev {
      override prepare(c: Parameters<Maglev['prepare']>[0]): void {
        built++;
        super.prepare(c);
      }
    }
    const policy = new PriorityWeightedRandom({
      prepared: true,
      seed: 1,
      within: () => new CountingMaglev({ tableSize: 31 }),
      stickyKeys: true,
    });
    const cands = [...level(0, 3, 3), ...level(1, 2, 2)];
    for (let k = 0; k < 500; k++) policy.pick(cands, { key: `k${k}` });
    expect(built).toBe(2);
  });
});
