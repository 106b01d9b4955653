/**
 * `arithmetic: 'envoy'` against Envoy's own tables: the priority-levels and
 * panic-threshold documentation (docs/root/intro/arch_overview/upstream/
 * load_balancing/priority.rst, panic_threshold.rst) and the unit tests of
 * LoadBalancerBase (GentleFailover, GentleFailoverWithExtraLevels,
 * PrioritySelection, OverProvisioningFactor). Hosts are given as counts;
 * a "healthy %" row uses 100 hosts so that healthy hosts = percent.
 */
import { describe, expect, it } from 'vitest';
import { Backend, Localized, Prioritized, type Status } from '../../../src/core/candidate.js';
import { LocalityWeightedRandom } from '../../../src/policy/priority/policy.js';
import type { PriorityOptions } from '../../../src/policy/priority/options.js';
import { PriorityWeightedRandom } from '../../../src/policy/priority/policy.js';

/** Envoy host set: `hosts` hosts of which `healthy` healthy and `excluded` excluded (draining here). */
function hostSet(priority: number, hosts: number, healthy: number, excluded = 0): Prioritized[] {
  return Array.from({ length: hosts }, (_, i) => {
    const status: Status = i < healthy ? 'ready' : i < healthy + excluded ? 'draining' : 'unavailable';
    return new Prioritized(new Backend(`p${priority}-${i}`, { status }), priority);
  });
}

function envoy(sets: Prioritized[][], options: PriorityOptions = {}): { load: number[]; panic: boolean[]; normalizedTotal: number } {
  const plan = new PriorityWeightedRandom({ ...options, arithmetic: 'envoy', seed: 1 }).plan(sets.flat());
  for (const p of plan.priorities) expect(p.shareMillionths % 10_000).toBe(0);
  const health = plan.priorities.map((p) => p.effectiveAvailabilityMillionths / 10_000);
  return {
    load: plan.priorities.map((p) => p.shareMillionths / 10_000),
    panic: plan.priorities.map((p) => p.panic),
    normalizedTotal: Math.min(
      100,
      health.reduce((a, b) => a + b, 0),
    ),
  };
}

const pct = (priority: number, healthyPercent: number): Prioritized[] => hostSet(priority, 100, healthyPercent);

describe("arithmetic: 'envoy' — priority levels documentation", () => {
  it.each([
    [100, 100, 0],
    [72, 100, 0],
    [71, 99, 1],
    [50, 70, 30],
    [25, 35, 65],
    [0, 0, 100],
  ])('P0 %i pct healthy, P1 100 pct → %i pct / %i pct', (p0, t0, t1) => {
    expect(envoy([pct(0, p0), pct(1, 100)]).load).toEqual([t0, t1]);
  });

  it.each([
    [100, 100, 100, 0],
    [72, 72, 100, 0],
    [71, 71, 99, 1],
    [50, 50, 70, 30],
    [25, 100, 35, 65],
    [25, 25, 50, 50],
  ])('P0 %i pct, P1 %i pct → %i pct / %i pct', (p0, p1, t0, t1) => {
    expect(envoy([pct(0, p0), pct(1, p1)]).load).toEqual([t0, t1]);
  });

  it.each([
    [100, 100, 100, [100, 0, 0]],
    [72, 72, 100, [100, 0, 0]],
    [71, 71, 100, [99, 1, 0]],
    [50, 50, 100, [70, 30, 0]],
    [25, 100, 100, [35, 65, 0]],
    [25, 25, 100, [35, 35, 30]],
  ])('P0 %i pct, P1 %i pct, P2 %i pct → %j', (p0, p1, p2, want) => {
    expect(envoy([pct(0, p0), pct(1, p1), pct(2, p2)]).load).toEqual(want);
  });

  it('P0 25 %, P1 25 %, P2 20 %: the page’s row is the no-panic load; with panic on, total panic', () => {
    // health 35, 35, 28 → normalised 98 → floors 35, 35, 28; the rounding remainder 2 goes to the
    // first healthy priority (distributeLoad): 37/35/28. The page prints 36/36/28, spreading it;
    // Envoy's code and unit tests ("P=0 picking up the rounding error") give it all to P0, as here.
    expect(envoy([pct(0, 25), pct(1, 25), pct(2, 20)], { panicThresholdPercent: 0 }).load).toEqual([37, 35, 28]);
    // With the default 50 % threshold every level is below it and the total is < 100: total panic,
    // load by host count (100 each) → 34/33/33, which is what Envoy actually routes.
    expect(envoy([pct(0, 25), pct(1, 25), pct(2, 20)])).toMatchObject({ load: [34, 33, 33], panic: [true, true, true] });
  });
});

