/**
 * routedStream(): a stream factory for client pools (`pg.Pool`,
 * `mysql2.createPool`, an ioredis `Connector`). A pool opens its connections
 * itself and asks for a stream synchronously, so `connect()` (which returns a
 * promise) cannot sit under it; this factory hands out a {@link RoutedSocket}
 * instead: an ordinary `net.Socket` that starts routing the moment it is
 * created and whose `connect()` ignores the driver's host and port.
 *
 * Routing is the same as `connect()`'s: a connection lease from the Router
 * (its key, priority, exclusions), a per-attempt connect timeout, the connect
 * time fed to the connect-time PeakEWMA, a refused or timed-out connect
 * counted as a passive-health failure and retried on a different backend,
 * and local resource errors (EMFILE, ...) blamed on no backend. The retry
 * reconnects the same socket after its `'close'` (Node's documented way to
 * reuse a `net.Socket`); the failed attempts' `'error'` and `'close'` are
 * not shown to the driver. What the driver sees is one `'connect'` when a
 * backend accepted, or one `'error'` (a `PoiseError`) and `'close'` when
 * none did.
 *
 * The lease lives exactly as long as the socket: released once, on the
 * socket's final `'close'` — `'failure'` if the connected socket saw an
 * error before the backend sent any byte (it accepted, then reset: a
 * connection failure, as Envoy counts it), `'cancelled'` for an error after
 * the backend answered (the stream's, not the backend's health; its first
 * byte already cleared the backend's failures), else `'success'`;
 * `'cancelled'` also when the driver destroys the socket before it
 * connected (its own connect timeout, a pool shutting down).
 *
 * Admission: with `band` the first lease is taken through
 * `router.acquireAsync` (an `AdmissionGate` on the router queues it in that
 * band), as `connect()` does; retries after a failed connect are not queued
 * again. While it waits the driver sees a connecting socket (`connecting`,
 * `readyState` `'opening'`; writes wait for `'connect'`). A driver destroy
 * while it waits aborts the wait (the gate counts it `Cancelled`, no lease
 * is taken); a refusal (`QueueFull`, `QueueTimeout`, `Closed`, ...) reaches
 * the driver as one `'error'` carrying that `PoiseError`, then `'close'`.
 *
 * TLS: drivers upgrade the stream they were given (`pg`'s `ssl`, mysql2's
 * `ssl` call `tls.connect({ socket })` after their protocol's TLS request);
 * that works on a RoutedSocket like on any socket. Bytes a driver writes
 * before `'connect'` are not kept across a retry (none of these drivers
 * write first).
 */
import net from 'node:net';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';
import type { Lease } from '../runtime/lease.js';
import type { Router } from '../runtime/router.js';
import { checkAdmissionOptions, checkConnectOptions, type ConnectOptions } from './connect.js';
import { answerOnFirstByte, connectionOutcome } from './connection-outcome.js';
import { HandBack } from './hand-back.js';
import { dialExtras } from './dial.js';
import { RetryRun, connectTimeout, isLocalError } from './retry-run.js';

/** Options of {@link routedStream}. */
export interface RoutedStreamOptions {
  /** Affinity key for `rendezvous` / `maglev` / `ring-hash` routers: every socket of this factory routes by it. */
  key?: string | number;
  /** Only backends of this failover priority. */
  priority?: number;
  /**
   * Database intent of every socket of this factory (`router.acquire`'s
   * option): `'write'` connects to a primary, `'read'` to a replica within
   * `maxLagMs` (at `minLsn`), else the primary. The bounds apply when a
   * socket connects: a pooled connection stays where it was opened, so give
   * a read pool a short idle timeout / lifetime (docs/guide.md, "Primary and
   * replicas").
   */
  intent?: 'read' | 'write';
  /** A read socket's lag bound, ms; default the router's `maxLagMs`. */
  maxLagMs?: number;
  /** A read socket connects only to a replica that replayed this LSN (`'X/Y'` or a bigint), else the primary. */
  minLsn?: string | bigint;
  /** Backends to try per socket before giving up, each a different one; default 3. */
  attempts?: number;
  /** Per-attempt connect timeout, ms; default 2000. */
  connectTimeoutMs?: number;
  /** The admission band of every socket of this factory (see `connect()`'s option of that name). Default: no admission. */
  band?: ConnectOptions['band'];
  /** Longest wait for admission, ms (the gate's default otherwise); only with `band`. */
  admissionTimeoutMs?: ConnectOptions['admissionTimeoutMs'];
  /**
   * Give idle connections back when this process holds more on a backend
   * than its fleet connection budget share (`FleetConnectionBudget`; a late
   * joiner's slice comes from them): a socket idle for `idleMs` (nothing
   * moved, and the last move was the server's answer) on such a backend is
   * ended, down to the share (outbound/hand-back.ts). Off by default; the pool
   * must handle a server-closed idle connection (pg.Pool: an `'error'`
   * listener).
   */
  handBack?: { idleMs: number };
  /** Monotonic milliseconds for the connect-time sample and the hand-back's idleness; default `performance.now`. */
  clock?: () => number;
}

