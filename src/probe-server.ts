/**
 * poise-lb/probe-server — the backend side of the `probe` policy: an
 * `http.Server` middleware that counts requests in flight, keeps a latency
 * estimate, answers the probe path and reports both on every response in
 * the `poise-load` header. Loads no package. Explicit named exports only.
 */
export { createProbeServer, type ProbeServer, type ProbeServerOptions, type RequestListener } from './probe-server/middleware.js';
