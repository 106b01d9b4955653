import { afterEach, describe, expect, it } from 'vitest';
import { holdbackCeilings } from '../src/admission/holdback.js';
import { type Candidate, Localized, Prioritized } from '../src/core/candidate.js';
import { PeakEwma } from '../src/load/peak-ewma.js';
import { LeastLoaded } from '../src/policy/least-loaded.js';
import { Maglev } from '../src/policy/maglev.js';
import { PowerOfTwo } from '../src/policy/power-of-two.js';
import { LocalityWeightedRandom, PriorityWeightedRandom } from '../src/policy/priority/policy.js';
import { Random } from '../src/policy/random.js';
import { Rendezvous } from '../src/policy/rendezvous.js';
import { RingHash } from '../src/policy/ring-hash.js';
import { RoundRobin } from '../src/policy/round-robin.js';
import { SmoothWeightedRoundRobin } from '../src/policy/smooth-weighted.js';
import type { Policy } from '../src/policy/types.js';
import { WeightedRandom } from '../src/policy/weighted-random.js';
import { Balancer } from '../src/runtime/balancer.js';
import { backends } from './helpers/policy.js';
import { thrown } from './helpers/thrown.js';

// Misspelled options are refused, never silently defaulted, by every public
// constructor: one table across modules, because the law is the same. And
// `{ seed }`, which every policy accepts, means exact replay.

const balancers: Balancer[] = [];
afterEach(() => {
  for (const b of balancers.splice(0)) b.close();
});

function tracked(): Balancer {
  const balancer = new Balancer({ capacity: 8 });
  balancers.push(balancer);
  return balancer;
}

describe('misspelled options are refused, never silently defaulted', () => {
  it.each([
    ['Balancer', () => new Balancer({ capcity: 8 } as never), 'options.capcity: unknown option (accepted: capacity, maxThreads,'],
    ['Router', () => tracked().router({ polcy: 'random' } as never), 'options.polcy: unknown option (accepted: policy,'],
    [
      'ejection',
      () => tracked().router({ ejection: { consecutiveFailure: 1 } } as never),
      'options.ejection.consecutiveFailure: unknown option',
    ],
    ['PowerOfTwo', () => new PowerOfTwo({ sed: 1 } as never), 'options.sed: unknown option (accepted: seed, latencyRatio)'],
    ['RoundRobin', () => new RoundRobin({ seeds: 1 } as never), 'options.seeds: unknown option (accepted: seed, start)'],
    ['Rendezvous', () => new Rendezvous({ hashseed: 1n } as never), 'options.hashseed: unknown option (accepted: hashSeed, seed)'],
    [
      'Maglev',
      () => new Maglev({ size: 7 } as never),
      'options.size: unknown option (accepted: hashSeed, tableSize, seed, balanceFactor, totalLoad)',
    ],
    ['PeakEwma', () => new PeakEwma({ tau: 10 } as never), 'options.tau: unknown option (accepted: tauMs, initialMs, clock)'],
    [
      'PriorityWeightedRandom',
      () => new PriorityWeightedRandom({ overprovisioning: 150 } as never),
      'options.overprovisioning: unknown option',
    ],
    ['holdbackCeilings', () => holdbackCeilings([1, 0], { minCeiling: 0.5, max: 1 } as never), 'options.max: unknown option'],
  ])('%s', (_name, make, message) => {
    const err = thrown(make);
    expect(err.code).toBe('InvalidConfig');
    expect(err.message).toContain(message);
  });
});

describe('{ seed } is exact replay', () => {
  // Eight equal members (one priority, one locality): every draw of a stochastic policy depends on its stream.
  const plain = backends(8);
  const tiered = plain.map((b) => new Localized(new Prioritized(b, 0), 'eu'));
  const PICKS = 64;
  const SEEDS = Array.from({ length: 20 }, (_, i) => i + 1);
  const picks = (policy: Policy<Candidate>, candidates: readonly Candidate[]): string =>
    Array.from({ length: PICKS }, (_, i) => policy.pick(candidates, { key: `k${i}` })).join(',');

  const stochastic: [string, (seed?: number) => Policy<Candidate>, readonly Candidate[]][] = [
    ['Random', (seed) => new Random({ seed }), plain],
    ['WeightedRandom', (seed) => new WeightedRandom({ seed }), plain],
    ['LeastLoaded (ties)', (seed) => new LeastLoaded({ seed }), plain],
    ['PowerOfTwo (ties)', (seed) => new PowerOfTwo({ seed }), plain],
    ['PriorityWeightedRandom', (seed) => new PriorityWeightedRandom({ seed }) as Policy<Candidate>, tiered],
    ['LocalityWeightedRandom', (seed) => new LocalityWeightedRandom({ seed }) as Policy<Candidate>, tiered],
    ['PreparedPriorityWeightedRandom', (seed) => new PriorityWeightedRandom({ seed, prepared: true }) as Policy<Candidate>, tiered],
    ['PreparedLocalityWeightedRandom', (seed) => new LocalityWeightedRandom({ seed, prepared: true }) as Policy<Candidate>, tiered],
  ];
  it.each(stochastic)('%s: the same seed replays the same picks; 20 seeds draw 20 different sequences', (_name, make, candidates) => {
    const bySeed = SEEDS.map((seed) => picks(make(seed), candidates));
    for (const [i, seed] of SEEDS.entries()) expect(picks(make(seed), candidates), `seed ${seed}`).toBe(bySeed[i]);
    // 64 picks among 8: two different streams agree on all of them with probability 8^-64.
    expect(new Set(bySeed).size).toBe(SEEDS.length);
  });

  // These draw no random numbers (round robin is a cursor; keyed policies hash with the fleet-wide hashSeed, so that
  // every worker, process and restart agrees on a key): `seed` is accepted for a uniform interface and changes nothing.
  const deterministic: [string, (seed?: number) => Policy<Candidate>][] = [
    ['RoundRobin', (seed) => new RoundRobin({ seed })],
    ['SmoothWeightedRoundRobin', (seed) => new SmoothWeightedRoundRobin({ seed })],
    ['Rendezvous', (seed) => new Rendezvous({ seed })],
    ['Maglev', (seed) => new Maglev({ seed, tableSize: 31 })],
    ['RingHash', (seed) => new RingHash({ seed })],
  ];
  it.each(deterministic)('%s draws nothing: every seed, and none, gives the same picks', (_name, make) => {
    const unseeded = picks(make(), plain);
    for (const seed of SEEDS) expect(picks(make(seed), plain), `seed ${seed}`).toBe(unseeded);
  });
});
