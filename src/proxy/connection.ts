/**
 * One proxied connection: the per-connection data path of {@link TcpProxy}.
 * Given an accepted (paused) client socket it optionally reads a PROXY
 * header, routes an upstream connection through {@link connect}, and splices
 * the two sockets until both directions are finished. The accept / listen /
 * worker side lives in proxy.ts.
 *
 * Along the way it
 * - has TCP_NODELAY on both sockets from their creation (the listener's
 *   `noDelay`, connect()'s `noDelay`): a proxy must not add Nagle delay to
 *   small request–reply turns, and no `setNoDelay` call follows;
 * - reads what a backend sends into buffers of its own (read-buffers.ts:
 *   the thread's shared buffer, copied out, or during bulk a buffer of the
 *   connection's own, lent to a client write still pending), not a 64 KiB
 *   malloc per read;
 * - keeps both sockets half-open: a FIN from either side is passed on as a
 *   FIN and the other direction keeps flowing, byte-exact;
 * - feeds PeakEWMA: the connect time (ConnectTime series) and, per
 *   request–reply turn — client bytes after backend bytes start a new turn —
 *   the time from the turn's first client byte to the first backend byte
 *   (Latency series), while counting the turn as one in-flight request, so
 *   `p2c:latency` and `p2c:requests` see the proxy's traffic;
 * - applies HAProxy-like inactivity timeouts (client, server; connect is
 *   per attempt in connect()) on one shared coarse wheel per proxy;
 * - never blames a backend for this host's resource errors (EMFILE, ...);
 * - rate-limits repeated identical warnings, and writes one access-log
 *   record per connection with HAProxy's two-letter termination state.
 *
 * Listeners are shared module functions (the connection hangs off the
 * socket), so an idle connection costs one object, not a dozen closures.
 * Everything the options decide is resolved once per listener
 * ({@link resolveConnectionOptions}); a connection counts only into the
 * shared {@link ProxyCounters}, and computes a key, a band or an
 * AbortController only when the options ask for one.
 */
import type net from 'node:net';
import { pino } from 'pino';
import { PoiseError, invalidConfig } from '../core/errors.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import { integerIn } from '../core/validate.js';
import { rateLimited, type Logger, type RateLimitedLogger } from '../log.js';
import type { Lease } from '../runtime/lease.js';
import { KEYED_POLICY_NAMES } from '../runtime/policies.js';
import type { Router } from '../runtime/router.js';
import { connectResolved, isLocalError, resolveConnectOptions, type ResolvedConnectOptions } from '../outbound/connect.js';
import { connectionOutcome } from '../outbound/connection-outcome.js';
import { dialExtras } from '../outbound/dial.js';
import { RetryRun } from '../outbound/retry-run.js';
import type { ProxyBandSelector } from './admission.js';
import { encodeProxyV1, encodeProxyV2, parseProxyHeader, plainAddress, V1_MAX, type ProxyEndpoint } from './proxy-protocol.js';
import { ProxyCounter, type ProxyCounters, type RefusalReason } from './counters.js';
import { BULK_READ, giveReadBuffer, handOver, lendReadBuffer, nextReadBuffer, sharedReadBuffer, takeReadBuffer } from './read-buffers.js';
import { TimeoutWheel, type WheelEntry } from './timeout-wheel.js';

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

/** Why a connection ended (the access log's `termination`), with HAProxy's two-letter state. */
export const TERMINATIONS = {
  /** The client finished first (FIN), then the backend: a normal end. */
  'client-close': '--',
  /** The backend finished first, then the client: a normal end. */
  'server-close': '--',
  /** The client reset or failed mid-stream. */
  'client-error': 'CD',
  /** The backend reset or failed mid-stream. */
  'server-error': 'SD',
  'client-timeout': 'cD',
  'server-timeout': 'sD',
  /** Every attempt's connect timed out. */
  'connect-timeout': 'sC',
  /** No backend accepted (refused, unreachable, none eligible). */
  'connect-failed': 'SC',
  /** The client left before a backend connected. */
  'client-abort': 'CC',
  /** This host ran out of a resource (EMFILE, ENFILE, ENOBUFS, ...). */
  'local-error': 'RC',
  /** A malformed PROXY header (accept-proxy). */
  'proxy-header': 'PR',
  /** No complete PROXY header in time. */
  'proxy-header-timeout': 'cR',
  /** Closed by the proxy itself (close() without drain). */
  shutdown: 'KD',
  /** An internal error on this connection's path closed it (and only it). */
  'internal-error': 'PD',
} as const;
/** A termination cause. */
export type Termination = keyof typeof TERMINATIONS;