describe("arithmetic: 'envoy' — panic threshold documentation", () => {
  it.each([
    [72, [100, 0]],
    [71, [99, 1]],
    [50, [70, 30]],
    [25, [35, 65]],
    [0, [0, 100]],
  ])('P1 100 pct: P0 %i pct → %j, never panic, normalised total 100', (p0, load) => {
    expect(envoy([pct(0, p0), pct(1, 100)])).toEqual({ load, panic: [false, false], normalizedTotal: 100 });
  });

  it.each([
    [72, 72, [100, 0], [false, false], 100],
    [71, 71, [99, 1], [false, false], 100],
    [25, 25, [50, 50], [true, true], 70],
  ])('P0 %i pct, P1 %i pct → %j, panic %j, normalised %i', (p0, p1, load, panic, total) => {
    expect(envoy([pct(0, p0), pct(1, p1)])).toEqual({ load, panic, normalizedTotal: total });
  });

  it('rows where the page disagrees with Envoy’s code: the code’s values', () => {
    // 50 %/60 %: health 70 + 84 ≥ 100 → 70/30 (the page prints 50/50, computed without overprovisioning).
    expect(envoy([pct(0, 50), pct(1, 60)])).toEqual({ load: [70, 30], panic: [false, false], normalizedTotal: 100 });
    // 25 %/100 %: 35/65, as the priority page itself says (the panic page prints 25/75).
    expect(envoy([pct(0, 25), pct(1, 100)])).toEqual({ load: [35, 65], panic: [false, false], normalizedTotal: 100 });
    // 5 %/65 %: health 7 + 91 = 98 → floors 7, 92, remainder 1 to P0 → 8/92; P0 panics (5 < 50),
    // P1 does not (65 ≥ 50); normalised 98 as printed (the page prints 7/93).
    expect(envoy([hostSet(0, 20, 1), hostSet(1, 20, 13)])).toEqual({ load: [8, 92], panic: [true, false], normalizedTotal: 98 });
  });

  it('panic threshold 0: nothing panics, and all-unhealthy fails with NoEligibleCandidates ("no healthy upstream")', () => {
    const sets = [hostSet(0, 5, 0), hostSet(1, 5, 0)];
    expect(envoy(sets, { panicThresholdPercent: 0 })).toEqual({ load: [0, 0], panic: [false, false], normalizedTotal: 0 });
    const policy = new PriorityWeightedRandom({ arithmetic: 'envoy', panicThresholdPercent: 0, seed: 1 });
    expect(() => policy.pick(sets.flat())).toThrow(expect.objectContaining({ code: 'NoEligibleCandidates' }));
  });
});

