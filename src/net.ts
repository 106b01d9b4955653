/**
 * poise-lb/net — routed outbound connections (`connect()`, for client pools
 * and drivers) and the inbound TCP proxy behind `poise proxy`. Explicit
 * named exports only.
 */
export { connect, type ConnectOptions, type RoutedConnection } from './net/connect.js';
export { TcpProxy, type TcpProxyOptions, type TcpProxyStats } from './net/proxy.js';
