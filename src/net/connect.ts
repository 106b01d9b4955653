/**
 * connect(): outbound TCP routing. Picks a backend with a Router, opens a
 * socket to it, and ties the connection's life to a connection lease: the
 * backend's active-connection counter holds while the socket is open, the
 * connect time feeds the connect-time PeakEWMA, and a refused or timed-out
 * connect counts as a passive-health failure before the next backend is
 * tried. The socket it returns is an ordinary `net.Socket`, so database
 * drivers take it as their stream (`new pg.Client({ stream: () => socket })`,
 * mysql2's `stream` option).
 */
import net from 'node:net';
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import type { AcquireOptions } from '../runtime/acquire-options.js';
import type { Lease } from '../runtime/lease.js';
import type { Router } from '../runtime/router.js';
import { finiteNumber, integerIn, positiveNumber } from '../core/validate.js';

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
   * The admission band of this connection: the first backend is taken
   * through `router.acquireAsync`, so with an `AdmissionGate` attached the
   * connection waits (or is refused) while the pool's saturation is above
   * the band's ceiling. Retries after a failed connect are not queued again:
   * the connection was admitted once. Default: no admission (immediate acquire).
   */
  admissionPriority?: number;
  /** Longest wait for admission, ms (the gate's default otherwise); only with `admissionPriority`. */
  admissionTimeoutMs?: number;
  /** Monotonic milliseconds for the connect-time sample; default `performance.now`. */
  clock?: () => number;
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
   * The caller releases the lease itself when the socket closes (`'failure'`
   * after a socket error, else `'success'`), so no listener or closure of
   * connect() stays on the socket. Used by TcpProxy to keep idle
   * connections small. @internal
   */
  manualRelease?: boolean;
}

/**
 * Connect errors that are this host's, not the backend's: out of file
 * descriptors (EMFILE, ENFILE), socket buffers or memory (ENOBUFS, ENOMEM),
 * ephemeral ports (EADDRNOTAVAIL). They never count against a backend.
 */
export const LOCAL_ERROR_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM', 'EADDRNOTAVAIL']);

/** True when `err` is a local resource error ({@link LOCAL_ERROR_CODES}). */
export function isLocalError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && LOCAL_ERROR_CODES.has(code);
}

