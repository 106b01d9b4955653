import { describe, expect, it, vi } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { Rendezvous } from '../../src/policy/rendezvous.js';
import { backends, binomialSigma } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

const KEYS = Array.from({ length: 20_000 }, (_, i) => `key-${i}`);
const owners = (p: Rendezvous, slice: readonly Backend[], keys = KEYS): string[] => keys.map((key) => slice[p.pick(slice, { key })]!.id);

describe('Rendezvous', () => {
  it('same key → same backend across instances, whatever the slice order', () => {
    const slice = backends(12, { weights: [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3] });
    const reversed = [...slice].reverse();
    expect(owners(new Rendezvous(), reversed)).toEqual(owners(new Rendezvous(), slice));
    // Number keys hash as their decimal string.
    const p = new Rendezvous();
    expect(p.pick(slice, { key: 12345 })).toBe(p.pick(slice, { key: '12345' }));
  });

  it('a different hash seed gives a different (but still deterministic) map', () => {
    const slice = backends(10);
    const a = owners(new Rendezvous({ hashSeed: 1n }), slice);
    expect(owners(new Rendezvous({ hashSeed: 1n }), slice)).toEqual(a);
    const b = owners(new Rendezvous(), slice);
    const same = a.filter((id, i) => id === b[i]).length;
    // Independent maps agree with p = 1/10: 2,000 of 20,000, σ ≈ 42; < 2,500 is > 11σ above.
    expect(same).toBeLessThan(2500);
  });

  it('removing a backend moves only its own keys', () => {
    const slice = backends(10, { weights: [1, 2, 1, 3, 1, 1, 2, 1, 1, 4] });
    const before = owners(new Rendezvous(), slice);
    const removed = slice.filter((b) => b.id !== 'b3');
    const after = owners(new Rendezvous(), removed);
    const moved = before.filter((id, i) => after[i] !== id);
    expect(after).not.toContain('b3');
    expect(new Set(moved)).toEqual(new Set(['b3']));
  });

  it('adding a backend moves keys only to it', () => {
    const slice = backends(9);
    const before = owners(new Rendezvous(), slice);
    const grown = [...slice, new Backend('new', { weight: 2 })];
    const after = owners(new Rendezvous(), grown);
    const changed = after.filter((id, i) => id !== before[i]);
    expect(new Set(changed)).toEqual(new Set(['new']));
    const gained = changed.length;
    // Expected share 2/11 of 20,000 ≈ 3,636, σ ≈ 54.5; band ±5σ.
    expect(Math.abs(gained - (20_000 * 2) / 11)).toBeLessThanOrEqual(5 * binomialSigma(20_000, 2 / 11));
  });

  it('an ineligible member loses exactly its keys, like a removal', () => {
    const slice = backends(8);
    const p = new Rendezvous();
    const before = owners(p, slice);
    slice[5]!.status = 'draining';
    const after = owners(p, slice);
    expect(after).not.toContain('b5');
    expect(new Set(before.filter((id, i) => after[i] !== id))).toEqual(new Set(['b5']));
  });

  it('honours weights 1:4 (20% / 80% of 50,000 keys within 5σ)', () => {
    // p = 0.2, N = 50,000: σ = √(N·0.2·0.8) ≈ 89.4 keys; band ±5σ = ±447.
    const keys = Array.from({ length: 50_000 }, (_, i) => `w${i}`);
    const slice = [new Backend('light', { weight: 1 }), new Backend('heavy', { weight: 4 })];
    const light = owners(new Rendezvous(), slice, keys).filter((id) => id === 'light').length;
    expect(Math.abs(light - 10_000)).toBeLessThanOrEqual(5 * binomialSigma(50_000, 0.2));
  });

  it('equal weights spread keys evenly (each of 5 within 5σ of 10,000 over 50,000 keys)', () => {
    const keys = Array.from({ length: 50_000 }, (_, i) => `e${i}`);
    const slice = backends(5);
    const counts = new Map<string, number>();
    for (const id of owners(new Rendezvous(), slice, keys)) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const b of slice) expect(Math.abs(counts.get(b.id)! - 10_000)).toBeLessThanOrEqual(5 * binomialSigma(50_000, 0.2));
  });

  it('pins the key → member map (changing the pair hash would remap every deployment)', () => {
    const p = new Rendezvous();
    const keys = Array.from({ length: 12 }, (_, i) => `user-${i}`);
    const equal = backends(10);
    expect(keys.map((key) => p.pick(equal, { key }))).toEqual([9, 4, 3, 5, 6, 3, 6, 9, 3, 4, 9, 8]);
    const weighted = backends(4, { weights: [1, 2, 3, 4] });
    expect(keys.map((key) => p.pick(weighted, { key }))).toEqual([3, 3, 3, 2, 3, 3, 3, 2, 3, 2, 3, 3]);
  });

  it('spreads keys evenly over 16 members (each within 5σ of 4,000 over 64,000 keys) and weights 1..4 in proportion', () => {
    // p = 1/16, N = 64,000: σ = √(N·p·(1−p)) ≈ 61.2 keys; band ±5σ ≈ ±306 (7.7% of the share).
    const keys = Array.from({ length: 64_000 }, (_, i) => `u${i}`);
    const slice = backends(16);
    const counts = new Map<string, number>();
    for (const id of owners(new Rendezvous(), slice, keys)) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const b of slice) expect(Math.abs(counts.get(b.id)! - 4000)).toBeLessThanOrEqual(5 * binomialSigma(64_000, 1 / 16));
    // Weights 1, 2, 3, 4: pᵢ = wᵢ/10, σᵢ ≤ √(N·0.4·0.6) ≈ 124; band ±5σᵢ.
    const weighted = backends(4, { weights: [1, 2, 3, 4] });
    const wc = new Map<string, number>();
    for (const id of owners(new Rendezvous(), weighted, keys)) wc.set(id, (wc.get(id) ?? 0) + 1);
    weighted.forEach((b, i) => {
      const p = (i + 1) / 10;
      expect(Math.abs(wc.get(b.id)! - 64_000 * p)).toBeLessThanOrEqual(5 * binomialSigma(64_000, p));
    });
  });

  it('prepares member hashes on a new slice only', () => {
    const p = new Rendezvous();
    const spy = vi.spyOn(p, 'prepare');
    const slice = backends(6);
    for (const key of KEYS.slice(0, 1000)) p.pick(slice, { key });
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it('falls back to round robin without a key; validates the key and options', () => {
    const p = new Rendezvous();
    const slice = backends(3);
    expect([p.pick(slice), p.pick(slice), p.pick(slice), p.pick(slice)]).toEqual([0, 1, 2, 0]);
    expect(() => p.pick(slice, { key: {} as unknown as string })).toThrow('context.key: must be a string or a finite number, got a object');
    expect(() => new Rendezvous({ hashSeed: 'x' as unknown as bigint })).toThrow(
      'options.hashSeed: must be a bigint or a safe integer, got "x"',
    );
    expect(thrown(() => p.pick([], { key: 'k' })).code).toBe('Empty');
    expect(thrown(() => p.pick(backends(2, { status: () => 'unavailable' }), { key: 'k' })).code).toBe('NoEligibleCandidates');
  });
});
