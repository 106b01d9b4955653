/**
 * The Balancer's options and the event it emits when it reclaims an exited
 * worker's leases: the types only (balancer.ts re-exports them).
 */
import type { HealthConfig } from '../health/config.js';
import type { Logger } from '../log.js';
import type { Clock } from './clock.js';
import type { ConnectionBudgetOptions } from './connection-budget-options.js';
import type { RetryBudgetOptions } from './retry-budget.js';
import type { SlowStartOptions } from './slow-start-options.js';

/** Options of {@link Balancer}. */
export interface BalancerOptions {
  /** Max concurrent slots (live backends + draining tombstones); default 1024. */
  capacity?: number;
  /** Max threads with routers attached at once (attribution rows); default 64, at most 255. */
  maxThreads?: number;
  /** Bytes for the spec blob (ids, addresses as JSON); default `capacity × 1024`. */
  specBytes?: number;
  /** PeakEWMA decay τ, ms, shared by all routers; default 1000 (Sōzu). */
  tauMs?: number;
  /**
   * PeakEWMA estimate of an unmeasured backend, ms; default 50 (Sōzu). For
   * `p2c:latency` a prior only: the cost of an unmeasured backend whose first
   * request is still out (× (requests + 1); 0 while idle), replaced by its
   * first sample (docs/policies.md, "The cold start").
   */
  initialMs?: number;
  /** Default `defaultLogger()`. */
  logger?: Logger;
  /** ms; default the shared process clock (the same in every thread, see runtime/clock.ts). Injected clocks apply to this thread's routers only. */
  clock?: Clock;
  /** Slot alignment, for the padding benchmark only; default `'padded'`. */
  layout?: 'padded' | 'unaligned';
  /**
   * Active checks and outlier detection, run by this (owner) thread; see
   * docs/health.md. A membership snapshot that carries `health` (a membership
   * document's `health` block) replaces it.
   */
  health?: HealthConfig;
  /**
   * The process's retry budget, kept in the shared table so every thread's
   * `connect()`, `routedStream()`, `TcpProxy` and HTTP dispatcher draw on
   * one budget: `{ ratio = 0.2, minRetriesPerSecond = 10, ttlMs = 10000 }`,
   * or `false` (default: none; every retry allowed up to each call's
   * `attempts`). A membership snapshot that carries `retryBudget` replaces
   * it. See docs/resilience.md.
   */
  retryBudget?: RetryBudgetOptions | false;
  /**
   * Slow start (Envoy's `slow_start_config`): a backend that joins, passes
   * its active check again or ends an ejection ramps its weight (and, for
   * load-based policies, its load) over `windowMs`:
   * `max(minWeightPercent / 100, (elapsed / windowMs) ^ (1 / aggression))`.
   * `{ windowMs, aggression = 1, minWeightPercent = 10 }`, or `false`
   * (default: off). A membership snapshot that carries `slowStart` replaces
   * it. See docs/resilience.md.
   */
  slowStart?: SlowStartOptions | false;
  /**
   * The fleet connection budget's limit per backend (`{ limitPerBackend,
   * reserve = 0, ttlMs = 10000 }`, or `false`: none), for a
   * FleetConnectionBudget (`poise-lb/redis`) started on this Balancer without
   * its own. A membership snapshot that carries `connectionBudget` replaces
   * it. See docs/connection-budget.md.
   */
  connectionBudget?: ConnectionBudgetOptions | false;
}

/** What the owner did when a watched thread exited. */
export interface ReclaimEvent {
  threadId: number;
  workerIndex: number | undefined;
  /** Leases (connections + requests) subtracted from the shared counters. */
  leases: number;
  /**
   * Counters the worker died in the middle of updating (between its own
   * record and the shared word), each settled exactly by a double collect
   * over the other threads' records (load/leases.ts). Usually 0.
   */
  settled: number;
  /** Of those, counters whose slot never stood still long enough to settle (then taken as updated; logged). */
  uncertain: number;
  /** Time spent reclaiming, ms. */
  ms: number;
}
