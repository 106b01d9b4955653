/**
 * poise-lb/net — routed outbound connections (`connect()`, for client pools
 * and drivers) and the inbound TCP proxy behind `poise proxy`. Explicit
 * named exports only.
 */
export { connect, isLocalError, LOCAL_ERROR_CODES, type ConnectOptions, type RoutedConnection } from './net/connect.js';
export { CidrBands, fixedBand, type CidrBandsOptions, type ProxyBand, type ProxyBandSelector } from './net/proxy-admission.js';
export { reusePortSupported, TcpProxy, type TcpProxyCloseOptions, type TcpProxyOptions, type TcpProxyStats } from './net/proxy.js';
export {
  ProxyCounters,
  ProxyCounter,
  REFUSAL_REASONS,
  DURATION_BUCKETS_SECONDS,
  type ProxyCounterCode,
  type RefusalReason,
} from './net/proxy-counters.js';
export { TERMINATIONS, type ClientKey, type ConnectionOptions, type Termination } from './net/proxy-connection.js';
export { encodeProxyV1, encodeProxyV2, parseProxyHeader, type ProxyEndpoint, type ProxyHeader } from './net/proxy-protocol.js';
export { routedStream, RoutedSocket, type RoutedStreamOptions } from './net/routed-stream.js';