/** What a connection needs from the proxy that accepted it. @internal */
export interface ConnectionHost {
  readonly router: Router;
  /** `settings.key` when the router's policy hashes a key (rendezvous, maglev, ring-hash); undefined otherwise: no key is computed. */
  readonly key: ConnectionOptions['key'];
  /** The admission band of each client (proxy-admission.ts); undefined: no admission. */
  readonly admission?: ProxyBandSelector | undefined;
  readonly settings: ConnectionSettings;
  readonly log: Logger;
  /** Per-connection warnings, rate-limited (one line, then a count per window). */
  readonly warn: RateLimitedLogger;
  /** The shared counters (metrics) and this proxy's row in them. */
  readonly counters: ProxyCounters;
  readonly worker: number;
  /** Client and server inactivity timers; undefined when both timeouts are 0 and no PROXY header is expected. */
  readonly wheel: TimeoutWheel | undefined;
  /** The clock of a turn's latency: `settings.timers`' when given, else undefined (`performance.now()`, called directly). */
  readonly turnClock: (() => number) | undefined;
  /** Tracks a socket so that closing the proxy can destroy it. */
  track(socket: net.Socket): void;
  /** Forgets a tracked socket once it closed (the connection's own 'close' listeners call it: one listener per socket, not two). */
  untrack(socket: net.Socket): void;
  /** `'spliced'` / `'closed'` with the backend id, `'failed'` with the error. */
  emit(event: 'spliced' | 'closed' | 'failed', arg: unknown): void;
  /** Called once per connection when both of its sockets are closed (frees its `--max-connections` slot). */
  finished(): void;
}

/** Builds a host for {@link serveConnection} (one wheel and one rate limiter per proxy). @internal */
export function connectionHost(
  settings: ConnectionSettings,
  parts: Pick<ConnectionHost, 'router' | 'admission' | 'log' | 'counters' | 'worker' | 'track' | 'untrack' | 'emit' | 'finished'>,
): ConnectionHost {
  const timeouts = [settings.clientTimeoutMs, settings.serverTimeoutMs, settings.acceptProxy ? settings.acceptProxyTimeoutMs : 0].filter(
    (t) => t > 0,
  );
  // A tick of 1/20 of the shortest timeout, within [5 ms, 1 s].
  const wheel =
    timeouts.length === 0
      ? undefined
      : new TimeoutWheel({ tickMs: Math.min(1000, Math.max(5, Math.floor(Math.min(...timeouts) / 20))), timers: settings.timers });
  // A key only matters to a keyed policy: any other never reads it, so no connection computes one.
  const policy = (parts.router as { policyName?: unknown }).policyName;
  const keyed = typeof policy !== 'string' || (KEYED_POLICY_NAMES as readonly string[]).includes(policy);
  const turnClock = settings.timers === undefined ? undefined : () => settings.timers!.now();
  return { ...parts, settings, key: keyed ? settings.key : undefined, wheel, turnClock, warn: rateLimited(parts.log) };
}

/**
 * Serves `client` (accepted with `pauseOnConnect` and `allowHalfOpen`,
 * already tracked): PROXY header if expected, route, splice.
 * @internal
 */
export function serveConnection(host: ConnectionHost, client: net.Socket): void {
  const c = new Connection(host, client);
  try {
    c.start();
  } catch (err) {
    c.crash(err);
  }
}

/** Marks a socket the proxy itself is closing (shutdown), so a connection that ends unspliced counts as `shutdown`. @internal */
export const kCut = Symbol('poise.cut');

const kConn = Symbol('poise.connection');

/** Client bytes read while its backend connects before the client is paused (a socket's default high-water mark). */
const EARLY_MAX_BYTES = 64 * 1024;
type Tagged = net.Socket & { [kConn]?: Connection; [kCut]?: boolean };

// biome-ignore lint/suspicious/noConstEnum: module-private, inlined by tsc into plain numbers on the per-connection path; never exported.
const enum Phase {
  Header,
  Connecting,
  Data,
  Done,
}

function endpoint(address: string | undefined, port: number | undefined): ProxyEndpoint | undefined {
  return address === undefined || port === undefined ? undefined : { address: plainAddress(address), port };
}

function text(e: ProxyEndpoint | undefined): string | undefined {
  if (e === undefined) return undefined;
  return e.address.includes(':') ? `[${e.address}]:${e.port}` : `${e.address}:${e.port}`;
}

/** The metrics reason of a refusal: admission's full queue is the connection limit, its wait and connect timeouts are timeouts. */
function refusalReason(err: unknown, local: boolean, cause: Termination | undefined): RefusalReason {
  if (local) return 'local_error';
  const code = err instanceof PoiseError ? err.code : undefined;
  if (code === 'QueueFull') return 'max_connections';
  if (code === 'QueueTimeout' || cause === 'connect-timeout') return 'timeout';
  return 'no_backend';
}

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

