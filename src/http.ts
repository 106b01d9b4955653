/**
 * poise-lb/http — per-request routing for HTTP: an undici `Dispatcher` that
 * takes one lease per request from a poise Router (`fetch`, `undici.request`,
 * `setGlobalDispatcher`, interceptors), its retry budget and its shared
 * per-backend counters. undici (7 or 8) is a peer dependency: only this
 * entry loads it. Explicit named exports only.
 */
export { PoiseDispatcher, type PoiseDispatcherOptions, type RouteOptions } from './http/dispatcher.js';
export { RatioRetryBudget, type RetryBudget, type RetryBudgetOptions } from './runtime/retry-budget.js';
export {
  HttpCounters,
  HTTP_OUTCOMES,
  HEDGE_RESULTS,
  LATENCY_BUCKETS_SECONDS,
  type HttpBackendFigures,
  type HttpOutcome,
  type HedgeResult,
} from './http/counters.js';
export type { HedgeCounts, HedgeOptions } from './http/hedge.js';
export type { AttemptOutcome } from './http/outcome.js';
export type { BackendDispatcher, PoolFactory } from './http/pools.js';
