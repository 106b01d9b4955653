/**
 * The `probe` policy (policy/probe.ts) on constructed probe sets: the
 * hot-cold rule, reuse and age limits, the fallback to `p2c:latency`, the
 * failing-member guard, random tie-breaking, seeded replay and its options.
 */
import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { Probe, type ProbeAnswer, type ProbedCandidate, type ProbeLimits } from '../../src/policy/probe.js';
import { binomialSigma } from '../helpers/policy.js';
import { thrown } from '../helpers/thrown.js';

/** A member with a fixed probe answer (or none), a fixed load and latency mean, and a failures flag. */
class Probed extends Backend implements ProbedCandidate {
  uses = 0;
  fails = false;
  constructor(
    id: string,
    private readonly rifNow: number | undefined,
    private readonly latUs: number,
    private readonly ageMs = 0,
    private readonly cost = 1,
  ) {
    super(id);
  }
  override load(): number {
    return this.cost;
  }
  latency(): number {
    return -1;
  }
  readProbe(out: ProbeAnswer): boolean {
    if (this.rifNow === undefined) return false;
    out.inflight = this.rifNow;
    out.latencyUs = this.latUs;
    out.ageMs = this.ageMs;
    out.uses = this.uses;
    return true;
  }
  useProbe(): void {
    this.uses++;
  }
  failing(): boolean {
    return this.fails;
  }
}

/** Members from [in-flight, latency] pairs (age 0). */
function members(answers: ReadonlyArray<readonly [number, number]>): Probed[] {
  return answers.map(([rif, lat], i) => new Probed(`b${i}`, rif, lat));
}

/** Limits with a fixed cold threshold, the whole slice sampled. */
function limits(over: Partial<ProbeLimits> = {}): ProbeLimits {
  return { maxAgeMs: 100, maxUses: 1000, quantile: 0.5, sample: 64, coldInflight: 3, ...over };
}

describe('the hot-cold rule', () => {
  it('picks the lowest latency among the cold members (in-flight at or below the threshold)', () => {
    // Cold (≤ 3): b0 (900), b1 (300), b4 (400); b2 and b3 are faster but hot.
    const set = members([
      [1, 900],
      [2, 300],
      [5, 100],
      [8, 50],
      [3, 400],
    ]);
    for (let seed = 1; seed <= 20; seed++) {
      for (const m of set) m.uses = 0;
      expect(new Probe({ seed, limits: limits() }).pick(set)).toBe(1);
    }
  });

  it('counts the picks made on an answer as in flight: b1 turns hot after two uses and b4 follows', () => {
    const set = members([
      [1, 900],
      [2, 300],
      [5, 100],
      [8, 50],
      [3, 400],
    ]);
    const p = new Probe({ seed: 7, limits: limits() });
    // b1: 2+0, 2+1 cold; then 2+2 = 4 hot. b4: 3+0 cold, then hot. b0: 1, 2, 3 cold; then all hot: the lowest in-flight.
    const seq = Array.from({ length: 6 }, () => p.pick(set));
    expect(seq).toEqual([1, 1, 4, 0, 0, 0]);
  });

  it('picks the lowest in-flight when no member is cold', () => {
    const set = members([
      [9, 10],
      [6, 900],
      [7, 20],
      [12, 5],
    ]);
    expect(new Probe({ seed: 3, limits: limits({ coldInflight: 2 }) }).pick(set)).toBe(1);
  });

  it("takes the sample's own quantile when the pool's threshold is not known", () => {
    // In-flight sorted 1, 2, 3, 5, 8: the median (nearest rank) is 3, so b0, b1, b4 are cold; quantile 0.2 leaves only b0.
    const set = members([
      [1, 900],
      [2, 300],
      [5, 100],
      [8, 50],
      [3, 400],
    ]);
    expect(new Probe({ seed: 1, limits: limits({ coldInflight: -1, quantile: 0.5 }) }).pick(set)).toBe(1);
    for (const m of set) m.uses = 0;
    expect(new Probe({ seed: 1, limits: limits({ coldInflight: -1, quantile: 0.2 }) }).pick(set)).toBe(0);
  });

  it('breaks exact ties at random, each tied member equally likely (no herding on the first)', () => {
    const set = members([
      [0, 100],
      [0, 100],
      [0, 100],
      [4, 1],
    ]);
    const p = new Probe({ seed: 11, limits: limits({ coldInflight: 0 }) });
    const counts = [0, 0, 0, 0];
    const N = 30_000;
    for (let k = 0; k < N; k++) {
      for (const m of set) m.uses = 0;
      counts[p.pick(set)]!++;
    }
    expect(counts[3]).toBe(0);
    for (let i = 0; i < 3; i++) expect(Math.abs(counts[i]! - N / 3)).toBeLessThan(5 * binomialSigma(N, 1 / 3));
  });

  it('samples only `sample` members: with 2 of 10 sampled, the fastest cold member wins only when drawn', () => {
    // b0 is the only fast one; sampled (2 of 10 distinct) with probability 2/10.
    const set = members(Array.from({ length: 10 }, (_, i) => [0, i === 0 ? 1 : 100] as const));
    const p = new Probe({ seed: 5, limits: limits({ sample: 2, coldInflight: 0 }) });
    let hits = 0;
    const N = 20_000;
    for (let k = 0; k < N; k++) {
      for (const m of set) m.uses = 0;
      if (p.pick(set) === 0) hits++;
    }
    expect(Math.abs(hits - N * 0.2)).toBeLessThan(5 * binomialSigma(N, 0.2));
  });
});