class Connection implements WheelEntry {
  wheelBucket = -1;
  private readonly host: ConnectionHost;
  private readonly client: Tagged;
  private upstream: Tagged | undefined;
  private lease: Lease | undefined;
  private abort: AbortController | undefined;
  private phase = Phase.Header;
  private readonly startedAt = performance.now();
  private wheelStart = 0;
  private connectMs = -1;
  private attempts = 0;
  /** Whether an access log is written (then the connection keeps its own byte totals). */
  private readonly logged: boolean;
  private bytesIn = 0;
  private bytesOut = 0;
  private turns = 0;
  /** performance.now() of the open turn's first client byte, or -1 when no turn is open. */
  private turnAt = -1;
  /** Who sent the last bytes: 0 nobody yet, 1 the client, 2 the backend. */
  private last = 0;
  clientSeen = 0;
  serverSeen = 0;
  private cause: Termination | undefined;
  private firstFin: 'client' | 'server' | undefined;
  private source: ProxyEndpoint | undefined;
  private destination: ProxyEndpoint | undefined;
  private proxied = false;
  private header: Buffer | undefined;
  /**
   * Client bytes read while the backend connects (no admission gate: the
   * client is read from its accept, as a plain Node proxy's pipe does, so
   * its first bytes and the backend's connect are seen in one turn of the
   * event loop instead of two). Replayed in order on the connected
   * backend, which a retry on another backend needs; at most
   * EARLY_MAX_BYTES before the client is paused.
   */
  private early: Buffer[] | undefined;
  /** The connect in progress when it is driven from socket events (no admission band). */
  private attempt: Attempt | undefined;
  private earlyBytes = 0;
  /** The upstream's own read buffer while it moves bulk (read-buffers.ts); undefined: it reads into the thread's shared one. */
  private readBuf: Buffer | undefined;
  /** Own read buffers a client write still points at, given back when the client's write queue is empty. */
  private lent: Buffer[] | undefined;
  private open = 1;
  private upstreamFailed = false;
  /** Whether the backend has sent a byte (then a later upstream error is not its failure). */
  private answered = false;
  /** Counted in one outcome already: refused (any reason) or spliced (then `closed` counts it). */
  private settled = false;
  private crashed = false;
  private released = false;

  constructor(host: ConnectionHost, client: net.Socket) {
    this.host = host;
    this.logged = host.settings.accessLog !== undefined;
    this.client = client as Tagged;
    this.client[kConn] = this;
  }

  start(): void {
    const c = this.client;
    c.on('error', onClientError);
    c.on('close', onClientClose);
    // From the start, not from the splice: a FIN read with the PROXY header
    // emits 'end' while the socket is paused for the connect, and would be lost.
    c.on('end', onClientEnd);
    // The addresses cost two objects and their strings per connection: read
    // them only when something needs them (key, PROXY header, access log);
    // warnings read them on demand (see endpoints()).
    const st = this.host.settings;
    if (st.accessLog !== undefined || st.sendProxy !== undefined || typeof this.host.key === 'string' || this.host.admission !== undefined)
      this.endpoints();
    if (this.host.settings.acceptProxy) {
      // add() first: it restarts a wheel that stood empty, and so its clock, which the stamp then reads.
      this.host.wheel!.add(this);
      this.wheelStart = this.host.wheel!.now;
      c.on('data', onHeaderData);
      c.resume();
      return;
    }
    this.route();
  }

  // --- PROXY header (accept-proxy) ---------------------------------------------

  headerData(chunk: Buffer): void {
    const buf = this.header === undefined ? chunk : Buffer.concat([this.header, chunk]);
    let parsed;
    try {
      parsed = parseProxyHeader(buf, this.host.settings.acceptProxyMaxBytes);
      if (parsed === undefined && buf.length > Math.max(V1_MAX, this.host.settings.acceptProxyMaxBytes)) {
        throw new PoiseError('Corrupt', 'PROXY header: longer than the limit', { field: 'proxy-header' });
      }
    } catch (err) {
      this.settle('bad_header');
      this.cause = 'proxy-header';
      this.host.warn.warn(errText(err), { err: errText(err), peer: this.clientText() }, 'proxy: malformed PROXY header; closing client');
      this.client.destroy();
      return;
    }
    if (parsed === undefined) {
      this.header = buf;
      return;
    }
    this.header = undefined;
    const c = this.client;
    c.off('data', onHeaderData);
    c.pause();
    if (buf.length > parsed.length) c.unshift(buf.subarray(parsed.length));
    if (parsed.source !== undefined) {
      this.endpoints();
      this.proxied = true;
      this.peer = this.source;
      this.source = parsed.source;
      this.destination = parsed.destination;
    }
    this.host.wheel!.remove(this);
    this.route();
  }

  private peer: ProxyEndpoint | undefined;
  private resolved = false;

  /** Reads the client's address pair from the socket once (a PROXY header may replace it later). */
  private endpoints(): void {
    if (this.resolved) return;
    this.resolved = true;
    const c = this.client;
    this.source = endpoint(c.remoteAddress, c.remotePort);
    this.destination = endpoint(c.localAddress, c.localPort);
  }

  /** The client address as text, for a warning. */
  private clientText(): string | undefined {
    this.endpoints();
    return text(this.source);
  }

  // --- routing -----------------------------------------------------------------