/** A connected socket and the lease that counts it. */
export interface RoutedConnection {
  socket: net.Socket;
  /** Released automatically when the socket closes: `'success'`, or `'failure'` after a socket error. */
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
 * Validates `admissionPriority` and `admissionTimeoutMs` (shared with
 * routedStream): undefined without a band; a timeout without a band is
 * refused, since nothing would wait. @internal
 */
export function checkAdmissionOptions(
  opts: Pick<ConnectOptions, 'admissionPriority' | 'admissionTimeoutMs'>,
): { priority: number; timeoutMs: number | undefined } | undefined {
  const { admissionPriority: priority, admissionTimeoutMs: timeoutMs } = opts;
  if (timeoutMs !== undefined) positiveNumber(timeoutMs, 'options.admissionTimeoutMs');
  if (priority === undefined) {
    if (timeoutMs !== undefined)
      invalidConfig('options.admissionTimeoutMs', 'needs options.admissionPriority (nothing waits without a band)', timeoutMs);
    return undefined;
  }
  return { priority: finiteNumber(priority, 'options.admissionPriority'), timeoutMs };
}

/** The option names {@link connect} accepts. */
const CONNECT_OPTION_KEYS = [
  'key',
  'priority',
  'attempts',
  'connectTimeoutMs',
  'signal',
  'clock',
  'allowHalfOpen',
  'noDelay',
  'createSocket',
  'manualRelease',
  'admissionPriority',
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
  readonly admission: { priority: number; timeoutMs: number | undefined } | undefined;
  readonly create: (opts: net.NetConnectOpts) => net.Socket;
  readonly allowHalfOpen: boolean;
  readonly noDelay: boolean;
  readonly clock: () => number;
  readonly manualRelease: boolean;
  /** The acquire options of an attempt without a key or an exclusion: built once, not per connection. */
  readonly plainAcquire: Readonly<AcquireOptions>;
}

/** Validates every option of {@link connect} but `key` and `signal` (per call); throws `InvalidConfig` naming it. @internal */
export function resolveConnectOptions(opts: Omit<ConnectOptions, 'key' | 'signal'>): ResolvedConnectOptions {
  checkOptionKeys(opts, CONNECT_OPTION_KEYS);
  const { attempts, timeout } = checkConnectOptions(opts);
  const admission = checkAdmissionOptions(opts);
  return {
    attempts,
    timeout,
    priority: opts.priority,
    admission,
    create: opts.createSocket ?? net.connect,
    allowHalfOpen: opts.allowHalfOpen === true,
    noDelay: opts.noDelay === true,
    clock: opts.clock ?? performanceNow,
    manualRelease: opts.manualRelease === true,
    plainAcquire: opts.priority === undefined ? { kind: 'connection' } : { priority: opts.priority, kind: 'connection' },
  };
}

function performanceNow(): number {
  return performance.now();
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
  const { attempts, timeout, clock, create, allowHalfOpen, noDelay } = r;
  // Allocated on the first failed connect only: a connection that gets its first backend pays nothing for it.
  let exclude: Set<string> | undefined;
  let lastError: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    signal?.throwIfAborted();
    let lease: Lease;
    try {
      lease =
        attempt === 1 && admission !== undefined
          ? await router.acquireAsync({
              key,
              priority: { admission: admission.priority, failover: r.priority },
              kind: 'connection',
              signal,
              timeoutMs: admission.timeoutMs,
            })
          : key === undefined && exclude === undefined
            ? router.acquire(r.plainAcquire)
            : router.acquire({ key, priority: r.priority, exclude, kind: 'connection' });
    } catch (err) {
      // Nothing left to try: report the connect error that got us here, if any.
      if (lastError !== undefined && isExhausted(err)) break;
      throw err;
    }
    const started = clock();
    try {
      const socket = await openSocket(create, { host: lease.host, port: lease.port, allowHalfOpen, noDelay }, timeout, signal);
      const connectMs = Math.max(0, clock() - started);
      lease.connected(connectMs);
      if (r.manualRelease) return { socket, lease, connectMs, attempts: attempt };
      let failed = false;
      socket.once('error', () => {
        failed = true;
      });
      socket.once('close', () => lease.release(failed ? 'failure' : 'success'));
      return { socket, lease, connectMs, attempts: attempt };
    } catch (err) {
      if (signal?.aborted) {
        lease.release('cancelled');
        throw err;
      }
      if (isLocalError(err)) {
        // Our own descriptors, buffers or ports ran out: the backend did
        // nothing wrong (no failure, no sample), and another backend would
        // fail the same way.
        lease.release('cancelled');
        throw localExhausted('connect', err);
      }
      lease.release('failure');
      exclude ??= new Set();
      exclude.add(lease.id);
      lastError = err;
    }
  }
  throw noBackendAccepted('connect', exclude?.size ?? 0, lastError);
}

/**
 * Whether an acquire refusal after at least one failed connect means "nothing
 * left to try" (then the connect error is the one to report). @internal
 */
export function isExhausted(err: unknown): boolean {
  return err instanceof PoiseError && (err.code === 'NoEligibleCandidates' || err.code === 'Empty');
}

/** The `CapacityExhausted` error for a local resource error ({@link isLocalError}); no backend is blamed. @internal */
export function localExhausted(what: string, err: unknown): PoiseError {
  return new PoiseError(
    'CapacityExhausted',
    `${what}: local resource exhausted (${(err as { code: string }).code}); no backend was blamed: ${errorText(err)}`,
    {
      cause: err,
    },
  );
}

/** The `NoEligibleCandidates` error after `tried` backends refused, carrying the last connect error. @internal */
export function noBackendAccepted(what: string, tried: number, lastError: unknown): PoiseError {
  return new PoiseError('NoEligibleCandidates', `${what}: no backend accepted a connection (${tried} tried): ${errorText(lastError)}`, {
    cause: lastError,
  });
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function openSocket(
  create: (opts: net.NetConnectOpts) => net.Socket,
  at: { host: string; port: number; allowHalfOpen: boolean; noDelay: boolean },
  timeoutMs: number,
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
    const timer = setTimeout(
      () => fail(Object.assign(new Error(`connect ${at.host}:${at.port} timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' })),
      timeoutMs,
    );
    const onAbort = (): void => fail(signal?.reason ?? new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    function cleanup(): void {
      clearTimeout(timer);
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
