/**
 * connect(): outbound TCP routing. Picks a backend with a Router, opens a
 * socket to it, and ties the connection's life to a connection lease: the
 * backend's active-connection counter holds while the socket is open, the
 * connect time feeds the connect-time PeakEWMA, and a refused or timed-out
 * connect counts as a passive-health failure before the next backend is
 * tried; so does a reset before the backend sent its first byte, while that
 * first byte clears the backend's failures (connection-outcome.ts). The socket it returns is an ordinary `net.Socket`, so database
 * drivers take it as their stream (`new pg.Client({ stream: () => socket })`,
 * mysql2's `stream` option).
 */
import net from 'node:net';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import type { Lease } from '../runtime/lease.js';
import type { Router } from '../runtime/router.js';
import { finiteNumber, integerIn, positiveNumber } from '../core/validate.js';
import { answerOnFirstByte, connectionOutcome } from './connection-outcome.js';
import { dialExtras } from './dial.js';
import { RetryRun, connectTimeout } from './retry-run.js';

/** Options of {@link connect}. */
export interface ConnectOptions {
  /** Affinity key for `rendezvous` / `maglev` routers. */
  key?: string | number;
  /** Only backends of this failover priority. */
  priority?: number;
  /** Backends to try before giving up, each a different one; default 3. */
  attempts?: number;
  /** Per-attempt connect timeout, ms; default 2000. */
  connectTimeoutMs?: number;
  /** Aborts the whole operation (a queued admission rejects with `Cancelled`). */
  signal?: AbortSignal;
  /**
   * The admission band of this connection (its rank, one of the gate's
   * `bands`; larger = more important): the first backend is taken
   * through `router.acquireAsync`, so with an `AdmissionGate` attached the
   * connection waits (or is refused) while the pool's saturation is above
   * the band's ceiling. Retries after a failed connect are not queued again:
   * the connection was admitted once. Default: no admission (immediate acquire).
   */
  band?: number;
  /** Longest wait for admission, ms (the gate's default otherwise); only with `band`. */
  admissionTimeoutMs?: number;
  /** Monotonic milliseconds for the connect-time sample; default the timer source's clock. */
  clock?: () => number;
  /**
   * The clock and timers the per-attempt connect timeout runs on; default the
   * process's (`realTimers`). Inject a paused clock to drive timeouts by hand in tests.
   */
  timers?: TimerSource;
  /**
   * Keep the socket writable after the backend's FIN (`net.connect`'s
   * `allowHalfOpen`); default false. The proxy sets it so a client can still
   * send after the backend finished.
   */
  allowHalfOpen?: boolean;
  /**
   * TCP_NODELAY from the socket's creation (`net.connect`'s `noDelay`), so no
   * `setNoDelay` call follows the connect; default false (Node's default).
   */
  noDelay?: boolean;
  /** Opens the socket; default `net.connect`. A test seam (inject a local error such as EMFILE). */
  createSocket?: (opts: net.NetConnectOpts) => net.Socket;
  /**
   * The caller releases the lease itself when the socket closes (by
   * connection-outcome.ts's rule) and calls `lease.answered()` at the
   * backend's first byte, so no listener or closure of
   * connect() stays on the socket. Used by TcpProxy to keep idle
   * connections small. @internal
   */
  manualRelease?: boolean;
}

export { LOCAL_ERROR_CODES, isLocalError } from './retry-run.js';

/** A connected socket and the lease that counts it. */
export interface RoutedConnection {
  socket: net.Socket;
  /**
   * Released automatically when the socket closes: `'failure'` after a
   * socket error before the backend sent any byte, `'cancelled'` after an
   * error once it had, else `'success'`.
   */
  lease: Lease;
  /** Connect time of the attempt that succeeded, ms. */
  connectMs: number;
  /** Attempts made (1 when the first backend answered). */
  attempts: number;
}

/** Validates `attempts` and `connectTimeoutMs` (shared with TcpProxy, which checks them at construction). @internal */
export function checkConnectOptions(opts: Pick<ConnectOptions, 'attempts' | 'connectTimeoutMs'>): { attempts: number; timeout: number } {
  const attempts = integerIn(opts.attempts ?? 3, 'options.attempts', 1, 100);
  const timeout = positiveNumber(opts.connectTimeoutMs ?? 2000, 'options.connectTimeoutMs');
  return { attempts, timeout };
}

/**
 * Validates `band` and `admissionTimeoutMs` (shared with
 * routedStream): undefined without a band; a timeout without a band is
 * refused, since nothing would wait. @internal
 */
export function checkAdmissionOptions(
  opts: Pick<ConnectOptions, 'band' | 'admissionTimeoutMs'>,
): { band: number; timeoutMs: number | undefined } | undefined {
  const { band, admissionTimeoutMs: timeoutMs } = opts;
  if (timeoutMs !== undefined) positiveNumber(timeoutMs, 'options.admissionTimeoutMs');
  if (band === undefined) {
    if (timeoutMs !== undefined)
      invalidConfig('options.admissionTimeoutMs', 'needs options.band (nothing waits without a band)', timeoutMs);
    return undefined;
  }
  return { band: finiteNumber(band, 'options.band'), timeoutMs };
}