describe("arithmetic: 'envoy' — LoadBalancerBase unit tests", () => {
  it('GentleFailover', () => {
    expect(envoy([hostSet(0, 1, 1), hostSet(1, 1, 1)])).toMatchObject({ load: [100, 0], panic: [false, false] });
    expect(envoy([hostSet(0, 2, 1), hostSet(1, 2, 1)])).toMatchObject({ load: [70, 30], panic: [false, false] });
    expect(envoy([hostSet(0, 4, 1), hostSet(1, 2, 2)])).toMatchObject({ load: [35, 65], panic: [false, false] });
    expect(envoy([hostSet(0, 4, 1), hostSet(1, 4, 1)])).toMatchObject({ load: [50, 50], panic: [true, true] });
    // Excluded hosts leave the denominator: 1 healthy of 1 counted host is fully healthy.
    expect(envoy([hostSet(0, 4, 1, 3), hostSet(1, 5, 1)])).toMatchObject({ load: [100, 0], panic: [false, false] });
    // Total panic splits by all hosts, excluded included: 4 and 4 → 50/50.
    expect(envoy([hostSet(0, 4, 0, 4), hostSet(1, 4, 1)])).toMatchObject({ load: [50, 50], panic: [true, true] });
    // 4 hosts (1 excluded) and 6 hosts (2 excluded) → 40/60.
    expect(envoy([hostSet(0, 4, 0, 1), hostSet(1, 6, 1, 2)])).toMatchObject({ load: [40, 60], panic: [true, true] });
  });

  it('GentleFailoverWithExtraLevels', () => {
    const three = (a: [number, number], b: [number, number], c: [number, number]) =>
      envoy([hostSet(0, ...a), hostSet(1, ...b), hostSet(2, ...c)]);
    expect(three([1, 1], [1, 1], [1, 1])).toMatchObject({ load: [100, 0, 0], panic: [false, false, false] });
    expect(three([2, 1], [2, 1], [2, 1]).load).toEqual([70, 30, 0]);
    expect(three([4, 1], [2, 2], [2, 1]).load).toEqual([35, 65, 0]);
    expect(three([4, 1], [4, 1], [4, 1]).load).toEqual([35, 35, 30]);
    expect(three([5, 1], [5, 1], [5, 1])).toMatchObject({ load: [34, 33, 33], panic: [true, true, true] });
    expect(three([5, 0], [5, 0], [5, 5])).toMatchObject({ load: [0, 0, 100], panic: [false, false, false] });
    expect(three([5, 0], [5, 0], [5, 4])).toMatchObject({ load: [0, 0, 100], panic: [false, false, false] });
    expect(three([5, 0], [5, 0], [5, 2])).toMatchObject({ load: [34, 33, 33], panic: [true, true, true] });
    expect(three([5, 0], [3, 0], [2, 0])).toMatchObject({ load: [50, 30, 20], panic: [true, true, true] });
    expect(three([5, 0], [6, 2], [3, 1])).toMatchObject({ load: [37, 42, 21], panic: [true, true, true] });
    expect(three([3, 0], [3, 0], [3, 0])).toMatchObject({ load: [34, 33, 33], panic: [true, true, true] });
    // P0 empty (no host set entries): the rounding goes to the first non-empty priority.
    expect(envoy([hostSet(1, 6, 0), hostSet(2, 3, 0)])).toMatchObject({ load: [67, 33], panic: [true, true] });
  });

  it('PrioritySelection and OverProvisioningFactor', () => {
    expect(envoy([hostSet(0, 1, 0), hostSet(1, 1, 0)]).load).toEqual([50, 50]);
    expect(envoy([hostSet(0, 1, 0), hostSet(1, 2, 0)]).load).toEqual([34, 66]);
    expect(envoy([hostSet(0, 1, 0), hostSet(1, 2, 0), hostSet(2, 1, 1)]).load).toEqual([0, 0, 100]);
    expect(envoy([hostSet(0, 4, 2), hostSet(1, 4, 2)]).load).toEqual([70, 30]);
    expect(envoy([hostSet(0, 4, 2), hostSet(1, 4, 2)], { overprovisioningFactorPercent: 100 }).load).toEqual([50, 50]);
  });

  it('counts hosts, not weights (Envoy without weighted_priority_health)', () => {
    const c = [
      new Prioritized(new Backend('heavy-down', { weight: 100, status: 'unavailable' }), 0),
      new Prioritized(new Backend('light-up', { weight: 1 }), 0),
      ...hostSet(1, 1, 1),
    ];
    const e = new PriorityWeightedRandom({ arithmetic: 'envoy', seed: 1 }).plan(c);
    const w = new PriorityWeightedRandom({ seed: 1 }).plan(c);
    expect(e.priorities.map((p) => p.shareMillionths)).toEqual([700_000, 300_000]);
    expect(w.priorities.map((p) => p.shareMillionths)).toEqual([13_861, 986_139]);
  });
});

describe("arithmetic: 'envoy' — locality weight documentation", () => {
  it.each([
    [100, 33, 67],
    [70, 33, 67],
    [69, 32, 68],
    [50, 26, 74],
    [25, 15, 85],
    [0, 0, 100],
  ])('X (weight 1) %i pct healthy, Y (weight 2) 100 pct → %i pct / %i pct', (x, tx, ty) => {
    const c = [
      ...Array.from(
        { length: 100 },
        (_, i) => new Localized(new Prioritized(new Backend(`x${i}`, { status: i < x ? 'ready' : 'unavailable' }), 0), 'X', 1),
      ),
      // 300 healthy Y hosts keep the priority itself out of panic, as the page assumes.
      ...Array.from({ length: 300 }, (_, i) => new Localized(new Prioritized(new Backend(`y${i}`), 0), 'Y', 2)),
    ];
    const plan = new LocalityWeightedRandom({ arithmetic: 'envoy', seed: 1 }).plan(c);
    const loc = plan.priorities[0]!.localities!;
    expect(loc.map((l) => l.locality)).toEqual(['X', 'Y']);
    expect(loc[0]!.shareMillionths + loc[1]!.shareMillionths).toBe(1_000_000);
    // The page prints whole percents of effective weight (integer availability × locality weight).
    expect(loc.map((l) => Math.round(l.shareMillionths / 10_000))).toEqual([tx, ty]);
  });
});
