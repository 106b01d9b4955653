/**
 * poise-lb/runtime — the Balancer and its routers, the piscina worker pool,
 * file membership and the logger. Loads pino, piscina and yaml; never
 * ioredis (the Redis control plane is `poise-lb/redis`). Explicit named
 * exports only; at most 30 names (test/surface.test.ts). A type
 * that is not listed is still reachable from the ones that are (e.g.
 * `BalancerOptions['health']`).
 */

// membership specs (what Balancer.update and every source carry)
export type { BackendSpec, ResolvedBackendSpec, MembershipSnapshot } from './core/spec.js';

// owner, routers, leases
export { Balancer, type BalancerOptions } from './runtime/balancer.js';
export {
  Router,
  type RouterOptions,
  type RouterAttachment,
  type AcquireOptions,
  type PolicyName,
  type Outcome,
} from './runtime/router.js';
export { Lease } from './runtime/lease.js';

// the shared table, read side (`balancer.table`, `LoadTable.attach(buffer)` in another thread)
export { LoadTable } from './load/load-table.js';
export type { LoadTableView } from './load/table-view.js';

// admission on the pool's global saturation (docs/admission.md)
export { AdmissionGate, type AdmissionGateOptions, type AdmissionStats } from './admission/admission.js';

// health: active checks, outlier detection, degraded (docs/health.md)
export type { HealthConfig } from './health/config.js';

// worker threads (piscina)
export { createWorkerPool, workerRouter, poolWorkerData, type WorkerPool, type WorkerPoolOptions } from './runtime/pool.js';

// membership sources: the contract, binding, the file/static source
export { bindMembership, type MembershipSource } from './membership/source.js';
export { StaticMembership } from './membership/static.js';

// logging
export { createLogger, type Logger } from './log.js';