  private keyOf(): string | number | undefined {
    const k = this.host.key;
    if (k === undefined) return undefined;
    if (typeof k === 'function') return k(this.client);
    const src = this.source;
    if (src === undefined) return undefined;
    return k === 'client-ip' ? src.address : text(src);
  }

  private route(): void {
    this.phase = Phase.Connecting;
    const s = this.host.settings;
    let key: string | number | undefined;
    try {
      key = this.keyOf();
    } catch (err) {
      this.refuse(err);
      return;
    }
    // A band, and the AbortController that takes a client that leaves out of
    // its admission queue, only with admission configured. Without one, a
    // client that leaves while connecting lets the connect finish (or time
    // out); connected() then closes the upstream and returns its lease.
    const selector = this.host.admission;
    let ac: AbortController | undefined;
    let band: { band: number; timeoutMs: undefined } | undefined;
    if (selector !== undefined) {
      const rank = selector.bandOf(this.source?.address);
      if (rank !== undefined) {
        ac = this.abort = new AbortController();
        band = { band: rank, timeoutMs: undefined };
      }
    } else {
      // Nothing decides on this client before its backend connects: read it now (see `early`).
      const c = this.client;
      c.on('data', onClientData);
      c.resume();
    }
    if (band === undefined && s.connect.admission === undefined) {
      // Nothing to wait for: connect from socket events (see Attempt), no promise per connection.
      const r = s.connect;
      this.attempt = new Attempt(
        this,
        r,
        new RetryRun('connect', { router: this.host.router, key, priority: r.priority, attempts: r.attempts }),
      );
      this.dial(this.attempt.run.acquire());
      return;
    }
    // Both handlers catch everything they could throw: the promise they
    // return never rejects, so no error of this connection reaches the thread.
    connectResolved(this.host.router, s.connect, key, ac?.signal, band).then(
      (routed) => {
        try {
          this.connected(routed.socket, routed.lease, routed.connectMs, routed.attempts);
        } catch (err) {
          this.crash(err);
        }
      },
      (err: unknown) => {
        try {
          // A client already gone is counted by its own close (client_abort, or shutdown when the proxy cut it).
          if (ac?.signal.aborted !== true && !this.client.destroyed) this.refuse(err);
        } catch (e) {
          this.crash(e);
        }
      },
    );
  }

  /**
   * Starts the next attempt of the connect: `next` is the run's next lease,
   * or the error that ends the run (then the client is refused, unless it
   * is already gone: its own close counts it).
   */
  private dial(next: Lease | Error): void {
    const a = this.attempt!;
    const r = this.host.settings.connect;
    for (;;) {
      if (next instanceof Error) {
        this.attempt = undefined;
        if (!this.client.destroyed) this.refuse(next);
        return;
      }
      const lease = next;
      if (this.phase !== Phase.Connecting || this.client.destroyed) {
        // The client left (or the connection crashed) before a backend answered: try no other.
        this.attempt = undefined;
        lease.release('cancelled');
        return;
      }
      a.run.started();
      a.started = r.clock();
      let up: Tagged;
      try {
        const extras = dialExtras(lease.spec);
        const at = { host: lease.host, port: lease.port, allowHalfOpen: r.allowHalfOpen, noDelay: r.noDelay, onread: UPSTREAM_READS };
        up = r.create(extras === undefined ? at : { ...at, ...extras }) as Tagged;
      } catch (err) {
        next = a.run.failed(lease, err);
        continue;
      }
      a.lease = lease;
      a.socket = up;
      up[kConn] = this;
      up.on('connect', onUpstreamConnect);
      up.on('error', onUpstreamConnectError);
      a.arm();
      return;
    }
  }

  /** The attempt's socket connected: its connect time is a sample, and the pair is spliced. */
  upstreamConnect(): void {
    const a = this.attempt!;
    const up = a.socket!;
    const lease = a.lease!;
    const r = this.host.settings.connect;
    this.attempt = undefined;
    a.stop();
    const connectMs = Math.max(0, r.clock() - a.started);
    lease.connected(connectMs);
    this.connected(up, lease, connectMs, a.run.tries, true);
  }

  /** The attempt's connect failed or timed out: its backend is blamed (RetryRun), and the next one is tried. */
  upstreamConnectError(err: unknown): void {
    const a = this.attempt;
    if (a === undefined || a.socket === undefined) return;
    const up = a.socket;
    const lease = a.lease!;
    a.stop();
    up.destroy();
    a.socket = undefined;
    a.lease = undefined;
    this.dial(a.run.failed(lease, err));
  }

  /** Counts this connection's outcome as refused for `reason`, once; later outcomes are not counted. */
  private settle(reason: RefusalReason): void {
    if (this.settled) return;
    this.settled = true;
    this.host.counters.refused(this.host.worker, reason);
  }

