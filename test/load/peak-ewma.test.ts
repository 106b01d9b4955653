import { describe, expect, it } from 'vitest';
import { PeakEwma, decayEstimate, observeSample } from '../../src/load/peak-ewma.js';
import { PoiseError } from '../../src/core/errors.js';

/** A hand-driven clock in milliseconds. */
function manualClock(start = 0): { now: () => number; advance: (ms: number) => void; set: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms), set: (ms) => (t = ms) };
}

describe('PeakEwma', () => {
  it("starts at Sōzu's 50 ms and decays with τ = 1 s", () => {
    const clock = manualClock(1_000);
    const e = new PeakEwma({ clock: clock.now });
    expect(e.tauMs).toBe(1000);
    expect(e.estimate()).toBe(50);
    clock.advance(1000);
    expect(e.estimate()).toBe(50 * Math.exp(-1));
    clock.advance(1000);
    expect(e.estimate()).toBe(50 * Math.exp(-2));
  });

  it('reads do not change the state: decaying twice equals decaying once', () => {
    const clock = manualClock();
    const e = new PeakEwma({ clock: clock.now, initialMs: 80 });
    clock.advance(300);
    e.estimate();
    clock.advance(700);
    expect(e.estimate()).toBe(80 * Math.exp(-1));
  });

  it('a sample above the decayed estimate replaces it (peak rule)', () => {
    const clock = manualClock();
    const e = new PeakEwma({ clock: clock.now });
    clock.advance(10);
    e.observe(200);
    expect(e.estimate()).toBe(200);
    // 2 s later the decayed estimate is 200/e² ≈ 27.07; 30 is above it, so it replaces it.
    clock.advance(2000);
    e.observe(30);
    expect(e.estimate()).toBe(30);
  });

  it('a sample below the decayed estimate is blended with w = e^(−Δt/τ)', () => {
    const clock = manualClock();
    const e = new PeakEwma({ clock: clock.now, initialMs: 100 });
    clock.advance(500);
    e.observe(10);
    const w = Math.exp(-0.5);
    const expected = 100 * w + 10 * (1 - w);
    expect(e.estimate()).toBe(expected);
    expect(expected).toBeCloseTo(64.5878, 4);
    // A sample at the same instant (Δt = 0, w = 1) below the estimate changes nothing.
    e.observe(5);
    expect(e.estimate()).toBe(expected);
  });

  it('honours a custom τ and initial estimate', () => {
    const clock = manualClock();
    const e = new PeakEwma({ clock: clock.now, tauMs: 10_000, initialMs: 30 });
    clock.advance(10_000);
    expect(e.estimate()).toBe(30 * Math.exp(-1));
  });

  it('cost = estimate × (pending + 1)', () => {
    const clock = manualClock();
    const e = new PeakEwma({ clock: clock.now });
    expect(e.cost(0)).toBe(50);
    expect(e.cost(3)).toBe(200);
    clock.advance(1000);
    expect(e.cost(1)).toBe(100 / Math.E);
  });

  it('a clock that runs backwards decays nothing', () => {
    const clock = manualClock(5000);
    const e = new PeakEwma({ clock: clock.now });
    clock.set(4000);
    expect(e.estimate()).toBe(50);
    e.observe(20);
    expect(e.estimate()).toBe(50);
  });

  it.each([
    [{ tauMs: 0 }, 'options.tauMs: must be a finite number > 0 (milliseconds), got 0'],
    [{ tauMs: -1 }, 'options.tauMs: must be a finite number > 0 (milliseconds), got -1'],
    [{ tauMs: Number.POSITIVE_INFINITY }, 'options.tauMs: must be a finite number > 0 (milliseconds), got Infinity'],
    [{ initialMs: -5 }, 'options.initialMs: must be a finite number >= 0 (milliseconds), got -5'],
    [{ initialMs: Number.NaN }, 'options.initialMs: must be a finite number >= 0 (milliseconds), got NaN'],
    [{ clock: 5 as unknown as () => number }, 'options.clock: must be a function returning milliseconds, got 5'],
  ])('rejects %o with an exact message', (options, message) => {
    expect(() => new PeakEwma(options)).toThrow(PoiseError);
    expect(() => new PeakEwma(options)).toThrow(message);
    try {
      new PeakEwma(options);
    } catch (err) {
      expect((err as PoiseError).code).toBe('InvalidConfig');
    }
  });

  it('rejects a negative or non-finite sample and keeps the previous estimate', () => {
    const e = new PeakEwma({ clock: () => 0 });
    expect(() => e.observe(-1)).toThrow('sampleMs: must be a finite number >= 0 (milliseconds), got -1');
    expect(() => e.observe(Number.NaN)).toThrow('sampleMs: must be a finite number >= 0 (milliseconds), got NaN');
    expect(e.estimate()).toBe(50);
  });
});

describe('decayEstimate / observeSample (the float-millisecond read and update of PeakEwma)', () => {
  it('decayEstimate is est · e^(−Δt/τ)', () => {
    expect(decayEstimate(100, 0, 1000, 1000)).toBe(36.787944117144235);
    expect(decayEstimate(100, 2000, 2000, 1000)).toBe(100);
    expect(decayEstimate(100, 2000, 1000, 1000)).toBe(100);
  });

  it('observeSample follows the peak rule, then the EWMA', () => {
    expect(observeSample(50, 0, 200, 10, 1000)).toBe(200);
    expect(observeSample(50, 0, 10, 1000, 1000)).toBe(50 / Math.E + 10 * (1 - 1 / Math.E));
    // Decayed estimate 50/e ≈ 18.39: 19 is a peak over it, 18 is not.
    expect(observeSample(50, 0, 19, 1000, 1000)).toBe(19);
    expect(observeSample(50, 0, 18, 1000, 1000)).toBe(50 / Math.E + 18 * (1 - 1 / Math.E));
  });

  it('agrees with the class', () => {
    const clock = manualClock();
    const e = new PeakEwma({ clock: clock.now });
    let est = 50;
    let last = 0;
    const samples = [12, 80, 40, 41, 3, 500, 20];
    for (const [i, s] of samples.entries()) {
      clock.advance(137 * (i + 1));
      e.observe(s);
      est = observeSample(est, last, s, clock.now(), 1000);
      last = clock.now();
      expect(e.estimate()).toBe(est);
    }
    clock.advance(250);
    expect(e.estimate()).toBe(decayEstimate(est, last, clock.now(), 1000));
  });
});
