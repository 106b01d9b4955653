/**
 * Policies by name: what a Router builds from `RouterOptions.policy`.
 *
 * | name                | policy                          | load() metric |
 * |---------------------|---------------------------------|---------------|
 * | `round-robin`       | RoundRobin                      | — |
 * | `smooth-weighted`   | SmoothWeightedRoundRobin        | — |
 * | `random`            | Random                          | — |
 * | `weighted`          | WeightedRandom                  | — |
 * | `least-loaded`      | LeastLoaded                     | connections + requests |
 * | `p2c`               | PowerOfTwo                      | connections + requests |
 * | `p2c:connections`   | PowerOfTwo                      | active connections |
 * | `p2c:requests`      | PowerOfTwo                      | in-flight requests |
 * | `p2c:connectionTime`| PowerOfTwo                      | PeakEWMA connect time × (connections + 1) |
 * | `p2c:latency`       | PowerOfTwo (the default)        | PeakEWMA latency × (requests + 1) |
 * | `rendezvous`        | Rendezvous (needs `key`)        | — |
 * | `maglev`            | Maglev (needs `key`)            | — |
 * | `maglev:bounded`    | Maglev, bounded loads c = 1.25  | connections + requests, total from the rows' totals (PoolTotal) |
 * | `ring-hash`         | RingHash (ketama; needs `key`)  | — |
 * | `ring-hash:bounded` | RingHash, bounded loads c = 1.25 | connections + requests, total from the rows' totals (PoolTotal) |
 * | `priority`          | PriorityWeightedRandom, prepared | — (reads health, priorities) |
 * | `locality`          | LocalityWeightedRandom, prepared | — (also localities) |
 *
 * Every stochastic policy is seeded from the OS in the thread that builds it,
 * unless a replay seed is given.
 */
import { invalidConfig } from '../core/errors.js';
import type { Seed } from '../core/rng.js';
import { LeastLoaded } from '../policy/least-loaded.js';
import { Maglev } from '../policy/maglev.js';
import { PowerOfTwo } from '../policy/power-of-two.js';
import { LocalityWeightedRandom, PriorityWeightedRandom } from '../policy/priority/policy.js';
import { Random } from '../policy/random.js';
import { Rendezvous } from '../policy/rendezvous.js';
import { RoundRobin } from '../policy/round-robin.js';
import { SmoothWeightedRoundRobin } from '../policy/smooth-weighted.js';
import type { Policy } from '../policy/types.js';
import { WeightedRandom } from '../policy/weighted-random.js';
import { RingHash } from '../policy/ring-hash.js';
import { Metric, type LoadEnv, type MetricCode, type SlotCandidate } from './slot-candidate.js';

/**
 * c of the bounded-load names: a backend takes a key while its load stays
 * within 25 % above the average (the value Mirrokni et al. and Vimeo's
 * HAProxy deployment used; HAProxy suggests 125-200 for hash-balance-factor).
 */
export const BOUNDED_FACTOR = 1.25;

/** Every policy name a Router accepts. */
export type PolicyName =
  | 'round-robin'
  | 'smooth-weighted'
  | 'random'
  | 'weighted'
  | 'least-loaded'
  | 'p2c'
  | 'p2c:connections'
  | 'p2c:requests'
  | 'p2c:connectionTime'
  | 'p2c:latency'
  | 'rendezvous'
  | 'maglev'
  | 'maglev:bounded'
  | 'ring-hash'
  | 'ring-hash:bounded'
  | 'priority'
  | 'locality';

/** All names, in documentation order. */
export const POLICY_NAMES: readonly PolicyName[] = [
  'round-robin',
  'smooth-weighted',
  'random',
  'weighted',
  'least-loaded',
  'p2c',
  'p2c:connections',
  'p2c:requests',
  'p2c:connectionTime',
  'p2c:latency',
  'rendezvous',
  'maglev',
  'maglev:bounded',
  'ring-hash',
  'ring-hash:bounded',
  'priority',
  'locality',
];

/** The keyed policies: each pick needs an affinity key (`acquire({ key })`), without one they fall back to round robin. */
export const KEYED_POLICY_NAMES: readonly PolicyName[] = ['rendezvous', 'maglev', 'maglev:bounded', 'ring-hash', 'ring-hash:bounded'];

/** What the factory returns. @internal */
export interface PolicySetup {
  /** A fresh policy instance over the router's load environment. */
  create(seed: Seed | undefined, env: LoadEnv): Policy<SlotCandidate>;
  /** The metric candidates' load() reports. */
  metric: MetricCode;
  /** Priority-aware: the view keeps unavailable and ejected members (they count in availability). */
  tiered: boolean;
}

const plain = (metric: MetricCode, make: (seed: Seed | undefined, env: LoadEnv) => Policy<SlotCandidate>): PolicySetup => ({
  create: make,
  metric,
  tiered: false,
});

/** Resolves a policy name; throws `InvalidConfig` naming `options.policy` for an unknown one. @internal */
export function policySetup(name: unknown): PolicySetup {
  switch (name) {
    case 'round-robin':
      return plain(Metric.Outstanding, () => new RoundRobin());
    case 'smooth-weighted':
      return plain(Metric.Outstanding, () => new SmoothWeightedRoundRobin());
    case 'random':
      return plain(Metric.Outstanding, (seed) => new Random({ seed }));
    case 'weighted':
      return plain(Metric.Outstanding, (seed) => new WeightedRandom({ seed }));
    case 'least-loaded':
      return plain(Metric.Outstanding, (seed) => new LeastLoaded({ seed }));
    case 'p2c':
      return plain(Metric.Outstanding, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:connections':
      return plain(Metric.Connections, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:requests':
      return plain(Metric.Requests, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:connectionTime':
      return plain(Metric.ConnectTime, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:latency':
      return plain(Metric.Latency, (seed) => new PowerOfTwo({ seed }));
    case 'rendezvous':
      return plain(Metric.Outstanding, () => new Rendezvous());
    case 'maglev':
      return plain(Metric.Outstanding, () => new Maglev());
    case 'maglev:bounded':
      return plain(Metric.Outstanding, (_, env) => new Maglev({ balanceFactor: BOUNDED_FACTOR, totalLoad: () => env.pool!.read() }));
    case 'ring-hash':
      return plain(Metric.Outstanding, () => new RingHash());
    case 'ring-hash:bounded':
      return plain(Metric.Outstanding, (_, env) => new RingHash({ balanceFactor: BOUNDED_FACTOR, totalLoad: () => env.pool!.read() }));
    case 'priority':
      return {
        create: (seed) => new PriorityWeightedRandom<SlotCandidate>({ seed, prepared: true }),
        metric: Metric.Outstanding,
        tiered: true,
      };
    case 'locality':
      return {
        create: (seed) => new LocalityWeightedRandom<SlotCandidate>({ seed, prepared: true }),
        metric: Metric.Outstanding,
        tiered: true,
      };
    default:
      return invalidConfig('options.policy', `must be one of ${POLICY_NAMES.join(', ')}`, name);
  }
}