describe('missing, stale and used-up answers fall back to p2c:latency', () => {
  /** b3 answers best, but its load (the fallback's cost) is the second highest of 1..5: P2C picks it only paired with b4, 2/20. */
  function favouringB3(age: number, rif: number | undefined): Probed[] {
    return [0, 1, 2, 3, 4].map((i) => new Probed(`b${i}`, i === 3 ? rif : undefined, i === 3 ? 1 : 1000, age, i + 1));
  }

  function shareOfB3(set: Probed[], p: Probe): number {
    let hits = 0;
    for (let k = 0; k < 20_000; k++) if (p.pick(set) === 3) hits++;
    return hits;
  }

  it('uses a fresh answer (the control: b3 every time)', () => {
    expect(shareOfB3(favouringB3(10, 0), new Probe({ seed: 2, limits: limits({ maxUses: 1_000_000 }) }))).toBe(20_000);
  });

  it.each([
    ['stale', favouringB3(101, 0)],
    ['missing', favouringB3(0, undefined)],
  ])('%s: the picks are P2C over the loads', (_, set) => {
    const hits = shareOfB3(set, new Probe({ seed: 2, limits: limits() }));
    expect(Math.abs(hits - 2000)).toBeLessThan(5 * binomialSigma(20_000, 0.1));
  });

  it('used up: an answer serves maxUses picks, then the fallback decides', () => {
    const set = favouringB3(0, 0);
    const p = new Probe({ seed: 2, limits: limits({ maxUses: 50, coldInflight: 1_000_000 }) });
    const first = Array.from({ length: 50 }, () => p.pick(set));
    expect(first.every((i) => i === 3)).toBe(true);
    expect(set[3]!.uses).toBe(50);
    const hits = shareOfB3(set, p);
    expect(Math.abs(hits - 2000)).toBeLessThan(5 * binomialSigma(20_000, 0.1));
  });

  it('a pool that is off (sample 0 from the table) always falls back', () => {
    const hits = shareOfB3(favouringB3(0, 0), new Probe({ seed: 2, limits: limits({ sample: 0 }) }));
    expect(Math.abs(hits - 2000)).toBeLessThan(5 * binomialSigma(20_000, 0.1));
  });
});

describe('a fast-failing member', () => {
  it('answers probes best but, once its requests fail, attracts no pick', () => {
    const set = members([
      [2, 500],
      [2, 600],
      [0, 1],
      [2, 700],
    ]);
    const p = new Probe({ seed: 9, limits: limits({ coldInflight: 10 }) });
    expect(p.pick(set)).toBe(2);
    set[2]!.fails = true;
    const counts = [0, 0, 0, 0];
    for (let k = 0; k < 5000; k++) {
      for (const m of set) m.uses = 0;
      counts[p.pick(set)]!++;
    }
    expect(counts[2]).toBe(0);
    expect(counts[0]).toBe(5000);
  });
});

describe('replay and options', () => {
  it('replays exactly for one seed', () => {
    const run = (): number[] => {
      const set = members(Array.from({ length: 12 }, (_, i) => [i % 4, 100 + (i % 3)] as const));
      const p = new Probe({ seed: 42, sample: 3, quantile: 0.5, maxUses: 2 });
      return Array.from({ length: 200 }, () => p.pick(set));
    };
    expect(run()).toEqual(run());
  });

  it('refuses bad options with the field named', () => {
    expect(thrown(() => new Probe({ sample: 0 })).message).toMatch(/options\.sample/);
    expect(thrown(() => new Probe({ quantile: 0 })).message).toMatch(/options\.quantile/);
    expect(thrown(() => new Probe({ maxAgeMs: -1 })).message).toMatch(/options\.maxAgeMs/);
    expect(thrown(() => new Probe({ maxUses: 0 })).message).toMatch(/options\.maxUses/);
    expect(thrown(() => new Probe({ latencyRatio: 0.5 })).message).toMatch(/options\.latencyRatio/);
    expect(thrown(() => new Probe({ nope: 1 } as never)).code).toBe('InvalidConfig');
  });
});