/** The driver-facing state of a RoutedSocket. */
const IDLE = 0;
/** Waiting for admission (`acquireAsync`); the driver sees a connecting socket. */
const ADMITTING = 5;
/** An attempt is connecting. */
const DIALING = 1;
/** An attempt failed; its error and close are swallowed, then the next lease is dialled. */
const REDIAL = 2;
/** Connected; the lease is held until the final close. */
const UP = 3;
/** Routing ended without a connection (lease already released), or the socket was closed. */
const DONE = 4;
type State = typeof IDLE | typeof ADMITTING | typeof DIALING | typeof REDIAL | typeof UP | typeof DONE;

interface Settings {
  router: Router;
  key: string | number | undefined;
  priority: number | undefined;
  intent: 'read' | 'write' | undefined;
  maxLagMs: number | undefined;
  minLsn: string | bigint | undefined;
  attempts: number;
  timeout: number;
  admission: { band: number; timeoutMs: number | undefined } | undefined;
  clock: () => number;
  handBack: HandBack | undefined;
}

/**
 * A `net.Socket` routed by a Router (see the module comment). Created by the
 * {@link routedStream} factory; it is already connecting when returned.
 */
export class RoutedSocket extends net.Socket {
  readonly #s: Settings;
  /** Clock readings of the last read and write while connected (the hand-back's idleness). @internal */
  lastRead = 0;
  /** See {@link lastRead}. @internal */
  lastWrite = 0;
  #state: State = IDLE;
  #lease: Lease | undefined;
  #next: Lease | undefined;
  readonly #run: RetryRun;
  #started = 0;
  #timer: NodeJS.Timeout | undefined;
  #timeoutError: Error | undefined;
  #failed = false;
  #connected = false;
  #closeSwallowed = false;
  #admission: AbortController | undefined;

  /** @internal Use {@link routedStream}. */
  constructor(settings: Settings) {
    super();
    this.#s = settings;
    this.#run = new RetryRun('routedStream', settings);
    this.#start();
  }

  /** The lease of the connected backend (undefined until `'connect'`, and after routing failed). */
  get lease(): Lease | undefined {
    return this.#connected ? this.#lease : undefined;
  }

  /** The slot of the connected backend (-1 before). @internal */
  get slot(): number {
    return this.#connected ? this.#lease!.slot : -1;
  }

  /** Ends the socket: the hand-back found it idle above the share. @internal */
  handBack(): void {
    this.end();
  }

