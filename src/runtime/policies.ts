/**
 * Policies by name: what a Router builds from `RouterOptions.policy`.
 *
 * Every name runs inside the priority and locality layer
 * (policy/priority/layer.ts): the layer chooses the priority (Envoy
 * overprovisioning, spill-over and panic) and the locality (health-adjusted
 * locality weights) from the plan prepared when the view was built, and the
 * named policy chooses among that group's members.
 *
 * | name                | policy inside the layer          | load() metric |
 * |---------------------|---------------------------------|---------------|
 * | `round-robin`       | RoundRobin (EDF when weighted)  | — |
 * | `smooth-weighted`   | SmoothWeightedRoundRobin        | — |
 * | `random`            | Random                          | — |
 * | `weighted`          | WeightedRandom                  | — |
 * | `least-loaded`      | LeastLoaded                     | connections + requests |
 * | `p2c`               | PowerOfTwo                      | connections + requests |
 * | `p2c:connections`   | PowerOfTwo                      | active connections |
 * | `p2c:requests`      | PowerOfTwo                      | in-flight requests |
 * | `p2c:connectionTime`| PowerOfTwo                      | PeakEWMA connect time × (connections + 1) |
 * | `p2c:latency`       | PowerOfTwo (the default)        | PeakEWMA latency × (requests + 1) |
 * | `probe`             | Probe (the probe pool's answers; `health.probe`) | the answers' in-flight and latency; PeakEWMA latency × (requests + 1) in its `p2c:latency` fallback |
 * | `rendezvous`        | Rendezvous (needs `key`)        | — |
 * | `maglev`            | Maglev (needs `key`)            | — |
 * | `maglev:bounded`    | Maglev, bounded loads c = 1.25  | connections + requests, total from the rows' totals (PoolTotal) |
 * | `ring-hash`         | RingHash (ketama; needs `key`)  | — |
 * | `ring-hash:bounded` | RingHash, bounded loads c = 1.25 | connections + requests, total from the rows' totals (PoolTotal) |
 * | `priority`          | PriorityWeightedRandom, prepared | — (weighted random is the layer's own last stage) |
 * | `locality`          | LocalityWeightedRandom, prepared | — (also localities) |
 *
 * Every stochastic policy is seeded from the OS in the thread that builds it,
 * unless a replay seed is given; the first group's policy gets the router's
 * policy seed itself, so with one group a seeded sequence is the named
 * policy's own. A round-robin rotation in a worker thread starts at a seeded
 * random offset (Envoy's per-worker start), the owner thread's at the first
 * member.
 */
import { isMainThread } from 'node:worker_threads';
import { invalidConfig } from '../core/errors.js';
import { numberIn } from '../core/validate.js';
import type { Seed } from '../core/rng.js';
import { LeastLoaded } from '../policy/least-loaded.js';
import { Maglev } from '../policy/maglev.js';
import { PowerOfTwo } from '../policy/power-of-two.js';
import { Probe } from '../policy/probe.js';
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
  | 'probe'
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
  'probe',
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
  /** A fresh policy instance (the layer around the named policy) over the router's load environment. */
  create(seed: Seed | undefined, env: LoadEnv): Policy<SlotCandidate>;
  /** The metric candidates' load() reports. */
  metric: MetricCode;
}

/** `seed` mixed with `salt` (a different stream for each salt; salt 0 is the seed itself). */
function salted(seed: Seed | undefined, salt: number): Seed | undefined {
  if (seed === undefined || salt === 0) return seed;
  return BigInt.asUintN(64, BigInt(seed) * 0xbf58476d1ce4e5b9n + BigInt(salt) * 0x94d049bb133111ebn + 1n);
}

/** The layer's own draws (priority and locality) use this salt of the policy seed. */
const LAYER_SALT = 0x5eed;

/** The named policy `make` inside the priority and locality layer; `keyed`: a key picks the priority and locality too. */
const layered = (metric: MetricCode, make: (seed: Seed | undefined, env: LoadEnv) => Policy, keyed = false): PolicySetup => ({
  create: (seed, env) =>
    new LocalityWeightedRandom<SlotCandidate>({
      prepared: true,
      seed: salted(seed, LAYER_SALT),
      within: (group) => make(salted(seed, group), env),
      stickyKeys: keyed,
    }),
  metric,
});

