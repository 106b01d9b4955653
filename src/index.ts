/**
 * poise-lb — the package root: candidates, errors, every selection policy,
 * PeakEWMA and holdback admission. Nothing here performs I/O or loads a
 * dependency (no ioredis, piscina, pino or yaml; a test proves it), so a
 * program that only picks backends pays for nothing else.
 *
 * The runtime (Balancer, Router, worker pool, file membership, logger) is
 * `poise-lb/runtime`; the Redis control plane is `poise-lb/redis`; routed
 * connections and the TCP proxy are `poise-lb/net`. Explicit named exports
 * only: a name that is not listed here is not public, and the library's own
 * code imports from the source files, never from this entry. At most 40
 * names (test/surface.test.ts).
 */

// errors
export { PoiseError, isPoiseError, type PoiseErrorCode } from './core/errors.js';

// candidates
export {
  Backend,
  Prioritized,
  Localized,
  type Status,
  type Candidate,
  type BackendOptions,
} from './core/candidate.js';

// the fleet-wide seed the keyed policies hash with
export { DEFAULT_HASH_SEED } from './core/hash.js';

// policy contracts
export type { Policy, PickContext } from './policy/types.js';

// policies (single tier)
export { RoundRobin } from './policy/round-robin.js';
export { SmoothWeightedRoundRobin } from './policy/smooth-weighted.js';
export { Random } from './policy/random.js';
export { WeightedRandom } from './policy/weighted-random.js';
export { LeastLoaded } from './policy/least-loaded.js';
export { PowerOfTwo } from './policy/power-of-two.js';
export { Rendezvous } from './policy/rendezvous.js';
export { Maglev, type MaglevOptions } from './policy/maglev.js';
export { RingHash, type RingHashOptions } from './policy/ring-hash.js';
export type { KeyedOptions } from './policy/keyed.js';

// policies (priority and locality)
export { PriorityWeightedRandom, LocalityWeightedRandom, type PriorityPlan } from './policy/priority/policy.js';
export type { PriorityOptions } from './policy/priority/options.js';
export type { PriorityDecision } from './policy/priority/draw.js';

// load measurement
export { PeakEwma, type PeakEwmaOptions } from './load/peak-ewma.js';

// admission
export { holdbackCeilings, type HoldbackOptions } from './admission/holdback.js';
