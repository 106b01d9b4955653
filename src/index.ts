/**
 * poise-lb — the public surface. Explicit named exports only.
 */

// core
export { PoiseError, isPoiseError, type PoiseErrorCode } from './core/errors.js';
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
export { MAX_WEIGHT, isValidWeight, validateWeight, checkedAdd, checkedSum } from './core/weight.js';
export { Rng, type Seed } from './core/rng.js';
export { DEFAULT_HASH_SEED, hash64, hash32, hash53, type HashSeed } from './core/hash.js';
export {
  resolveBackendSpec,
  resolveBackendSpecs,
  parseAddress,
  MAX_INFLIGHT,
  type BackendSpec,
  type ResolvedBackendSpec,
  type MembershipSnapshot,
} from './core/spec.js';
export type { Policy, PickContext, SeedOptions } from './policy/types.js';
export { createLogger, type Logger, type LoggerOptions } from './log.js';

// policy (single tier)

// policy (priority and locality)

// load

// runtime

// membership