  /**
   * An error thrown on this connection's path: it closes this connection
   * alone, counts it (refused `internal_error` unless it was already counted),
   * returns its lease once, and logs one rate-limited line per message.
   * Never throws.
   */
  crash(err: unknown): void {
    if (this.crashed) return;
    this.crashed = true;
    try {
      this.cause ??= 'internal-error';
      this.settle('internal_error');
      const msg = errText(err);
      this.host.warn.warn(`internal\u0000${msg}`, { err: msg }, 'proxy: internal error on a connection; closing it');
      this.abort?.abort(err);
    } catch {
      // Nothing more to report with: the sockets still close below.
    }
    // A connect in progress is dropped with its lease.
    const a = this.attempt;
    if (a !== undefined) {
      this.attempt = undefined;
      a.stop();
      a.socket?.destroy();
      a.lease?.release('cancelled');
    }
    // A lease whose upstream never got its close listener is returned here;
    // otherwise the upstream's close returns it (releaseLease runs once).
    const up = this.upstream;
    if (up !== undefined && up.listenerCount('close') > 0) up.destroy();
    else {
      up?.destroy();
      this.releaseLease('cancelled');
    }
    this.client.destroy();
  }

  /** Returns the lease once, whichever path gets here first. */
  private releaseLease(outcome: 'success' | 'failure' | 'cancelled'): void {
    if (this.released || this.lease === undefined) return;
    this.released = true;
    this.lease.release(outcome);
  }

  private refuse(err: unknown): void {
    const local = err instanceof PoiseError && err.code === 'CapacityExhausted' && isLocalError(err.cause);
    if (local) {
      this.cause = 'local-error';
    } else {
      const cause = err instanceof PoiseError ? (err.cause as { code?: unknown } | undefined) : undefined;
      this.cause = cause?.code === 'ETIMEDOUT' ? 'connect-timeout' : 'connect-failed';
    }
    this.settle(refusalReason(err, local, this.cause));
    const msg = local
      ? 'proxy: local resource exhausted; refusing client (no backend blamed)'
      : 'proxy: no backend accepted; closing client';
    this.host.warn.warn(
      local ? String((err as PoiseError & { cause: { code: string } }).cause.code) : errText(err),
      { err: errText(err), client: this.clientText() },
      msg,
    );
    // A clean refusal: read what the client already sent (so the close is a
    // FIN, not a reset for unread data) and end our side.
    const c = this.client;
    c.off('data', onClientData);
    this.early = undefined;
    c.resume();
    c.destroySoon();
    this.host.emit('failed', err);
  }

  /** `ownReads`: the socket reads through {@link UPSTREAM_READS} (dialled here), not through 'data' events (connect()'s sockets). */
  private connected(socket: net.Socket, lease: Lease, connectMs: number, attempts: number, ownReads = false): void {
    const up = socket as Tagged;
    this.abort = undefined; // the connect is over: nothing left to abort (and one object less per idle connection)
    if (this.phase !== Phase.Connecting || this.client.destroyed) {
      up.destroy();
      lease.release('cancelled');
      return;
    }
    // The PROXY header is built before anything is committed: an address it
    // cannot carry refuses this connection (crash) with the lease returned.
    const s = this.host.settings;
    let header: Buffer | undefined;
    if (s.sendProxy !== undefined && this.source !== undefined && this.destination !== undefined) {
      try {
        header = s.sendProxy === 'v1' ? encodeProxyV1(this.source, this.destination) : encodeProxyV2(this.source, this.destination);
      } catch (err) {
        up.destroy();
        lease.release('cancelled');
        this.crash(err);
        return;
      }
    }
    this.host.track(up);
    this.upstream = up;
    this.lease = lease;
    this.connectMs = connectMs;
    this.attempts = attempts;
    this.phase = Phase.Data;
    this.open++;
    up[kConn] = this;
    if (!ownReads) up.on('data', onServerData);
    up.on('end', onServerEnd);
    up.on('drain', onServerDrain);
    up.on('error', onServerError);
    up.on('close', onServerClose);
    if (header !== undefined) up.write(header);
    const c = this.client;
    if (this.host.admission !== undefined) c.on('data', onClientData); // else it reads since route()
    c.on('drain', onClientDrain);
    const wheel = this.host.wheel;
    if (wheel !== undefined) {
      wheel.add(this); // first: a wheel that stood empty restarts its clock, which the stamps read
      this.clientSeen = this.serverSeen = wheel.now;
    }
    // From here the connection's outcome is `closed` (counted when both sockets are).
    this.settled = true;
    this.host.counters.opened(this.host.worker);
    this.host.emit('spliced', lease.id);
    // What the client sent while we connected, in order, then its FIN if it already finished sending.
    const early = this.early;
    if (early !== undefined) {
      this.early = undefined;
      this.earlyBytes = 0;
      for (const chunk of early) this.clientData(chunk);
    }
    if (this.firstFin === 'client') up.end();
    // Paused by a full upstream (clientData) stays paused until its drain.
    if (!up.writableNeedDrain) c.resume();
  }

  // --- data --------------------------------------------------------------------

