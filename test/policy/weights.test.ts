/**
 * Every single-tier policy follows weights at equal loads (issue 28).
 *
 * Distribution tests are hypothesis tests with their power written down:
 * weights 1 : 2 : 3 : 4 (shares 0.1 … 0.4) over N = 40,000 picks; a count is
 * binomial, σᵢ = √(N·pᵢ·(1 − pᵢ)) (60 … 98), and the band is ±5σᵢ (±0.75 to
 * ±1.2 share points): a correct sampler leaves it with probability below
 * 6·10⁻⁷ per member, and the unweighted answer (0.25 each, 6,000 picks off
 * for the weight-1 member, 61σ) or a bias of 2 share points fails it. The
 * deterministic rotations are exact (σ = 0). Keyed policies hash 40,000
 * distinct keys onto 40 members (ten of each weight) and the shares are of
 * each weight class, whose table quantisation (Maglev) or arc variance
 * (ring hash, written per test) widens the band.
 */
import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { EdfRotation } from '../../src/policy/edf.js';
import { LeastLoaded } from '../../src/policy/least-loaded.js';
import { Maglev } from '../../src/policy/maglev.js';
import { PowerOfTwo } from '../../src/policy/power-of-two.js';
import { Random } from '../../src/policy/random.js';
import { Rendezvous } from '../../src/policy/rendezvous.js';
import { RingHash } from '../../src/policy/ring-hash.js';
import { RoundRobin } from '../../src/policy/round-robin.js';
import { SmoothWeightedRoundRobin } from '../../src/policy/smooth-weighted.js';
import type { Policy } from '../../src/policy/types.js';
import { WeightedRandom } from '../../src/policy/weighted-random.js';
import fc from 'fast-check';
import { backends, binomialSigma, histogram } from '../helpers/policy.js';

const WEIGHTS = [1, 2, 3, 4];
const W = 10;
const N = 40_000;

/** Asserts every count within ±k·σ of N·wᵢ/Σw. */
function followsWeights(counts: readonly number[], weights: readonly number[], k = 5): void {
  const total = weights.reduce((a, b) => a + b, 0);
  const n = counts.reduce((a, b) => a + b, 0);
  weights.forEach((w, i) => {
    const p = w / total;
    expect(Math.abs(counts[i]! - n * p), `member ${i} (weight ${w}): ${counts[i]} of ${n}`).toBeLessThanOrEqual(k * binomialSigma(n, p));
  });
}

const STOCHASTIC: Record<string, (seed: number) => Policy> = {
  WeightedRandom: (seed) => new WeightedRandom({ seed }),
  Random: (seed) => new Random({ seed }),
  PowerOfTwo: (seed) => new PowerOfTwo({ seed }),
  LeastLoaded: (seed) => new LeastLoaded({ seed }),
};

