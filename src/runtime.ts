/**
 * poise-lb/runtime — the Balancer and its routers, the piscina worker pool,
 * file membership and the logger. Loads pino, piscina and yaml; never
 * ioredis (the Redis control plane is `poise-lb/redis`). Explicit named
 * exports only.
 */

// membership specs (what Balancer.update and every source carry)
export type { BackendSpec, ResolvedBackendSpec, MembershipSnapshot, MembershipOutcome, SpecStatus } from './core/spec.js';

// the shared table, read side
export type { LoadTableView } from './load/table-view.js';
export {
  LoadTable,
  SlotState,
  HealthFlag,
  LeaseKind,
  EwmaSeries,
  type SlotStats,
  type SlotStateCode,
  type LeaseKindCode,
  type EwmaSeriesCode,
} from './load/load-table.js';

// owner, routers, leases
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
export type { AcquireAsyncOptions } from './runtime/acquire-options.js';
export type { PoolGauge } from './runtime/pool-gauge.js';

// admission on the pool's global saturation (docs/admission.md)
export {
  AdmissionGate,
  type AdmissionGateOptions,
  type AdmissionStats,
  type AdmissionBandStats,
  type AdmissionRejection,
  type AdmissionLoadKind,
} from './admission/admission.js';
export { KEYED_POLICY_NAMES, POLICY_NAMES } from './runtime/policies.js';
export type { EjectionOptions } from './runtime/health.js';
export type { Clock } from './runtime/clock.js';

// health: active checks, outlier detection, degraded (docs/health.md)
export type {
  HealthConfig,
  HealthCheckOptions,
  OutlierOptions,
  ResolvedOutlier,
  CheckKind,
  CheckVerdict,
  CheckTarget,
  CustomCheck,
  QueryClient,
} from './health/config.js';
export type { HealthStats, HealthCounters, BackendHealth } from './health/stats.js';
export { findOutliers, ejectionTimeMs, type IntervalSample, type OutlierReason } from './health/outlier.js';
export { createWorkerPool, workerRouter, poolWorkerData, type WorkerPool, type WorkerPoolOptions } from './runtime/pool.js';

// membership sources: the contract, binding, the file/static source and its document
export {
  bindMembership,
  type MembershipSource,
  type MembershipTarget,
  type MembershipBinding,
  type SnapshotListener,
  type BindOptions,
} from './membership/source.js';
export { StaticMembership, type StaticMembershipInput, type StaticMembershipOptions } from './membership/static.js';
export {
  resolveDocument,
  parseDocument,
  DEFAULT_MAX_DOCUMENT_BYTES,
  type MembershipDocument,
  type ResolvedDocument,
  type DocumentFormat,
} from './membership/document.js';

// logging
export { createLogger, LOG_LEVELS, type Logger, type LoggerOptions, type LogLevel } from './log.js';