  clientData(chunk: Buffer): void {
    if (this.phase !== Phase.Data) {
      // Read while connecting: kept for the backend (a refused or crashed connection has stopped reading).
      if (this.early === undefined) this.early = [chunk];
      else this.early.push(chunk);
      this.earlyBytes += chunk.length;
      if (this.earlyBytes >= EARLY_MAX_BYTES) this.client.pause();
      return;
    }
    // One count per chunk, in the shared counters; the connection's own total only for its access-log record.
    this.host.counters.bytes(this.host.worker, ProxyCounter.BytesIn, chunk.length);
    if (this.logged) this.bytesIn += chunk.length;
    const wheel = this.host.wheel;
    if (wheel !== undefined) this.clientSeen = wheel.now;
    if (this.last !== 1 && this.turnAt < 0) {
      // Client bytes after backend bytes (or the first ones): a new turn.
      this.turnAt = this.host.turnClock?.() ?? performance.now();
      this.turns++;
      this.lease!.beginRequest();
    }
    this.last = 1;
    if (this.upstream!.write(chunk)) {
      if (wheel !== undefined) this.serverSeen = wheel.now;
    } else {
      this.client.pause();
    }
  }

  /**
   * `n` bytes the backend sent, read into `buf` (read-buffers.ts): the
   * thread's shared buffer (copied out at once) or this connection's own
   * (written on as is). Hands over the buffer of the next read.
   */
  serverRead(n: number, buf: Buffer): void {
    if (buf === sharedReadBuffer()) {
      const chunk = Buffer.allocUnsafe(n);
      buf.copy(chunk, 0, 0, n);
      // A bulk transfer: read the next ones into a buffer of its own, without copies.
      if (n >= BULK_READ) this.readBuf = takeReadBuffer();
      this.serverData(chunk);
    } else if (n < BULK_READ) {
      // The bulk is over: copied out like a shared read (a write Node cannot finish
      // at once must not keep 64 KiB for a few bytes — a client's window fills with
      // small replies 16 KiB before its write returns false and pauses this socket),
      // and back to the shared buffer, so an idle connection holds none.
      const chunk = Buffer.allocUnsafe(n);
      buf.copy(chunk, 0, 0, n);
      giveReadBuffer(buf);
      this.readBuf = undefined;
      this.serverData(chunk);
      if (this.client.writableLength === 0) this.giveLent();
    } else {
      this.serverData(buf.subarray(0, n));
      if (this.client.writableLength > 0) {
        // A write still points at `buf` (Node writes the rest later; a write this
        // large returned false and paused this socket): the next read goes elsewhere.
        if (this.lent === undefined) this.lent = [buf];
        else this.lent.push(buf);
        this.readBuf = lendReadBuffer();
      } else {
        this.giveLent();
      }
    }
    handOver(this.readBuf ?? sharedReadBuffer());
  }

  /** Gives back the read buffers lent to client writes: the client's write queue is empty. */
  private giveLent(): void {
    const lent = this.lent;
    if (lent === undefined) return;
    this.lent = undefined;
    for (const b of lent) giveReadBuffer(b);
  }

  serverData(chunk: Buffer): void {
    if (!this.answered) {
      // The backend's first byte: it answered, so its consecutive failures clear (connection-outcome.ts).
      this.answered = true;
      this.lease!.answered();
    }
    this.host.counters.bytes(this.host.worker, ProxyCounter.BytesOut, chunk.length);
    if (this.logged) this.bytesOut += chunk.length;
    const wheel = this.host.wheel;
    if (wheel !== undefined) this.serverSeen = wheel.now;
    if (this.turnAt >= 0) {
      this.lease!.endRequest(Math.max(0, (this.host.turnClock?.() ?? performance.now()) - this.turnAt));
      this.turnAt = -1;
    }
    this.last = 2;
    if (this.client.write(chunk)) {
      if (wheel !== undefined) this.clientSeen = wheel.now;
    } else {
      this.upstream!.pause();
    }
  }

  clientDrain(): void {
    if (this.host.wheel !== undefined) this.clientSeen = this.host.wheel.now;
    if (this.client.writableLength === 0) this.giveLent();
    this.upstream?.resume();
  }

  serverDrain(): void {
    if (this.host.wheel !== undefined) this.serverSeen = this.host.wheel.now;
    this.client.resume();
  }

  clientEnd(): void {
    if (this.phase === Phase.Header) {
      // A FIN before the header is complete: it can never complete.
      this.cause = 'client-abort';
      this.settle('client_abort');
      this.client.destroy();
      return;
    }
    this.firstFin ??= 'client';
    // While connecting there is no upstream yet: connected() passes the FIN on.
    this.upstream?.end();
  }

  serverEnd(): void {
    this.firstFin ??= 'server';
    this.client.end();
  }

  clientError(err: NodeJS.ErrnoException): void {
    this.cause ??= this.phase === Phase.Connecting ? 'client-abort' : 'client-error';
    if (this.host.log.isLevelEnabled('debug'))
      this.host.log.debug({ err: err.message, client: this.clientText() }, 'proxy: client socket error');
    this.client.destroy();
    this.upstream?.destroy();
  }

