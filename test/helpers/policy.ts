import { Backend, type Status } from '../../src/core/candidate.js';
import { LeastLoaded } from '../../src/policy/least-loaded.js';
import { Maglev } from '../../src/policy/maglev.js';
import { PowerOfTwo } from '../../src/policy/power-of-two.js';
import { Random } from '../../src/policy/random.js';
import { Rendezvous } from '../../src/policy/rendezvous.js';
import { RoundRobin } from '../../src/policy/round-robin.js';
import { SmoothWeightedRoundRobin } from '../../src/policy/smooth-weighted.js';
import type { Policy } from '../../src/policy/types.js';
import { WeightedRandom } from '../../src/policy/weighted-random.js';

/** Every single-tier policy by name, built from a seed (keyed policies ignore it; Maglev with a small table). */
export const SINGLE_TIER_POLICIES: Readonly<Record<string, (seed: number) => Policy>> = {
  RoundRobin: () => new RoundRobin(),
  SmoothWeightedRoundRobin: () => new SmoothWeightedRoundRobin(),
  Random: (seed) => new Random({ seed }),
  WeightedRandom: (seed) => new WeightedRandom({ seed }),
  LeastLoaded: (seed) => new LeastLoaded({ seed }),
  PowerOfTwo: (seed) => new PowerOfTwo({ seed }),
  Rendezvous: () => new Rendezvous(),
  Maglev: () => new Maglev({ tableSize: 31 }),
};

/** n backends b0..b(n−1), weight 1 and load 0 unless given. */
export function backends(
  n: number,
  opts: { weights?: readonly number[]; loads?: readonly number[]; status?: (i: number) => Status } = {},
): Backend[] {
  return Array.from({ length: n }, (_, i) => {
    const load = opts.loads?.[i] ?? 0;
    return new Backend(`b${i}`, { weight: opts.weights?.[i] ?? 1, load: () => load, status: opts.status?.(i) ?? 'ready' });
  });
}

/** Counts of each index over `picks` calls. */
export function histogram(n: number, picks: number, pick: () => number): number[] {
  const counts = new Array<number>(n).fill(0);
  for (let i = 0; i < picks; i++) counts[pick()]!++;
  return counts;
}

/** σ of a binomial count: √(N·p·(1 − p)). */
export function binomialSigma(trials: number, p: number): number {
  return Math.sqrt(trials * p * (1 - p));
}

/** How many positions two equal-length sequences agree on. */
export function agreements(a: readonly number[], b: readonly number[]): number {
  let k = 0;
  for (let i = 0; i < a.length; i++) if (a[i] === b[i]) k++;
  return k;
}
