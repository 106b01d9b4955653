/**
 * poise-lb/net — routed outbound connections (`connect()`, for client pools
 * and drivers) and the inbound TCP proxy behind `poise proxy`. Explicit
 * named exports only; at most 30 names (test/surface.test.ts).
 */
export { connect, isLocalError, type ConnectOptions, type RoutedConnection } from './outbound/connect.js';
export { routedStream, RoutedSocket, type RoutedStreamOptions } from './outbound/routed-stream.js';
export { currentLsn, type LsnClient } from './db/lsn.js';
export { createPgPools, type PgPools, type PgPoolsOptions, type PgPoolLike } from './outbound/pg-pools.js';
export { parsePgConnection, type PgConnection, type PgConnectionConfig, type TargetSessionAttrs } from './outbound/pg-connection.js';
export { reusePortSupported, TcpProxy, type TcpProxyCloseOptions, type TcpProxyOptions, type TcpProxyStats } from './proxy/tcp-proxy.js';
export { CidrBands, fixedBand, type CidrBandsOptions, type ProxyBand, type ProxyBandSelector } from './proxy/admission.js';
export { ProxyCounters } from './proxy/counters.js';