  serverError(err: NodeJS.ErrnoException): void {
    this.upstreamFailed = true;
    this.cause ??= 'server-error';
    this.host.warn.warn(
      `${this.lease?.id}\u0000${err.code ?? err.message}`,
      { err: err.message, backend: this.lease?.id, address: this.lease?.address },
      'proxy: backend socket error',
    );
    this.upstream!.destroy();
    this.client.destroy();
  }

  clientClose(): void {
    if (this.phase === Phase.Connecting) {
      this.cause ??= 'client-abort';
      this.abort?.abort(new Error('client closed before the upstream connected'));
    }
    // A clean close (both directions finished) leaves the backend to finish
    // its own end; anything else tears it down.
    const c = this.client;
    this.host.untrack(c);
    if (!(c.readableEnded && c.writableFinished)) this.upstream?.destroy();
    this.closed();
  }

  serverClose(): void {
    // connect() left the lease to us (manualRelease): a socket error before
    // the backend's first byte is its failure; after it, neither.
    this.releaseLease(connectionOutcome(this.upstreamFailed, this.answered));
    const u = this.upstream!;
    this.host.untrack(u);
    if (!(u.readableEnded && u.writableFinished)) this.client.destroy();
    this.closed();
  }

  private closed(): void {
    if (--this.open > 0) return;
    const wasData = this.phase === Phase.Data;
    this.phase = Phase.Done;
    this.host.finished();
    this.host.wheel?.remove(this);
    // Both sockets are closed: no read goes into these buffers and no write points at them any more.
    this.giveLent();
    if (this.readBuf !== undefined) {
      giveReadBuffer(this.readBuf);
      this.readBuf = undefined;
    }
    // Ended before a backend was spliced and not refused for a reason of its
    // own: the client left (or the proxy's shutdown cut it).
    if (!this.settled) this.settle(this.client[kCut] === true ? 'shutdown' : 'client_abort');
    if (wasData) {
      const idle = this.cause === 'client-timeout' || this.cause === 'server-timeout';
      this.host.counters.closed(this.host.worker, performance.now() - this.startedAt, idle);
      this.host.emit('closed', this.lease!.id);
    }
    this.logAccess();
  }

  // --- timeouts ------------------------------------------------------------------

  private clientDue(): number {
    const t = this.host.settings.clientTimeoutMs;
    return t > 0 && !this.client.destroyed ? this.clientSeen + t + this.host.wheel!.tickMs : Infinity;
  }

  private serverDue(): number {
    const t = this.host.settings.serverTimeoutMs;
    return t > 0 && this.upstream !== undefined && !this.upstream.destroyed ? this.serverSeen + t + this.host.wheel!.tickMs : Infinity;
  }

  deadline(): number {
    if (this.phase === Phase.Header) return this.wheelStart + this.host.settings.acceptProxyTimeoutMs + this.host.wheel!.tickMs;
    if (this.phase === Phase.Data) return Math.min(this.clientDue(), this.serverDue());
    return Infinity;
  }

  expire(now: number): void {
    // Called from the wheel's timer: contain what it throws like a listener does.
    try {
      this.timedOut(now);
    } catch (err) {
      this.crash(err);
    }
  }

  private timedOut(now: number): void {
    if (this.phase === Phase.Header) {
      this.cause = 'proxy-header-timeout';
      if (!this.settled) {
        this.settled = true;
        this.host.counters.headerTimeout(this.host.worker);
      }
      this.host.warn.warn(
        'proxy-header-timeout',
        { peer: this.clientText(), timeoutMs: this.host.settings.acceptProxyTimeoutMs },
        'proxy: no PROXY header in time; closing client',
      );
      this.client.destroy();
      return;
    }
    if (this.phase !== Phase.Data) return;
    const server = this.clientDue() > now;
    this.cause ??= server ? 'server-timeout' : 'client-timeout';
    // A turn cut off by the server timeout waited at least this long: the sample PeakEWMA must see.
    if (server && this.turnAt >= 0) this.lease!.endRequest(Math.max(0, (this.host.turnClock?.() ?? performance.now()) - this.turnAt));
    this.turnAt = -1;
    this.client.destroy();
    this.upstream?.destroy();
  }

  // --- access log ----------------------------------------------------------------

  private logAccess(): void {
    const log = this.host.settings.accessLog;
    if (log === undefined) return;
    const termination: Termination =
      this.cause ?? (this.firstFin === 'client' ? 'client-close' : this.firstFin === 'server' ? 'server-close' : 'shutdown');
    log.info(
      {
        client: text(this.source),
        ...(this.proxied ? { peer: text(this.peer) } : {}),
        frontend: text(this.destination),
        backend: this.lease?.id ?? null,
        backendAddress: this.lease?.address ?? null,
        bytesIn: this.bytesIn,
        bytesOut: this.bytesOut,
        turns: this.turns,
        attempts: this.attempts,
        connectMs: this.connectMs < 0 ? null : Math.round(this.connectMs * 1000) / 1000,
        durationMs: Math.round((performance.now() - this.startedAt) * 1000) / 1000,
        termination,
        state: TERMINATIONS[termination],
      },
      'connection',
    );
  }
}

