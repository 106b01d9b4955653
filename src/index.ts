/**
 * poise-lb — the package root: candidates, errors, every selection policy,
 * PeakEWMA and holdback admission. Nothing here performs I/O or loads a
 * dependency (no ioredis, piscina, pino or yaml; a test proves it), so a
 * program that only picks backends pays for nothing else.
 *
 * The runtime (Balancer, Router, worker pool, file membership, logger) is
 * `poise-lb/runtime`; the Redis control plane is `poise-lb/redis`; routed
 * connections and the TCP proxy are `poise-lb/net`. Explicit named exports
 * only: a name that is not listed here is not public.
 */

// errors
export { PoiseError, isPoiseError, type PoiseErrorCode } from './core/errors.js';

// candidates and weights
export {
  Backend,
  Prioritized,
  Localized,
  isStatus,
  MAX_PRIORITY,
  type Status,
  type Candidate,
  type StatusCandidate,
  type PriorityCandidate,
  type LocalityCandidate,
  type BackendOptions,
} from './core/candidate.js';
export { MAX_WEIGHT, isValidWeight, validateWeight } from './core/weight.js';

// random and hashing: the seedable generator behind every stochastic policy
// (for custom policies and replayable simulations), and the fleet-wide seed
// the keyed policies hash with
export { Rng, type Seed } from './core/rng.js';
export { DEFAULT_HASH_SEED, type HashSeed } from './core/hash.js';

// policy contracts
export type { Policy, PickContext, SeedOptions } from './policy/types.js';

// policies (single tier)
export { RoundRobin } from './policy/round-robin.js';
export { SmoothWeightedRoundRobin } from './policy/smooth-weighted.js';
export { Random } from './policy/random.js';
export { WeightedRandom } from './policy/weighted-random.js';
export { LeastLoaded } from './policy/least-loaded.js';
export { PowerOfTwo } from './policy/power-of-two.js';
export { Rendezvous } from './policy/rendezvous.js';
export { Maglev, MAGLEV_DEFAULT_TABLE_SIZE, type MaglevOptions } from './policy/maglev.js';
export { RingHash, RING_HASH_DEFAULT_MIN_SIZE, RING_HASH_MAX_SIZE, type RingHashOptions } from './policy/ring-hash.js';
export type { BoundedLoadOptions, KeyedOptions } from './policy/keyed.js';

// policies (priority and locality)
export { PriorityWeightedRandom } from './policy/priority/policy.js';
export { LocalityWeightedRandom } from './policy/priority/policy.js';
export { PreparedPriorityWeightedRandom, PreparedLocalityWeightedRandom } from './policy/priority/policy.js';
export type { PriorityOptions, ResolvedPriorityOptions, PanicMode, PriorityArithmetic } from './policy/priority/options.js';
export type { PriorityDecision, PriorityMode } from './policy/priority/draw.js';
export type { PriorityPlan, PriorityLevelPlan, LocalityPlan } from './policy/priority/policy.js';

// load measurement
export { PeakEwma, decayEstimate, observeSample, type PeakEwmaOptions } from './load/peak-ewma.js';

// admission
export { holdbackCeilings, type HoldbackOptions } from './admission/holdback.js';