describe('at equal loads every policy follows weights', () => {
  for (const [name, make] of Object.entries(STOCHASTIC)) {
    it(`${name}: 1 : 2 : 3 : 4 within 5σ over 40,000 picks (loads all 0)`, () => {
      const policy = make(28);
      const slice = backends(4, { weights: WEIGHTS });
      followsWeights(
        histogram(4, N, () => policy.pick(slice)),
        WEIGHTS,
      );
    });
  }

  it('PowerOfTwo: also at equal nonzero loads (all 7), since it compares loads of members drawn by weight', () => {
    const p2c = new PowerOfTwo({ seed: 5 });
    const slice = backends(4, { weights: WEIGHTS, loads: [7, 7, 7, 7] });
    followsWeights(
      histogram(4, N, () => p2c.pick(slice)),
      WEIGHTS,
    );
  });

  it('PowerOfTwo with weights: exactly two load() reads per pick; the strictly heaviest only when drawn twice (p² = 1/4, within 5σ)', () => {
    let reads = 0;
    const loads = [0, 1, 5];
    const slice = loads.map((l, i) => new Backend(`b${i}`, { weight: i + 1, load: () => (reads++, l) }));
    const p2c = new PowerOfTwo({ seed: 7 });
    const picks = 2000;
    const counts = histogram(3, picks, () => p2c.pick(slice));
    expect(reads).toBe(2 * picks);
    // Drawn by weight with replacement, b2 (weight 3 of 6) is both draws with p² = 1/4, and loses every other pair.
    expect(Math.abs(counts[2]! - picks / 4)).toBeLessThanOrEqual(5 * binomialSigma(picks, 1 / 4));
    // b0 (the lightest) wins every pair it is in: 1 − (5/6)² = 11/36.
    expect(Math.abs(counts[0]! - (picks * 11) / 36)).toBeLessThanOrEqual(5 * binomialSigma(picks, 11 / 36));
  });

  it('RoundRobin (EDF) and SmoothWeightedRoundRobin: exactly wᵢ picks in every Σw from a fresh start', () => {
    for (const policy of [new RoundRobin(), new SmoothWeightedRoundRobin()]) {
      const slice = backends(4, { weights: WEIGHTS });
      for (let cycle = 0; cycle < N / W; cycle++) expect(histogram(4, W, () => policy.pick(slice))).toEqual(WEIGHTS);
    }
  });

  /** Picks of 40,000 distinct keys on 40 members (weights 1..4 in turn), summed by weight class. */
  const byWeightClass = (policy: Policy): number[] => {
    const slice = backends(40, { weights: Array.from({ length: 40 }, (_, i) => (i % 4) + 1) });
    const byClass = [0, 0, 0, 0];
    for (let k = 0; k < N; k++) byClass[policy.pick(slice, { key: `user-${k}` }) % 4]!++;
    return byClass;
  };
  /** Each class within 5·√(σ²binomial + extra²) of N·w/Σw, `extra(p, w)` the table's own spread. */
  const classesFollow = (byClass: readonly number[], extra: (p: number, w: number) => number): void => {
    WEIGHTS.forEach((w, c) => {
      const p = w / W;
      const sigma = Math.sqrt(binomialSigma(N, p) ** 2 + extra(p, w) ** 2);
      expect(Math.abs(byClass[c]! - N * p), `class of weight ${w}: ${byClass[c]}`).toBeLessThanOrEqual(5 * sigma);
    });
  };

  it('Rendezvous: each weight class within 5σ of its share over 40,000 keys on 40 members', () => {
    classesFollow(byWeightClass(new Rendezvous()), () => 0);
  });

  it('Maglev: each weight class within 5σ and the table quantisation (one slot per member) of its share', () => {
    // A member's slot count is ⌊wᵢ·M/Σw⌋ plus at most one leftover slot: ten members move a class share by ≤ 10/M.
    classesFollow(byWeightClass(new Maglev()), () => (10 / 65_537) * N);
  });

  it('RingHash: each weight class within 5·√(σ²binomial + σ²arcs) of its share', () => {
    // Ketama gives member i ⌊wᵢ/Σw·40·n⌋·4 points (64·wᵢ here, 6,400 in all); the share of a class of m points
    // varies by about 1/√m of itself from the ring's random arcs, m = 640·w for a class of ten members.
    classesFollow(byWeightClass(new RingHash()), (p, w) => (N * p) / Math.sqrt(640 * w));
  });
});

