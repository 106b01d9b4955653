/**
 * poise-lb/grpc — poise as a grpc-js load-balancing policy (`poise`) and
 * resolver scheme (`poise:///cluster`): every call takes a request lease
 * from a poise Router over the shared table, so every thread's channels see
 * every thread's calls. `@grpc/grpc-js` is a peer dependency: only this
 * entry loads it. Explicit named exports only.
 */
export { registerPoiseCluster, poiseServiceConfig } from './grpc/register.js';
export type { PoiseLbConfig, CallOutcome } from './grpc/config.js';
export type { ClusterOptions, ClusterTarget } from './grpc/registry.js';
export { GrpcCounters, GRPC_STATUS_CLASSES, type GrpcBackendFigures } from './grpc/counters.js';