/**
 * One connection's connect across backends driven by socket events — the
 * proxy's path when no admission band makes it wait: the policy is
 * RetryRun's, as for connect() and routedStream(); what it saves per
 * connection is connect()'s async function, its per-attempt promise and
 * their closures (one timer callback per connection remains).
 */
class Attempt {
  readonly run: RetryRun;
  socket: Tagged | undefined;
  lease: Lease | undefined;
  started = 0;
  private timer: unknown;
  /** The connect timeout's callback (made once per connection, not per attempt). */
  private readonly timedOut: () => void;
  private readonly conn: Connection;
  private readonly r: ResolvedConnectOptions;

  constructor(conn: Connection, r: ResolvedConnectOptions, run: RetryRun) {
    this.conn = conn;
    this.r = r;
    this.run = run;
    this.timedOut = () => this.expire();
  }

  /** Starts the attempt's connect timeout. */
  arm(): void {
    this.timer = this.r.timers.setTimeout(this.timedOut, this.r.timeout);
  }

  /** Stops listening for the attempt's connect and clears its timer. */
  stop(): void {
    const up = this.socket;
    if (up !== undefined) {
      up.off('connect', onUpstreamConnect);
      up.off('error', onUpstreamConnectError);
    }
    if (this.timer !== undefined) {
      this.r.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private expire(): void {
    this.timer = undefined;
    const lease = this.lease;
    if (lease === undefined) return;
    try {
      this.conn.upstreamConnectError(
        Object.assign(new Error(`connect ${lease.host}:${lease.port} timed out after ${this.r.timeout} ms`), { code: 'ETIMEDOUT' }),
      );
    } catch (err) {
      this.conn.crash(err);
    }
  }
}

function onUpstreamConnect(this: net.Socket): void {
  const c = conn(this);
  try {
    c.upstreamConnect();
  } catch (err) {
    c.crash(err);
  }
}
function onUpstreamConnectError(this: net.Socket, e: NodeJS.ErrnoException): void {
  const c = conn(this);
  try {
    c.upstreamConnectError(e);
  } catch (err) {
    c.crash(err);
  }
}

// Shared listeners: `this` is the socket; the connection hangs off it. Each
// catches what its handler throws and closes that connection alone (crash):
// an error escaping an event listener would take the whole thread down.
function conn(s: net.Socket): Connection {
  return (s as Tagged)[kConn]!;
}
function onHeaderData(this: net.Socket, chunk: Buffer): void {
  const c = conn(this);
  try {
    c.headerData(chunk);
  } catch (err) {
    c.crash(err);
  }
}
function onClientData(this: net.Socket, chunk: Buffer): void {
  const c = conn(this);
  try {
    c.clientData(chunk);
  } catch (err) {
    c.crash(err);
  }
}
function onServerData(this: net.Socket, chunk: Buffer): void {
  const c = conn(this);
  try {
    c.serverData(chunk);
  } catch (err) {
    c.crash(err);
  }
}
/** How a dialled upstream socket reads (read-buffers.ts); the callback runs with the socket as `this`. */
const UPSTREAM_READS: net.OnReadOpts = { buffer: nextReadBuffer, callback: onServerRead };
function onServerRead(this: net.Socket, n: number, buf: Uint8Array): boolean {
  const c = conn(this);
  try {
    c.serverRead(n, buf as Buffer);
  } catch (err) {
    handOver(sharedReadBuffer());
    c.crash(err);
  }
  return true;
}
function onClientDrain(this: net.Socket): void {
  const c = conn(this);
  try {
    c.clientDrain();
  } catch (err) {
    c.crash(err);
  }
}
function onServerDrain(this: net.Socket): void {
  const c = conn(this);
  try {
    c.serverDrain();
  } catch (err) {
    c.crash(err);
  }
}
function onClientEnd(this: net.Socket): void {
  const c = conn(this);
  try {
    c.clientEnd();
  } catch (err) {
    c.crash(err);
  }
}
function onServerEnd(this: net.Socket): void {
  const c = conn(this);
  try {
    c.serverEnd();
  } catch (err) {
    c.crash(err);
  }
}
function onClientError(this: net.Socket, e: NodeJS.ErrnoException): void {
  const c = conn(this);
  try {
    c.clientError(e);
  } catch (err) {
    c.crash(err);
  }
}
function onServerError(this: net.Socket, e: NodeJS.ErrnoException): void {
  const c = conn(this);
  try {
    c.serverError(e);
  } catch (err) {
    c.crash(err);
  }
}
function onClientClose(this: net.Socket): void {
  const c = conn(this);
  try {
    c.clientClose();
  } catch (err) {
    c.crash(err);
  }
}
function onServerClose(this: net.Socket): void {
  const c = conn(this);
  try {
    c.serverClose();
  } catch (err) {
    c.crash(err);
  }
}
