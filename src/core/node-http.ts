/**
 * `node:http`, loaded through `require` rather than an ESM import. An ESM
 * import of a builtin builds its module namespace, which reads every export;
 * on Node 24 that includes `node:http`'s lazy getters (`WebSocket`,
 * `CloseEvent`, ...), which load Node's bundled undici. Measured on Node
 * 24.21, per isolate: an ESM import of `node:http` adds 2.9 MB of heap and
 * 18 MB of RSS, `require('node:http')` 0.5 MB and 4 MB. Node 20 loads no
 * undici either way. Every module of poise that speaks HTTP (the metrics
 * server, the HTTP health probe, ORCA polling) takes it from here.
 * @internal
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';

/** The `node:http` module. @internal */
export const http: typeof Http = createRequire(import.meta.url)('node:http') as typeof Http;
