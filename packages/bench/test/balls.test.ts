import { describe, expect, it } from 'vitest';
import { ballsRow, inverseGamma, lnGamma, oneChoiceTheory, runBalls, staleMaxLoad, throwBalls, twoChoiceTheory } from '../src/balls.js';
import { LeastLoaded, PowerOfTwo, Random } from 'poise-lb';

describe('Γ and Γ⁻¹', () => {
  it('lnGamma matches factorials: Γ(k + 1) = k!', () => {
    let f = 1;
    for (let k = 1; k <= 20; k++) {
      f *= k;
      expect(lnGamma(k + 1)).toBeCloseTo(Math.log(f), 10);
    }
    expect(lnGamma(0.5)).toBeCloseTo(Math.log(Math.sqrt(Math.PI)), 12);
  });

  it('inverseGamma inverts Γ on the increasing branch', () => {
    expect(inverseGamma(24)).toBeCloseTo(5, 9);
    expect(inverseGamma(3_628_800)).toBeCloseTo(11, 9);
    for (const x of [2, 2.7, 7.3, 19.9]) expect(inverseGamma(Math.exp(lnGamma(x)))).toBeCloseTo(x, 8);
  });

  it('the theory column: one choice ≈ 7.9 at n = 10^5, two choices ln ln n / ln 2 ≈ 3.525', () => {
    expect(oneChoiceTheory(1e5)).toBeCloseTo(7.92, 2);
    expect(oneChoiceTheory(1e3)).toBeCloseTo(5.67, 2);
    expect(twoChoiceTheory(1e5)).toBeCloseTo(3.525, 3);
  });
});

describe('balls into bins with the library policies (seeded)', () => {
  it('n = 10^5: two choices leave a max load of 3 or 4, one choice at least 6', () => {
    const row = ballsRow(1e5, 2, 11);
    for (const m of row.twoChoice) expect([3, 4]).toContain(m);
    for (const m of row.oneChoice) expect(m).toBeGreaterThanOrEqual(6);
  });

  it('two choices beat one choice at every size', () => {
    for (const n of [1e3, 1e4]) {
      for (let s = 0; s < 5; s++) {
        expect(throwBalls(n, n, new PowerOfTwo({ seed: s }))).toBeLessThan(throwBalls(n, n, new Random({ seed: s })));
      }
    }
  });

  it('every ball lands: fresh least-loaded with one selector fills n bins exactly once each', () => {
    expect(throwBalls(500, 500, new LeastLoaded({ seed: 1 }))).toBe(1);
    expect(staleMaxLoad(500, 1000, 1, 1, (s) => new LeastLoaded({ seed: s }), 4)).toBe(2);
  });

  it('stale loads: least-loaded herds as b grows, and beyond small b it is worse than two choices', () => {
    const n = 500;
    const m = 4 * n;
    const ll = (b: number): number => staleMaxLoad(n, m, 8, b, (s) => new LeastLoaded({ seed: s }), 21 + b);
    const p2 = (b: number): number => staleMaxLoad(n, m, 8, b, (s) => new PowerOfTwo({ seed: s }), 21 + b);
    expect(ll(1)).toBeLessThanOrEqual(p2(1)); // fresh information: least-loaded is best
    expect(ll(256)).toBeGreaterThan(2 * ll(1)); // herding: max load grows with b
    expect(ll(256)).toBeGreaterThan(p2(256) + 5);
    expect(p2(256)).toBeLessThanOrEqual(p2(1) + 4); // graceful
  });

  it('runBalls reports both parts and replays exactly with a seed', () => {
    const opts = { ns: [1000], seed: 9, staleBins: 200, bs: [1, 64], staleTrials: 1 };
    const a = runBalls(opts);
    expect(runBalls(opts)).toEqual(a);
    expect(a.mEqualsN[0]!.trials).toBe(20);
    expect(a.stale.rows.map((r) => r.b)).toEqual([1, 64]);
    expect(a.stale.m).toBe(800);
  });
});
