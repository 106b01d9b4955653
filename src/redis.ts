/**
 * poise-lb/redis — the Redis control plane: a membership source that
 * follows a cluster's snapshots and notices, and the publisher that writes
 * them. The only entry that loads ioredis. Explicit named exports only.
 */
export { RedisMembership, type RedisMembershipOptions, type SnapshotOrigin } from './membership/redis-source.js';
export type { MembershipKeys } from './membership/redis-keys.js';
export type { RedisClientOptions, RedisConnectionOptions } from './membership/redis-target.js';
export { MembershipPublisher, type MembershipPublisherOptions, type StoredMembership } from './membership/redis-publisher.js';
export { FleetRetryBudget, type FleetRetryBudgetOptions, type FleetRetryCounts } from './budget/redis-retry-budget.js';
export {
  FleetConnectionBudget,
  type FleetConnectionBudgetOptions,
  type FleetConnectionShares,
} from './budget/redis-connection-budget.js';
export { FleetWatcher, type FleetWatcherOptions } from './discovery/fleet-watcher.js';
export { FleetMembership } from './discovery/fleet-membership.js';