describe('LeastLoaded compares load ÷ weight', () => {
  it('under held load, every member settles at N·wᵢ/Σw (within n = 4) after each of 4,000 picks', () => {
    const held = [0, 0, 0, 0];
    const slice = WEIGHTS.map((w, i) => new Backend(`b${i}`, { weight: w, load: () => held[i]! }));
    const ll = new LeastLoaded({ seed: 3 });
    for (let t = 1; t <= 4000; t++) {
      held[ll.pick(slice)]!++;
      WEIGHTS.forEach((w, i) => {
        expect(Math.abs(held[i]! - (t * w) / W)).toBeLessThan(4);
      });
    }
  });

  it('a weight-2 member with 4 open is as loaded as a weight-1 member with 2: ties split 2 : 1', () => {
    const slice = [new Backend('a', { weight: 2, load: () => 4 }), new Backend('b', { weight: 1, load: () => 2 })];
    const ll = new LeastLoaded({ seed: 9 });
    followsWeights(
      histogram(2, 30_000, () => ll.pick(slice)),
      [2, 1],
    );
  });

  it('the strictly lower load ÷ weight always wins: weight 4 with 7 open beats weight 1 with 2', () => {
    const slice = [new Backend('a', { weight: 4, load: () => 7 }), new Backend('b', { weight: 1, load: () => 2 })];
    const ll = new LeastLoaded({ seed: 1 });
    for (let i = 0; i < 500; i++) expect(ll.pick(slice)).toBe(0);
  });
});

describe('RoundRobin with weights: the EDF rotation', () => {
  it('serves weights 2, 1, 1 as a, then the t = 1 tie in index order: a b c', () => {
    const rr = new RoundRobin();
    const slice = backends(3, { weights: [2, 1, 1] });
    expect(Array.from({ length: 8 }, () => rr.pick(slice))).toEqual([0, 0, 1, 2, 0, 0, 1, 2]);
  });

  it('law: any weights, every Σw picks from a fresh start serve member i exactly wᵢ times', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 2, maxLength: 12 }), (weights) => {
        const rr = new RoundRobin();
        const slice = backends(weights.length, { weights });
        const total = weights.reduce((a, b) => a + b, 0);
        for (let cycle = 0; cycle < 3; cycle++) expect(histogram(weights.length, total, () => rr.pick(slice))).toEqual(weights);
      }),
      { numRuns: 200 },
    );
  });

  it('a membership change keeps every survivor in its place: the member due next is still due next', () => {
    const rr = new RoundRobin();
    const slice = backends(3, { weights: [3, 2, 1] });
    const seq = Array.from({ length: 4 }, () => rr.pick(slice));
    // Deadlines: a 1/3, 2/3, 1; b 1/2, 1; c 1 → a b a a (tie at 1: a first, then b, c).
    expect(seq).toEqual([0, 1, 0, 0]);
    // Now t = 1. c leaves, d (weight 1) joins: b was due at 1 (due now), a at 4/3, d is due after one period.
    // b (0), a (1/3), b (1/2), a (2/3), then the tie at 1: a, b, d. A restart would serve a first.
    const next = [slice[0]!, slice[1]!, new Backend('d', { weight: 1 })];
    expect(Array.from({ length: 7 }, () => rr.pick(next))).toEqual([1, 0, 1, 0, 0, 1, 2]);
  });

  it("start: 'random' begins at a seeded offset: the same seed, the same rotation; eight seeds, more than one start", () => {
    const slice = backends(8, { weights: [1, 2, 1, 2, 1, 2, 1, 2] });
    const run = (seed: number): number[] => {
      const rr = new RoundRobin({ seed, start: 'random' });
      return Array.from({ length: 12 }, () => rr.pick(slice));
    };
    expect(run(11)).toEqual(run(11));
    expect(new Set([1, 2, 3, 4, 5, 6, 7, 8].map((s) => run(s)[0])).size).toBeGreaterThan(1);
    const equal = backends(5);
    const starts = new Set([1, 2, 3, 4, 5, 6, 7, 8].map((seed) => new RoundRobin({ seed, start: 'random' }).pick(equal)));
    expect(starts.size).toBeGreaterThan(1);
  });

  it('EdfRotation is a heap: 4,096 members of weights 1..4 serve exactly their weights per Σw', () => {
    const n = 4096;
    const weights = new Float64Array(n).map((_, i) => (i % 4) + 1);
    const edf = new EdfRotation();
    edf.reset(weights, n);
    const total = (n / 4) * W;
    const counts = new Array<number>(n).fill(0);
    for (let k = 0; k < total; k++) counts[edf.next()]!++;
    expect(counts).toEqual(Array.from(weights));
  });
});
