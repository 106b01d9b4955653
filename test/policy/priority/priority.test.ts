import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Backend, Prioritized, type PriorityCandidate, type Status } from '../../../src/core/candidate.js';
import { PriorityWeightedRandom } from '../../../src/policy/priority/policy.js';
import { caught, thrown } from '../../helpers/thrown.js';

/** `total` members at `priority`, the first `healthy` ready and the rest unavailable. */
function level(priority: number, total: number, healthy: number, weight = 1, tag = `p${priority}`): Prioritized[] {
  return Array.from(
    { length: total },
    (_, i) => new Prioritized(new Backend(`${tag}-${i}`, { weight, status: i < healthy ? 'ready' : 'unavailable' }), priority),
  );
}

function shares(policy: PriorityWeightedRandom, c: PriorityCandidate[]): number[] {
  return policy.plan(c).priorities.map((p) => p.shareMillionths);
}

/** A candidate that counts how often each predicate is read. */
class Counting implements PriorityCandidate {
  reads = { member: 0, eligible: 0, panic: 0 };
  constructor(
    readonly id: string,
    readonly priority: number,
    private readonly m: boolean,
    private readonly e: boolean,
    private readonly pe: boolean,
    readonly weight = 1,
  ) {}
  isMember(): boolean {
    this.reads.member++;
    return this.m;
  }
  isEligible(): boolean {
    this.reads.eligible++;
    return this.e;
  }
  isPanicEligible(): boolean {
    this.reads.panic++;
    return this.pe;
  }
  load(): number {
    return 0;
  }
}

describe('PriorityWeightedRandom: predicates', () => {
  it('samples each of the three predicates exactly once per candidate per decision', () => {
    const c = [new Counting('a', 0, true, true, true), new Counting('b', 0, true, false, true), new Counting('c', 1, true, true, false)];
    const policy = new PriorityWeightedRandom({ seed: 1 });
    for (let d = 1; d <= 5; d++) {
      policy.pick(c);
      for (const x of c) expect(x.reads).toEqual({ member: d, eligible: d, panic: d });
    }
  });

  it('a draining member leaves the availability denominator (2 ready + 2 draining = 100 %)', () => {
    const c = [
      ...level(0, 2, 2),
      new Prioritized(new Backend('d1', { status: 'draining' }), 0),
      new Prioritized(new Backend('d2', { status: 'draining' }), 0),
      ...level(1, 2, 2),
    ];
    const plan = new PriorityWeightedRandom({ seed: 1 }).plan(c);
    expect(plan.priorities[0]).toMatchObject({ rawAvailabilityMillionths: 1_000_000, shareMillionths: 1_000_000 });
  });

  it('use-all panic revives unavailable members but never draining or opted-out ones', () => {
    const c: PriorityCandidate[] = [
      new Prioritized(new Backend('ready'), 0),
      new Prioritized(new Backend('down'), 0),
      new Prioritized(new Backend('drain', { status: 'draining' }), 0),
      new Prioritized(new Backend('breaker', { status: 'unavailable' }), 0).withPanicEligibility(false),
      new Prioritized(new Backend('down2', { status: 'unavailable' }), 0),
      new Prioritized(new Backend('down3', { status: 'unavailable' }), 0),
    ];
    (c[1] as Prioritized<Backend>).inner.status = 'unavailable';
    // members: ready, down, breaker, down2, down3 → raw 1/5 = 20 % < 50 %, a single priority → global shortage.
    const policy = new PriorityWeightedRandom({ seed: 3 });
    const plan = policy.plan(c);
    expect(plan.globalShortage).toBe(true);
    expect(plan.priorities[0]!.panic).toBe(true);
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const d = policy.decide(c);
      expect(d.mode).toBe('panic');
      seen.add(d.index);
    }
    expect([...seen].sort()).toEqual([0, 1, 4, 5]);
  });

  it('a healthy member stays selectable in panic even when opted out of panic (panic widens, never narrows)', () => {
    const c: PriorityCandidate[] = [new Prioritized(new Backend('up'), 0).withPanicEligibility(false), ...level(0, 3, 0, 1, 'down')];
    const policy = new PriorityWeightedRandom({ seed: 4 });
    const seen = new Set<number>();
    for (let i = 0; i < 500; i++) seen.add(policy.pick(c));
    expect([...seen].sort()).toEqual([0, 1, 2, 3]);
  });
});

