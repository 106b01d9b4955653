import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Backoff, MAX_BACKOFF_MS } from '../../src/core/backoff.js';
import { Rng } from '../../src/core/rng.js';
import { thrown } from '../helpers/thrown.js';

describe('Backoff', () => {
  it('replays the exact sequence for a seed: base + u · (ceiling − base), ceiling = min(max, base · 2^(n+1))', () => {
    const b = new Backoff({ baseMs: 100, maxMs: 5000 }, new Rng(42));
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((n) => b.delayMs(n))).toEqual([
      115.37718059965614, 105.42538813547363, 474.42341664296, 1190.871172233879, 1876.0246285885557, 1509.7743251367888, 4267.19032065167,
      1586.3861067569487,
    ]);
    // The same law spelled out against the raw draws of the same seed.
    const u = new Rng(42);
    const again = new Backoff({ baseMs: 100, maxMs: 5000 }, new Rng(42));
    for (const n of [0, 1, 2, 3, 4, 5, 6, 7]) {
      const ceiling = Math.min(5000, 100 * 2 ** (n + 1));
      expect(again.ceilingMs(n)).toBe(ceiling);
      expect(again.delayMs(n)).toBe(100 + u.float() * (ceiling - 100));
    }
  });

  it('two OS-seeded backoffs do not share a sequence', () => {
    const a = new Backoff({ baseMs: 1, maxMs: 2 ** 20 });
    const b = new Backoff({ baseMs: 1, maxMs: 2 ** 20 });
    const da = Array.from({ length: 8 }, () => a.delayMs(19));
    const db = Array.from({ length: 8 }, () => b.delayMs(19));
    expect(da).not.toEqual(db);
  });

  it('every delay lies in [baseMs, ceiling] and ceilings never decrease nor pass maxMs (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.001, max: 10_000, noNaN: true }),
        fc.double({ min: 1, max: 100_000, noNaN: true }),
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: -3, max: 200 }),
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        (baseMs, spread, maxExponent, attempt, seed) => {
          const maxMs = Math.min(baseMs * spread, MAX_BACKOFF_MS);
          const b = new Backoff({ baseMs, maxMs, maxExponent }, new Rng(seed));
          const ceiling = b.ceilingMs(Math.max(attempt, 0));
          expect(ceiling).toBeLessThanOrEqual(maxMs);
          expect(ceiling).toBeLessThanOrEqual(baseMs * 2 ** maxExponent);
          expect(b.ceilingMs(Math.max(attempt, 0) + 1)).toBeGreaterThanOrEqual(ceiling);
          for (let i = 0; i < 16; i++) {
            const d = b.delayMs(attempt);
            expect(d).toBeGreaterThanOrEqual(baseMs);
            // Rounding of base + u · (ceiling − base) with u just below 1 may reach the ceiling (found by this property).
            if (ceiling > baseMs) expect(d).toBeLessThanOrEqual(ceiling);
            else expect(d).toBe(baseMs);
          }
        },
      ),
    );
  });

  it('keeps the jitter at the cap: late delays are uniform in [base, max), not piled on max', () => {
    // 20,000 draws of U(100, 1000): the mean is 550 with standard error 900/√12/√20000 ≈ 1.84 ms;
    // a band of ±10 ms is over 5 standard errors, and capping after the draw (mean ≈ 1000) lies far outside.
    const b = new Backoff({ baseMs: 100, maxMs: 1000, maxExponent: 30 }, new Rng(5));
    let sum = 0;
    let atCap = 0;
    for (let i = 0; i < 20_000; i++) {
      const d = b.delayMs(25);
      sum += d;
      if (d >= 999) atCap++;
    }
    expect(Math.abs(sum / 20_000 - 550)).toBeLessThan(10);
    // P(d >= 999) = 1/900: about 22 expected; fewer than 60 in any fair run.
    expect(atCap).toBeLessThan(60);
  });

  it('refuses bad shapes naming the field', () => {
    expect(thrown(() => new Backoff({ baseMs: 0, maxMs: 10 }, new Rng(1), 'options.ejection')).message).toBe(
      'options.ejection.baseMs: must be a finite number > 0 (milliseconds), got 0',
    );
    expect(thrown(() => new Backoff({ baseMs: 100, maxMs: 50 })).message).toBe(
      'options.backoff.maxMs: must be a number in [100, 268435456] (milliseconds), got 50',
    );
    expect(thrown(() => new Backoff({ baseMs: 1, maxMs: 2, maxExponent: 31 })).field).toBe('options.backoff.maxExponent');
    expect(thrown(() => new Backoff({ baseMs: 1, maxMs: 2, maxMS: 3 } as never)).message).toMatch(
      /^options\.backoff\.maxMS: unknown option/,
    );
  });
});
