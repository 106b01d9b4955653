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
  type MembershipOutcome,
} from './core/spec.js';
export type { Policy, PickContext, SeedOptions } from './policy/types.js';
export { createLogger, rateLimited, LOG_LEVELS, type Logger, type LoggerOptions, type LogLevel, type RateLimitedLogger, type RateLimitOptions } from './log.js';

// policy (single tier)
export { RoundRobin } from './policy/round-robin.js';
export { SmoothWeightedRoundRobin } from './policy/smooth-weighted.js';
export { Random } from './policy/random.js';
export { WeightedRandom } from './policy/weighted-random.js';
export { LeastLoaded } from './policy/least-loaded.js';
export { PowerOfTwo } from './policy/power-of-two.js';
export { Rendezvous } from './policy/rendezvous.js';
export { Maglev, MAGLEV_DEFAULT_TABLE_SIZE, type MaglevOptions } from './policy/maglev.js';
export type { KeyedOptions } from './policy/keyed.js';

// policy (priority and locality)
export { PriorityWeightedRandom } from './policy/priority.js';
export { LocalityWeightedRandom } from './policy/locality.js';
export { PreparedPriorityWeightedRandom, PreparedLocalityWeightedRandom } from './policy/priority-prepared.js';
export type { PriorityOptions, PanicMode, PriorityArithmetic } from './policy/priority-options.js';
export type { PriorityDecision, PriorityMode } from './policy/priority-decide.js';
export type { PriorityPlan, PriorityLevelPlan, LocalityPlan } from './policy/priority-plan.js';
export { MILLION, mulDivFloor } from './core/weight.js';

// load
export { PeakEwma, decayEstimate, observeSample, type PeakEwmaOptions } from './load/peak-ewma.js';
export {
  LoadTable,
  SlotState,
  LeaseKind,
  EwmaSeries,
  LAYOUT_VERSION,
  type LoadTableOptions,
  type SlotStats,
  type SlotStateCode,
  type LeaseKindCode,
  type EwmaSeriesCode,
} from './load/load-table.js';

// runtime
export { Balancer, type BalancerOptions, type ReclaimEvent } from './runtime/balancer.js';
export {
  Router,
  type RouterOptions,
  type RouterAttachment,
  type AcquireOptions,
  type LeaseKindName,
  type PolicyName,
  type Outcome,
} from './runtime/router.js';
export { Lease, type ReleaseOptions } from './runtime/lease.js';
export { POLICY_NAMES } from './runtime/policies.js';
export { resolveEjection, backoffMs, type EjectionOptions, type ResolvedEjection } from './runtime/health.js';
export { sharedClock, type Clock } from './runtime/clock.js';
export { createWorkerPool, workerRouter, poolWorkerData, type WorkerPool, type WorkerPoolOptions } from './runtime/pool.js';

// admission
export { holdbackCeilings, type HoldbackOptions } from './admission/holdback.js';
export { FlowController, type FlowControllerOptions, type Permit } from './admission/flow-controller.js';

// net
export { connect, type ConnectOptions, type RoutedConnection } from './net/connect.js';
export { TcpProxy, type TcpProxyOptions, type TcpProxyStats } from './net/proxy.js';

// membership
export {
  resolveDocument,
  parseDocument,
  DEFAULT_MAX_DOCUMENT_BYTES,
  type MembershipDocument,
  type ResolvedDocument,
  type DocumentFormat,
} from './membership/document.js';
export {
  bindMembership,
  type MembershipSource,
  type MembershipTarget,
  type MembershipBinding,
  type SnapshotListener,
  type BindOptions,
} from './membership/source.js';
export { StaticMembership, type StaticMembershipInput, type StaticMembershipOptions } from './membership/static.js';
export { membershipKeys, DEFAULT_PREFIX, type MembershipKeys } from './membership/redis-keys.js';
export { MembershipPublisher, type MembershipPublisherOptions, type StoredMembership } from './membership/redis-publisher.js';
export { RedisMembership, type RedisMembershipOptions, type SnapshotOrigin } from './membership/redis-source.js';