  /** Notes the read (the hand-back's idleness) and passes it on. @internal */
  // biome-ignore lint/suspicious/noExplicitAny: Readable.push's signature
  override push(chunk: any, encoding?: BufferEncoding): boolean {
    if (#s in this && this.#s.handBack !== undefined && chunk !== null) this.lastRead = this.#s.clock();
    return super.push(chunk, encoding);
  }

  /** Notes the write (the hand-back's idleness) and passes it on. @internal */
  // biome-ignore lint/suspicious/noExplicitAny: net.Socket's write overloads
  override write(...args: any[]): boolean {
    if (#s in this && this.#s.handBack !== undefined) this.lastWrite = this.#s.clock();
    return (super.write as (...a: unknown[]) => boolean)(...args);
  }

  /** Attempts made so far (1 when the first backend answered). */
  get attempts(): number {
    return this.#run.tries;
  }

  /**
   * Ignores the driver's host, port or path: the socket is already routing.
   * A listener is added for `'connect'`; when the socket is already up,
   * `'connect'` is emitted again on the next tick for a driver that called
   * this late (a `pg.Client` created long before its `connect()`).
   */
  // biome-ignore lint/suspicious/noExplicitAny: net.Socket's connect overloads
  override connect(...args: any[]): this {
    const listener = args.find((a) => typeof a === 'function') as (() => void) | undefined;
    if (listener !== undefined) this.once('connect', listener);
    if (this.#state === UP) process.nextTick(() => this.#state === UP && super.emit('connect'));
    return this;
  }

  /**
   * Destroys the socket. Before it connected this cancels the routing (the
   * lease is released as `'cancelled'`); Node's own destroy of a failed
   * attempt is told apart by its error and leads to the next attempt.
   */
  override destroy(error?: Error): this {
    if (this.#state === ADMITTING) {
      // Aborting takes the waiter out of the gate's queue at once (counted
      // `Cancelled`); a lease already granted but not yet seen is released
      // by #admit's handler, which finds the socket DONE.
      this.#state = DONE;
      this.#admission?.abort();
      this.#admission = undefined;
    } else if (this.#state === DIALING) {
      if (this.#isAttemptError(error)) return this.#attemptFailed(error as Error);
      // The driver gave up (its own timeout, a pool ending): nobody to blame.
      this.#clearTimer();
      this.#state = DONE;
      this.#lease?.release('cancelled');
    } else if (this.#state === REDIAL) {
      // Between a failed attempt and the next: the next one never starts.
      this.#next?.release('cancelled');
      this.#next = undefined;
      this.#state = DONE;
      if (this.#closeSwallowed) {
        // The failed attempt's close was hidden: the driver gets its own.
        process.nextTick(() => {
          if (error !== undefined) super.emit('error', error);
          super.emit('close', error !== undefined);
        });
      } else if (error !== undefined) {
        process.nextTick(() => super.emit('error', error));
      }
      return this;
    }
    return super.destroy(error);
  }

  /** Hides the failed attempts' events; counts the connected socket's lease. @internal */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    // net.Socket's constructor may emit before this class's fields exist.
    if (!(#state in this)) return super.emit(event, ...args);
    switch (this.#state) {
      case REDIAL:
        if (event === 'error') return true;
        if (event === 'close') {
          this.#closeSwallowed = true;
          process.nextTick(() => this.#redial());
          return true;
        }
        break;
      case DIALING:
        if (event === 'connect') {
          this.#clearTimer();
          this.#state = UP;
          this.#connected = true;
          this.#lease!.connected(Math.max(0, this.#s.clock() - this.#started));
          answerOnFirstByte(this, this.#lease!);
          if (this.#s.handBack !== undefined) {
            this.lastRead = this.#s.clock();
            this.#s.handBack.add(this);
          }
        }
        break;
      case UP:
        if (event === 'error') this.#failed = true;
        else if (event === 'close') {
          this.#state = DONE;
          // A reset before any byte came back is the backend's failure; after bytes, neither (connection-outcome.ts).
          this.#lease!.release(connectionOutcome(this.#failed, this.bytesRead > 0));
          this.#s.handBack?.delete(this);
        }
        break;
    }
    return super.emit(event, ...args);
  }

  #start(): void {
    if (this.#s.admission !== undefined) {
      this.#admit(this.#s.admission);
      return;
    }
    const lease = this.#run.acquire();
    if (lease instanceof Error) {
      this.#state = DONE;
      // Asynchronously, so the driver has attached its listeners.
      process.nextTick(() => super.destroy(lease));
      return;
    }
    this.#dial(lease);
  }

  /** Waits for the first lease in the gate's queue; the socket reads as connecting meanwhile. */
  #admit(admission: { band: number; timeoutMs: number | undefined }): void {
    const { router, key, priority, intent, maxLagMs, minLsn } = this.#s;
    const abort = new AbortController();
    this.#admission = abort;
    this.#state = ADMITTING;
    // What net.Socket#connect sets first: writes wait for 'connect', readyState is 'opening'.
    (this as { connecting: boolean }).connecting = true;
    router
      .acquireAsync({
        key,
        band: admission.band,
        priority,
        intent,
        maxLagMs,
        minLsn,
        kind: 'connection',
        signal: abort.signal,
        timeoutMs: admission.timeoutMs,
      })
      .then(
        (lease) => {
          this.#admission = undefined;
          // Granted in the same turn the driver destroyed the socket.
          if (this.#state !== ADMITTING) lease.release('cancelled');
          else this.#dial(lease);
        },
        (err: unknown) => {
          this.#admission = undefined;
          if (this.#state !== ADMITTING) return; // our own abort
          this.#state = DONE;
          super.destroy(err as Error);
        },
      );
  }

  #dial(lease: Lease): void {
    this.#state = DIALING;
    this.#lease = lease;
    this.#run.started();
    this.#started = this.#s.clock();
    const timeout = this.#s.timeout;
    this.#timeoutError = undefined;
    this.#timer = setTimeout(() => {
      this.#timeoutError = connectTimeout(lease.host, lease.port, timeout);
      this.destroy(this.#timeoutError);
    }, timeout);
    super.connect({ host: lease.host, port: lease.port, ...dialExtras(lease.spec) });
  }

  #redial(): void {
    this.#closeSwallowed = false;
    const lease = this.#next;
    this.#next = undefined;
    if (lease !== undefined) this.#dial(lease);
  }

  /**
   * Node destroys a socket whose connect failed with an error naming the
   * syscall and the address it tried (connect, lookup), or our timeout does.
   * Anything else is the driver's own destroy.
   */
  #isAttemptError(error: Error | undefined): boolean {
    if (error === undefined) return false;
    if (error === this.#timeoutError) return true;
    // Every address of a multi-address host failed (autoSelectFamily).
    if (error instanceof AggregateError) return true;
    const e = error as { syscall?: unknown; port?: unknown; hostname?: unknown };
    const lease = this.#lease!;
    if (e.syscall === 'connect') return e.port === lease.port || isLocalError(error);
    return (e.syscall === 'getaddrinfo' || e.syscall === 'lookup') && e.hostname === lease.host;
  }

  #attemptFailed(error: Error): this {
    this.#clearTimer();
    const next = this.#run.failed(this.#lease!, error);
    if (next instanceof Error) {
      this.#state = DONE;
      return super.destroy(next);
    }
    this.#next = next;
    this.#state = REDIAL;
    return super.destroy(error);
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * A stream factory for client pools: every call returns a new
 * {@link RoutedSocket}, already connecting to a backend chosen by `router`.
 * Throws `InvalidConfig` naming the option for a bad one (checked once, here).
 *
 * @example
 * const pool = new pg.Pool({ stream: routedStream(router), user: 'postgres', database: 'test', max: 20 });
 * const mysqlPool = mysql.createPool({ stream: routedStream(mysqlRouter), user: 'root' });
 */
export function routedStream(router: Router, opts: RoutedStreamOptions = {}): (driverOptions?: unknown) => RoutedSocket {
  checkOptionKeys(opts, [
    'key',
    'priority',
    'intent',
    'maxLagMs',
    'minLsn',
    'attempts',
    'connectTimeoutMs',
    'band',
    'admissionTimeoutMs',
    'handBack',
    'clock',
  ]);
  if (opts.intent !== undefined && opts.intent !== 'read' && opts.intent !== 'write') {
    invalidConfig('options.intent', 'must be "read" or "write"', opts.intent);
  }
  const { attempts, timeout } = checkConnectOptions(opts);
  const admission = checkAdmissionOptions(opts);
  if (opts.clock !== undefined && typeof opts.clock !== 'function')
    invalidConfig('options.clock', 'must be a function returning milliseconds', opts.clock);
  const clock = opts.clock ?? (() => performance.now());
  let handBack: HandBack | undefined;
  if (opts.handBack !== undefined) {
    if (typeof opts.handBack !== 'object' || opts.handBack === null)
      invalidConfig('options.handBack', 'must be an object { idleMs }', opts.handBack);
    checkOptionKeys(opts.handBack, ['idleMs'], 'options.handBack');
    handBack = new HandBack(router, integerIn(opts.handBack.idleMs, 'options.handBack.idleMs', 1, 3_600_000), clock);
  }
  const settings: Settings = {
    router,
    key: opts.key,
    priority: opts.priority,
    intent: opts.intent,
    maxLagMs: opts.maxLagMs,
    minLsn: opts.minLsn,
    attempts,
    timeout,
    admission,
    clock,
    handBack,
  };
  return () => new RoutedSocket(settings);
}