/** The option names {@link connect} accepts. */
const CONNECT_OPTION_KEYS = [
  'key',
  'priority',
  'attempts',
  'connectTimeoutMs',
  'signal',
  'clock',
  'timers',
  'allowHalfOpen',
  'noDelay',
  'createSocket',
  'manualRelease',
  'band',
  'admissionTimeoutMs',
] as const;

/**
 * {@link connect}'s options checked once, with the defaults filled: what a
 * caller that connects for every client (TcpProxy, once per listener)
 * builds once and passes to {@link connectResolved}, so no connection pays
 * for validation. @internal
 */
export interface ResolvedConnectOptions {
  readonly attempts: number;
  readonly timeout: number;
  /** The failover priority (`options.priority`). */
  readonly priority: number | undefined;
  readonly admission: { band: number; timeoutMs: number | undefined } | undefined;
  readonly create: (opts: net.NetConnectOpts) => net.Socket;
  readonly allowHalfOpen: boolean;
  readonly noDelay: boolean;
  readonly timers: TimerSource;
  readonly clock: () => number;
  readonly manualRelease: boolean;
}

/** Validates every option of {@link connect} but `key` and `signal` (per call); throws `InvalidConfig` naming it. @internal */
export function resolveConnectOptions(opts: Omit<ConnectOptions, 'key' | 'signal'>): ResolvedConnectOptions {
  checkOptionKeys(opts, CONNECT_OPTION_KEYS);
  const { attempts, timeout } = checkConnectOptions(opts);
  const admission = checkAdmissionOptions(opts);
  const timers = timersOption(opts.timers);
  if (opts.clock !== undefined && typeof opts.clock !== 'function')
    invalidConfig('options.clock', 'must be a function returning milliseconds', opts.clock);
  return {
    attempts,
    timeout,
    priority: opts.priority,
    admission,
    create: opts.createSocket ?? net.connect,
    allowHalfOpen: opts.allowHalfOpen === true,
    noDelay: opts.noDelay === true,
    timers,
    clock: opts.clock ?? (() => timers.now()),
    manualRelease: opts.manualRelease === true,
  };
}

/**
 * Opens a TCP connection to a backend chosen by `router`, retrying on other
 * backends when a connect fails.
 *
 * @example
 * const { socket } = await connect(router);
 * const client = new pg.Client({ stream: () => socket, user: 'postgres', database: 'test' });
 * await client.connect();
 */
export function connect(router: Router, opts: ConnectOptions = {}): Promise<RoutedConnection> {
  try {
    return connectResolved(router, resolveConnectOptions(opts), opts.key, opts.signal);
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * {@link connect} with its options resolved once ({@link resolveConnectOptions}):
 * the per-call parts are the key, the signal and (for a caller that bands
 * each connection) an admission band replacing the resolved one. @internal
 */
export async function connectResolved(
  router: Router,
  r: ResolvedConnectOptions,
  key: string | number | undefined,
  signal: AbortSignal | undefined,
  admission = r.admission,
): Promise<RoutedConnection> {
  const { timeout, clock, create, allowHalfOpen, noDelay, timers } = r;
  signal?.throwIfAborted();
  const run = new RetryRun('connect', { router, key, priority: r.priority, attempts: r.attempts });
  let next: Lease | Error =
    admission === undefined
      ? run.acquire()
      : await router.acquireAsync({
          key,
          band: admission.band,
          priority: r.priority,
          kind: 'connection',
          signal,
          timeoutMs: admission.timeoutMs,
        });
  for (;;) {
    if (next instanceof Error) throw next;
    const lease = next;
    if (signal?.aborted) {
      lease.release('cancelled');
      signal.throwIfAborted();
    }
    run.started();
    const started = clock();
    try {
      const at = { host: lease.host, port: lease.port, allowHalfOpen, noDelay, ...dialExtras(lease.spec) };
      const socket = await openSocket(create, at, timeout, timers, signal);
      const connectMs = Math.max(0, clock() - started);
      lease.connected(connectMs);
      if (r.manualRelease) return { socket, lease, connectMs, attempts: run.tries };
      answerOnFirstByte(socket, lease);
      let failed = false;
      socket.once('error', () => {
        failed = true;
      });
      // A reset before any byte came back is the backend's failure; after bytes, neither (connection-outcome.ts).
      socket.once('close', () => lease.release(connectionOutcome(failed, socket.bytesRead > 0)));
      return { socket, lease, connectMs, attempts: run.tries };
    } catch (err) {
      if (signal?.aborted) {
        lease.release('cancelled');
        throw err;
      }
      next = run.failed(lease, err);
    }
  }
}

function openSocket(
  create: (opts: net.NetConnectOpts) => net.Socket,
  at: net.NetConnectOpts & { host: string; port: number },
  timeoutMs: number,
  timers: TimerSource,
  signal: AbortSignal | undefined,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    let socket: net.Socket;
    try {
      socket = create(at);
    } catch (err) {
      reject(err);
      return;
    }
    const timer = timers.setTimeout(() => fail(connectTimeout(at.host, at.port, timeoutMs)), timeoutMs);
    const onAbort = (): void => fail(signal?.reason ?? new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    function cleanup(): void {
      timers.clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.off('connect', onConnect);
      socket.off('error', fail);
    }
    function fail(err: unknown): void {
      cleanup();
      socket.destroy();
      reject(err);
    }
    function onConnect(): void {
      cleanup();
      resolve(socket);
    }
    socket.once('connect', onConnect);
    socket.once('error', fail);
  });
}