/** Where a round-robin rotation starts: a seeded offset in worker threads, the first member in the owner thread. */
const START = isMainThread ? 'first' : 'random';

/**
 * `p2c:latency`'s tail rule when the router does not set one: a member whose
 * mean latency is more than twice its pair partner's loses the pair
 * (docs/policies.md, "The tail rule"). `Infinity` turns it off.
 */
export const DEFAULT_LATENCY_RATIO = 2;

/** Policy options a Router passes on (`RouterOptions.latencyRatio`). */
export interface PolicyTuning {
  /** PowerOfTwo's tail rule for `p2c:latency` (power-of-two.ts), over the latency's plain EWMA. */
  latencyRatio?: number;
}

/**
 * Resolves a policy name; throws `InvalidConfig` naming `options.policy` for
 * an unknown one, and `options.latencyRatio` when given for a policy without
 * a latency estimate or out of range. @internal
 */
export function policySetup(name: unknown, tuning: PolicyTuning = {}): PolicySetup {
  const { latencyRatio } = tuning;
  if (latencyRatio !== undefined) {
    if (name !== 'p2c:latency' && name !== 'probe' && POLICY_NAMES.includes(name as PolicyName))
      invalidConfig('options.latencyRatio', 'applies to p2c:latency and probe only', latencyRatio);
    numberIn(latencyRatio, 'options.latencyRatio', 1, Number.POSITIVE_INFINITY);
  }
  switch (name) {
    case 'round-robin':
      return layered(Metric.Outstanding, (seed) => new RoundRobin({ seed, start: START }));
    case 'smooth-weighted':
      return layered(Metric.Outstanding, () => new SmoothWeightedRoundRobin());
    case 'random':
      return layered(Metric.Outstanding, (seed) => new Random({ seed }));
    case 'weighted':
      return layered(Metric.Outstanding, (seed) => new WeightedRandom({ seed }));
    case 'least-loaded':
      return layered(Metric.Outstanding, (seed) => new LeastLoaded({ seed }));
    case 'p2c':
      return layered(Metric.Outstanding, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:connections':
      return layered(Metric.Connections, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:requests':
      return layered(Metric.Requests, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:connectionTime':
      return layered(Metric.ConnectTime, (seed) => new PowerOfTwo({ seed }));
    case 'p2c:latency':
      return layered(Metric.Latency, (seed) => new PowerOfTwo({ seed, latencyRatio: latencyRatio ?? DEFAULT_LATENCY_RATIO }));
    case 'probe':
      // The limits are the owner's (health.probe), read from the table at every pick.
      return layered(
        Metric.Probe,
        (seed, env) => new Probe({ seed, latencyRatio: latencyRatio ?? DEFAULT_LATENCY_RATIO, limits: env.table.probes }),
      );
    case 'rendezvous':
      return layered(Metric.Outstanding, () => new Rendezvous(), true);
    case 'maglev':
      return layered(Metric.Outstanding, () => new Maglev(), true);
    case 'maglev:bounded':
      return layered(
        Metric.Outstanding,
        (_, env) => new Maglev({ balanceFactor: BOUNDED_FACTOR, totalLoad: () => env.pool!.read() }),
        true,
      );
    case 'ring-hash':
      return layered(Metric.Outstanding, () => new RingHash(), true);
    case 'ring-hash:bounded':
      return layered(
        Metric.Outstanding,
        (_, env) => new RingHash({ balanceFactor: BOUNDED_FACTOR, totalLoad: () => env.pool!.read() }),
        true,
      );
    case 'priority':
      return { create: (seed) => new PriorityWeightedRandom<SlotCandidate>({ seed, prepared: true }), metric: Metric.Outstanding };
    case 'locality':
      return { create: (seed) => new LocalityWeightedRandom<SlotCandidate>({ seed, prepared: true }), metric: Metric.Outstanding };
    default:
      return invalidConfig('options.policy', `must be one of ${POLICY_NAMES.join(', ')}`, name);
  }
}