describe('PriorityWeightedRandom: millionth-share arithmetic', () => {
  it('70 % effective at P0 leaves exactly 30 % for P1 (ordered spill)', () => {
    const plan = new PriorityWeightedRandom({ seed: 1 }).plan([...level(0, 2, 1), ...level(1, 2, 2), ...level(2, 1, 1)]);
    expect(plan).toEqual({
      globalShortage: false,
      priorities: [
        {
          priority: 0,
          rawAvailabilityMillionths: 500_000,
          effectiveAvailabilityMillionths: 700_000,
          shareMillionths: 700_000,
          panic: false,
        },
        {
          priority: 1,
          rawAvailabilityMillionths: 1_000_000,
          effectiveAvailabilityMillionths: 1_000_000,
          shareMillionths: 300_000,
          panic: false,
        },
        { priority: 2, rawAvailabilityMillionths: 1_000_000, effectiveAvailabilityMillionths: 1_000_000, shareMillionths: 0, panic: false },
      ],
    });
  });

  it('a priority keeps all traffic down to exactly 5/7 weighted availability, and loses it just below', () => {
    const policy = new PriorityWeightedRandom({ seed: 1 });
    expect(shares(policy, [...level(0, 7, 5), ...level(1, 1, 1)])).toEqual([1_000_000, 0]);
    // 71/100 × 1.4 = 99.4 %.
    expect(shares(policy, [...level(0, 100, 71), ...level(1, 1, 1)])).toEqual([994_000, 6_000]);
  });

  it('weight counts in availability: a down weight-3 member of weights [3, 1] leaves 25 %', () => {
    const c = [
      new Prioritized(new Backend('big', { weight: 3, status: 'unavailable' }), 0),
      new Prioritized(new Backend('small'), 0),
      ...level(1, 1, 1),
    ];
    const plan = new PriorityWeightedRandom({ seed: 1 }).plan(c);
    expect(plan.priorities[0]).toMatchObject({
      rawAvailabilityMillionths: 250_000,
      effectiveAvailabilityMillionths: 350_000,
      shareMillionths: 350_000,
    });
  });

  it('normalises proportionally below 100 %, remainder to the first available priority', () => {
    const policy = new PriorityWeightedRandom({ seed: 1, panicThresholdPercent: 0 });
    // 25 % each → 35 % effective each → 50/50.
    expect(shares(policy, [...level(0, 4, 1), ...level(1, 4, 1)])).toEqual([500_000, 500_000]);
    // 1/5 each → 28 % each → thirds, the rounding unit to P0.
    expect(shares(policy, [...level(0, 5, 1), ...level(1, 5, 1), ...level(2, 5, 1)])).toEqual([333_334, 333_333, 333_333]);
    // P0 empty of health: the remainder goes to the first priority with availability.
    expect(shares(policy, [...level(0, 3, 0), ...level(1, 5, 1), ...level(2, 5, 1), ...level(3, 5, 1)])).toEqual([
      0, 333_334, 333_333, 333_333,
    ]);
  });

  it('shares are integers summing to exactly 1,000,000 whenever anything is selectable (property)', () => {
    const member = fc.record({
      priority: fc.integer({ min: 0, max: 4 }),
      weight: fc.integer({ min: 1, max: 2 ** 32 - 1 }),
      status: fc.constantFrom<Status>('ready', 'ready', 'unavailable', 'draining'),
      panicEligible: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(member, { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 100, max: 400 }),
        fc.integer({ min: 0, max: 100 }),
        (ms, over, threshold) => {
          const c = ms.map(
            (m, i) => new Prioritized(new Backend(`b${i}`, { weight: m.weight, status: m.status }), m.priority, m.panicEligible),
          );
          const policy = new PriorityWeightedRandom({ seed: 1, overprovisioningFactorPercent: over, panicThresholdPercent: threshold });
          const plan = policy.plan(c);
          const sum = plan.priorities.reduce((s, p) => s + p.shareMillionths, 0);
          for (const p of plan.priorities) expect(Number.isInteger(p.shareMillionths) && p.shareMillionths >= 0).toBe(true);
          const code = caught(() => policy.pick(c))?.code;
          if (code === undefined || code === 'PanicRejected') expect(sum).toBe(1_000_000);
          else expect(code).toBe('NoEligibleCandidates');
          if (!plan.globalShortage) for (const p of plan.priorities) expect(p.panic).toBe(false);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('every pick is an in-bounds member of the chosen priority, selectable in the reported mode (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            priority: fc.integer({ min: 0, max: 3 }),
            status: fc.constantFrom<Status>('ready', 'unavailable', 'draining'),
            pe: fc.boolean(),
          }),
          { minLength: 1, maxLength: 20 },
        ),
        fc.integer(),
        (ms, seed) => {
          const c = ms.map((m, i) => new Prioritized(new Backend(`b${i}`, { status: m.status }), m.priority, m.pe));
          const policy = new PriorityWeightedRandom({ seed });
          for (let k = 0; k < 10; k++) {
            let d = undefined as ReturnType<typeof policy.decide> | undefined;
            const err = caught(() => (d = policy.decide(c)));
            if (err !== undefined || d === undefined) {
              expect(err?.code).toBe('NoEligibleCandidates');
              expect(c.some((x) => x.isEligible() || (x.isPanicEligible() && x.isMember()))).toBe(false);
              return;
            }
            const chosen = c[d.index]!;
            expect(chosen.priority).toBe(d.priority);
            expect(chosen.isMember()).toBe(true);
            if (d.mode === 'healthy') expect(chosen.isEligible()).toBe(true);
            else expect(chosen.isEligible() || chosen.isPanicEligible()).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('PriorityWeightedRandom: panic', () => {
  it('does not panic when a lower priority covers the shortage (P0 at 10 %, P1 full)', () => {
    const plan = new PriorityWeightedRandom({ seed: 1 }).plan([...level(0, 10, 1), ...level(1, 2, 2)]);
    expect(plan.globalShortage).toBe(false);
    expect(plan.priorities.map((p) => p.panic)).toEqual([false, false]);
    expect(plan.priorities.map((p) => p.shareMillionths)).toEqual([140_000, 860_000]);
  });

  it('panics strictly below the threshold: exactly 50 % does not, 49 % does', () => {
    const policy = new PriorityWeightedRandom({ seed: 1 });
    expect(policy.plan(level(0, 2, 1)).priorities[0]).toMatchObject({ panic: false, shareMillionths: 1_000_000 });
    expect(policy.plan(level(0, 100, 49)).priorities[0]).toMatchObject({ panic: true, rawAvailabilityMillionths: 490_000 });
    const t30 = new PriorityWeightedRandom({ seed: 1, panicThresholdPercent: 30 });
    expect(t30.plan(level(0, 100, 30)).priorities[0]!.panic).toBe(false);
    expect(t30.plan(level(0, 100, 29)).priorities[0]!.panic).toBe(true);
  });

  it('threshold 0 disables panic: nothing eligible is NoEligibleCandidates, not a revival', () => {
    const policy = new PriorityWeightedRandom({ seed: 1, panicThresholdPercent: 0 });
    const c = [...level(0, 3, 0), ...level(1, 3, 0)];
    expect(policy.plan(c).priorities.map((p) => [p.panic, p.shareMillionths])).toEqual([
      [false, 0],
      [false, 0],
    ]);
    expect(thrown(() => policy.pick(c)).code).toBe('NoEligibleCandidates');
    expect(policy.plan(level(0, 10, 1)).priorities[0]!.panic).toBe(false);
  });

  it('failClosed throws PanicRejected, distinguishable from Empty and NoEligibleCandidates', () => {
    const policy = new PriorityWeightedRandom({ seed: 1, panicMode: 'failClosed' });
    expect(thrown(() => policy.pick(level(0, 4, 1))).code).toBe('PanicRejected');
    expect(() => policy.pick(level(0, 4, 1))).toThrow("priority 0 is in panic and panicMode is 'failClosed'");
    expect(thrown(() => policy.pick([])).code).toBe('Empty');
    const allOptedOut = level(0, 2, 0).map((c) => c.withPanicEligibility(false));
    expect(thrown(() => policy.pick(allOptedOut)).code).toBe('NoEligibleCandidates');
    // A healthy priority still serves under failClosed.
    expect(policy.decide(level(0, 2, 2))).toMatchObject({ priority: 0, mode: 'healthy' });
  });

  it('failClosed sheds only the panicking priority’s share (P0 10 % panics, P1 55 % serves)', () => {
    // Effective 14 % + 77 % = 91 % < 100 % → shortage; P0 raw 10 % < 50 % panics, P1 raw 55 % does not.
    const c = [...level(0, 10, 1), ...level(1, 20, 11)];
    const policy = new PriorityWeightedRandom({ seed: 9, panicMode: 'failClosed' });
    const plan = policy.plan(c);
    expect(plan.globalShortage).toBe(true);
    expect(plan.priorities.map((p) => [p.shareMillionths, p.panic])).toEqual([
      [153_847, true],
      [846_153, false],
    ]);
    const n = 4000;
    let rejected = 0;
    for (let i = 0; i < n; i++) {
      const code = caught(() => expect(policy.decide(c)).toMatchObject({ priority: 1, mode: 'healthy' }))?.code;
      if (code !== undefined) {
        expect(code).toBe('PanicRejected');
        rejected++;
      }
    }
    // Binomial(4000, 0.153847): σ ≈ 22.8; band ±5σ = ±114 around 615.4.
    expect(Math.abs(rejected - 0.153847 * n)).toBeLessThan(114);
  });

  it('with zero effective availability everywhere, use-all splits by panic-eligible weight', () => {
    const c = [
      new Prioritized(new Backend('a', { weight: 1, status: 'unavailable' }), 0),
      new Prioritized(new Backend('x', { weight: 5, status: 'unavailable' }), 0).withPanicEligibility(false),
      new Prioritized(new Backend('b', { weight: 3, status: 'unavailable' }), 1),
    ];
    const policy = new PriorityWeightedRandom({ seed: 5 });
    const plan = policy.plan(c);
    expect(plan.priorities.map((p) => [p.shareMillionths, p.panic])).toEqual([
      [250_000, true],
      [750_000, true],
    ]);
    const counts = [0, 0, 0];
    for (let i = 0; i < 4000; i++) {
      const d = policy.decide(c);
      expect(d.mode).toBe('panic');
      counts[d.index]!++;
    }
    expect(counts[1]).toBe(0);
    // Binomial(4000, 0.25): σ = √(4000·0.25·0.75) ≈ 27.4; band ±5σ = ±137 around 1000.
    expect(Math.abs(counts[0]! - 1000)).toBeLessThan(137);
  });

  it('rejects bad options with InvalidConfig naming the option', () => {
    expect(() => new PriorityWeightedRandom({ overprovisioningFactorPercent: 99 })).toThrow(
      'options.overprovisioningFactorPercent: must be an integer in [100, 100000], got 99',
    );
    expect(() => new PriorityWeightedRandom({ panicThresholdPercent: 101 })).toThrow(
      'options.panicThresholdPercent: must be an integer in [0, 100], got 101',
    );
    expect(() => new PriorityWeightedRandom({ panicMode: 'sometimes' as never })).toThrow(
      "options.panicMode: must be 'useAll' or 'failClosed', got \"sometimes\"",
    );
    expect(() => new PriorityWeightedRandom({ arithmetic: 'float' as never })).toThrow(
      "options.arithmetic: must be 'millionths' or 'envoy', got \"float\"",
    );
    expect(thrown(() => new PriorityWeightedRandom({ overprovisioningFactorPercent: 99 })).code).toBe('InvalidConfig');
  });
});

describe('PriorityWeightedRandom: decisions and replay', () => {
  it('replays exactly for the same seed and snapshot (pinned sequence)', () => {
    const c = [...level(0, 4, 2, 2), ...level(1, 3, 3)];
    const run = (seed: number): number[] => {
      const policy = new PriorityWeightedRandom({ seed });
      return Array.from({ length: 16 }, () => policy.pick(c));
    };
    expect(run(42)).toEqual(run(42));
    expect(run(43)).not.toEqual(run(42));
    expect(run(42)).toMatchInlineSnapshot(`
      [
        0,
        0,
        0,
        0,
        1,
        5,
        1,
        5,
        4,
        0,
        0,
        1,
        1,
        0,
        0,
        0,
      ]
    `);
  });

  it('decide reports index, priority value (gaps allowed) and mode', () => {
    const c = [...level(7, 1, 1), ...level(3, 2, 0)];
    const policy = new PriorityWeightedRandom({ seed: 2 });
    // Priority 3 (preferred) has no health; priority 7 carries everything.
    for (let i = 0; i < 20; i++) expect(policy.decide(c)).toEqual({ index: 0, priority: 7, mode: 'healthy' });
  });

  it('splits 70/30 across priorities and by endpoint weight inside one (statistical)', () => {
    // P0: weights 3 (up), 1 (up), 4 (down) → raw 50 %, effective 70 %. P1: one member.
    const c = [
      new Prioritized(new Backend('a', { weight: 3 }), 0),
      new Prioritized(new Backend('b', { weight: 1 }), 0),
      new Prioritized(new Backend('c', { weight: 4, status: 'unavailable' }), 0),
      new Prioritized(new Backend('d'), 1),
    ];
    const policy = new PriorityWeightedRandom({ seed: 11 });
    const n = 40_000;
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < n; i++) counts[policy.pick(c)]!++;
    // Expected: a 0.525, b 0.175, c 0, d 0.3. Binomial σ = √(n p (1−p)): 99.9, 76.0, –, 91.7; band ±5σ.
    // A sampler that ignored endpoint weight (a = b = 0.35) or split priorities 50/50 is ~20σ out.
    expect(counts[2]).toBe(0);
    expect(Math.abs(counts[0]! - 0.525 * n)).toBeLessThan(5 * 99.9);
    expect(Math.abs(counts[1]! - 0.175 * n)).toBeLessThan(5 * 76.0);
    expect(Math.abs(counts[3]! - 0.3 * n)).toBeLessThan(5 * 91.7);
  });

  it('throws Empty for an empty slice and InvalidWeight for a candidate with a bad weight', () => {
    const policy = new PriorityWeightedRandom({ seed: 1 });
    expect(thrown(() => policy.pick([])).code).toBe('Empty');
    const bad = {
      id: 'x',
      weight: 0,
      priority: 0,
      isMember: () => true,
      isEligible: () => true,
      isPanicEligible: () => true,
      load: () => 0,
    };
    expect(() => policy.pick([bad])).toThrow('candidates[0].weight: must be an integer in [1, 4294967295], got 0');
  });
});
