import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { Rng } from '../../src/core/rng.js';
import { PowerOfTwo } from '../../src/policy/power-of-two.js';
import { agreements, backends, binomialSigma } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

describe('PowerOfTwo', () => {
  it('calls load() exactly twice per pick, on two distinct members, over 64 candidates', () => {
    const calls = new Array<number>(64).fill(0);
    const touched: number[] = [];
    const slice = Array.from(
      { length: 64 },
      (_, i) =>
        new Backend(`b${i}`, {
          load: () => {
            calls[i]!++;
            touched.push(i);
            return i % 7;
          },
        }),
    );
    const p2c = new PowerOfTwo({ seed: 1 });
    for (let k = 0; k < 10_000; k++) {
      touched.length = 0;
      const i = p2c.pick(slice);
      expect(touched.length).toBe(2);
      expect(touched[0]).not.toBe(touched[1]);
      expect(touched).toContain(i);
    }
    expect(calls.reduce((a, b) => a + b, 0)).toBe(20_000);
  });

  it('samples two, measured from the distribution alone: 1 light of 100 wins ≈ 2% of picks', () => {
    // The light member wins exactly when it is one of the two drawn: p = 2/100.
    // N = 100,000: σ(hits) = √(N·0.02·0.98) ≈ 44.3, i.e. 0.044 on the ×100/N scale;
    // the band [1.5, 2.5] is ±11σ. A full scan gives 100, a single sample 1.
    const slice = backends(100, { loads: Array.from({ length: 100 }, (_, i) => (i === 37 ? 0 : 10)) });
    const p2c = new PowerOfTwo({ seed: 2 });
    const picks = 100_000;
    let hits = 0;
    for (let k = 0; k < picks; k++) if (p2c.pick(slice) === 37) hits++;
    expect(binomialSigma(picks, 0.02)).toBeCloseTo(44.27, 1);
    const metric = (hits / picks) * 100;
    expect(metric).toBeGreaterThanOrEqual(1.5);
    expect(metric).toBeLessThanOrEqual(2.5);
  });

  it('never returns the strictly heaviest of [0, 1, 5]', () => {
    const slice = backends(3, { loads: [0, 1, 5] });
    const p2c = new PowerOfTwo({ seed: 7 });
    for (let i = 0; i < 2000; i++) expect(p2c.pick(slice)).not.toBe(2);
  });

  it('always returns the lighter of 7 vs 1', () => {
    const slice = backends(2, { loads: [7, 1] });
    const p2c = new PowerOfTwo({ seed: 8 });
    for (let i = 0; i < 2000; i++) expect(p2c.pick(slice)).toBe(1);
  });

  it('decides an exact tie by the coin, not by draw order: second-drawn wins 30–70% of 2,000 ties', () => {
    // Fair coin: σ = √(2000·0.25) ≈ 22.4 wins (1.1%); the band 600–1400 is ±17.9σ.
    // "First drawn wins" gives 0%, "second drawn wins" 100%.
    let order: number[] = [];
    const slice = Array.from({ length: 10 }, (_, i) => new Backend(`b${i}`, { load: () => (order.push(i), 3) }));
    const p2c = new PowerOfTwo({ seed: 9 });
    let secondWins = 0;
    const ties = 2000;
    for (let k = 0; k < ties; k++) {
      order = [];
      const i = p2c.pick(slice);
      expect(order).toHaveLength(2);
      if (i === order[1]) secondWins++;
      else expect(i).toBe(order[0]);
    }
    expect(secondWins / ties).toBeGreaterThanOrEqual(0.3);
    expect(secondWins / ties).toBeLessThanOrEqual(0.7);
  });

  it('Empty for 0 candidates; the only one for 1 (without reading its load)', () => {
    const p2c = new PowerOfTwo({ seed: 1 });
    expect(thrown(() => p2c.pick([])).code).toBe('Empty');
    let reads = 0;
    const one = [new Backend('solo', { load: () => ++reads })];
    expect(p2c.pick(one)).toBe(0);
    expect(reads).toBe(0);
    expect(thrown(() => p2c.pick(backends(1, { status: () => 'draining' }))).code).toBe('NoEligibleCandidates');
    expect(thrown(() => p2c.pick(backends(5, { status: () => 'unavailable' }))).code).toBe('NoEligibleCandidates');
  });

  it('never returns an ineligible member and still compares two eligible loads', () => {
    // Eligible: 1 (load 9), 4 (load 2); every pick with both eligible drawn returns 4.
    const slice = backends(6, { loads: [0, 9, 0, 0, 2, 0], status: (i) => (i === 1 || i === 4 ? 'ready' : 'draining') });
    const p2c = new PowerOfTwo({ seed: 11 });
    for (let k = 0; k < 500; k++) expect(p2c.pick(slice)).toBe(4);
  });

  it('replays an exact seeded sequence', () => {
    const slice = backends(8, { loads: [3, 1, 4, 1, 5, 9, 2, 6] });
    const p2c = new PowerOfTwo({ seed: 42 });
    const seq = Array.from({ length: 16 }, () => p2c.pick(slice));
    expect(seq).toEqual(SEQ_SEED_42);
  });

  it("draws Sōzu's pair: first = below(n), second = below(n − 1) bumped past first", () => {
    const loads = [30, 10, 40, 15, 50, 90, 20, 60];
    const slice = backends(8, { loads });
    const p2c = new PowerOfTwo({ seed: 77 });
    const mirror = new Rng(77);
    for (let k = 0; k < 1000; k++) {
      const a = mirror.below(8);
      let b = mirror.below(7);
      if (b >= a) b++;
      expect(p2c.pick(slice)).toBe(loads[a]! < loads[b]! ? a : b);
    }
  });

  it('two unseeded instances are uncorrelated; two with the same seed agree exactly', () => {
    // Equal loads on 64 members: every pick is uniform, so two independent instances
    // agree with p = 1/64 per pick: mean 156.25 of 10,000, σ ≈ 12.4; bound mean + 10σ = 280.
    const slice = backends(64);
    const run = (p: PowerOfTwo): number[] => Array.from({ length: 10_000 }, () => p.pick(slice));
    expect(agreements(run(new PowerOfTwo()), run(new PowerOfTwo()))).toBeLessThan(280);
    expect(run(new PowerOfTwo({ seed: 5 }))).toEqual(run(new PowerOfTwo({ seed: 5 })));
  });
});

const SEQ_SEED_42 = [6, 1, 2, 3, 6, 7, 1, 3, 6, 4, 2, 3, 4, 1, 1, 0];
