/**
 * poise-lb/drivers — poise's choice in the drivers' own configuration:
 * ioredis's `scaleReads` (Cluster) and `preferredSlaves` (Sentinel), and a
 * mysql2 `PoolCluster` face. Loads neither ioredis nor mysql2: the caller's
 * driver is handed in. Explicit named exports only; at most 30 names
 * (test/surface.test.ts).
 */
export {
  poiseScaleReads,
  poisePreferredSlaves,
  type PoiseScaleReads,
  type PoisePreferredSlaves,
  type ScaleReadsOptions,
  type SentinelReplica,
  type RedisNodeLike,
  type RedisCommandLike,
  type RedisClusterLike,
} from './outbound/ioredis-scale-reads.js';
export {
  createPoolCluster,
  PoisePoolCluster,
  type PoisePoolNamespace,
  type PoolClusterOptions,
  type PoolClusterSelector,
  type ConnectionOf,
  type MysqlPoolLike,
  type MysqlCoreConnection,
} from './outbound/mysql-pool-cluster.js';
