/**
 * The per-connection options of {@link TcpProxy} (`attempts`, the connect,
 * client and server timeouts, the affinity key, PROXY protocol in and out,
 * the access log, the timers) and their validation, once per listener: a
 * connection reads only the resolved {@link ConnectionSettings}.
 */
import type net from 'node:net';
import { pino } from 'pino';
import { invalidConfig } from '../core/errors.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import { integerIn } from '../core/validate.js';
import type { Logger } from '../log.js';
import { resolveConnectOptions, type ResolvedConnectOptions } from '../outbound/connect.js';

/** Built-in affinity keys: the client's IP, or IP and port (after `acceptProxy`, the address the header gave). */
export type ClientKey = 'client-ip' | 'client-ip:port';

/** Per-connection options of {@link TcpProxy} (all plain data except a custom `key` function and `accessLog`). */
export interface ConnectionOptions {
  /** Backends tried per inbound connection; default 3. */
  attempts?: number;
  /** Per-attempt upstream connect timeout, ms; default 2000 (HAProxy `timeout connect`). */
  connectTimeoutMs?: number;
  /** Client-side inactivity (nothing read from or written to the client), ms; 0 = none; default 30000 (HAProxy `timeout client`). */
  clientTimeoutMs?: number;
  /** Server-side inactivity (nothing read from or written to the backend), ms; 0 = none; default 30000 (HAProxy `timeout server`). */
  serverTimeoutMs?: number;
  /** Affinity key for `rendezvous` / `maglev`: `'client-ip'`, `'client-ip:port'`, or a function of the client socket. */
  key?: ClientKey | ((socket: net.Socket) => string | number | undefined);
  /** Send a PROXY protocol header (`'v1'` text, `'v2'` binary) to the backend before any client byte. */
  sendProxy?: 'v1' | 'v2';
  /** Expect a PROXY header (v1 or v2) from every client; a malformed or late one closes the connection. */
  acceptProxy?: boolean;
  /** Time allowed for the whole PROXY header, ms; default 5000. */
  acceptProxyTimeoutMs?: number;
  /** Largest v2 header accepted (16-byte fixed part + addresses + TLVs), bytes; default 536. v1 lines are at most 107. */
  acceptProxyMaxBytes?: number;
  /**
   * One info record per finished connection, message `'connection'`: on this
   * pino logger, or `'stdout'` for JSON lines on fd 1 (the form that reaches
   * proxy worker threads, each writing whole lines synchronously).
   */
  accessLog?: Logger | 'stdout';
  /**
   * The clock and timers of the client, server, PROXY-header and connect
   * timeouts, and the clock a request-reply turn's latency is measured on;
   * default the process's (`performance.now()`). Inject a paused clock to
   * drive them by hand in tests (this thread only: a TimerSource cannot
   * reach workers).
   */
  timers?: TimerSource;
}

/** The validated options. @internal */
export interface ConnectionSettings {
  /** connect()'s options, resolved once (half-open, NODELAY, manual release). */
  connect: ResolvedConnectOptions;
  clientTimeoutMs: number;
  serverTimeoutMs: number;
  key: ConnectionOptions['key'];
  sendProxy: 'v1' | 'v2' | undefined;
  acceptProxy: boolean;
  acceptProxyTimeoutMs: number;
  acceptProxyMaxBytes: number;
  accessLog: Logger | undefined;
  /** Undefined: the process's timers (the wheel's unref'd interval, connect()'s default). */
  timers: TimerSource | undefined;
}

/** The option names {@link resolveConnectionOptions} reads. @internal */
export const CONNECTION_OPTION_KEYS = [
  'attempts',
  'connectTimeoutMs',
  'clientTimeoutMs',
  'serverTimeoutMs',
  'key',
  'sendProxy',
  'acceptProxy',
  'acceptProxyTimeoutMs',
  'acceptProxyMaxBytes',
  'accessLog',
  'timers',
] as const;

function msOption(value: unknown, field: string, dflt: number, min: number): number {
  return integerIn(value ?? dflt, field, min, 2_147_483_647, 'milliseconds');
}

/** Validates the per-connection options; throws `InvalidConfig` naming `options.<field>`. @internal */
export function resolveConnectionOptions(opts: ConnectionOptions): ConnectionSettings {
  const connect = resolveConnectOptions({
    attempts: opts.attempts,
    connectTimeoutMs: opts.connectTimeoutMs,
    allowHalfOpen: true,
    noDelay: true,
    manualRelease: true,
    timers: opts.timers,
  });
  const key = opts.key;
  if (key !== undefined && key !== 'client-ip' && key !== 'client-ip:port' && typeof key !== 'function') {
    invalidConfig('options.key', 'must be "client-ip", "client-ip:port" or a function of the client socket', key);
  }
  if (opts.sendProxy !== undefined && opts.sendProxy !== 'v1' && opts.sendProxy !== 'v2')
    invalidConfig('options.sendProxy', 'must be "v1" or "v2"', opts.sendProxy);
  if (opts.acceptProxy !== undefined && typeof opts.acceptProxy !== 'boolean')
    invalidConfig('options.acceptProxy', 'must be a boolean', opts.acceptProxy);
  const maxBytes = integerIn(opts.acceptProxyMaxBytes ?? 536, 'options.acceptProxyMaxBytes', 28, 65_551);
  const log = opts.accessLog === 'stdout' ? pino({ base: null }, pino.destination({ fd: 1, sync: true })) : opts.accessLog;
  if (log !== undefined && (typeof log !== 'object' || log === null || typeof log.info !== 'function'))
    invalidConfig('options.accessLog', 'must be a pino logger or "stdout"', log);
  return {
    connect,
    clientTimeoutMs: msOption(opts.clientTimeoutMs, 'options.clientTimeoutMs', 30_000, 0),
    serverTimeoutMs: msOption(opts.serverTimeoutMs, 'options.serverTimeoutMs', 30_000, 0),
    key,
    sendProxy: opts.sendProxy,
    acceptProxy: opts.acceptProxy === true,
    acceptProxyTimeoutMs: msOption(opts.acceptProxyTimeoutMs, 'options.acceptProxyTimeoutMs', 5000, 1),
    acceptProxyMaxBytes: maxBytes,
    accessLog: log,
    timers: opts.timers === undefined ? undefined : timersOption(opts.timers),
  };
}
