/**
 * One proxied connection: the per-connection data path of {@link TcpProxy}.
 * Given an accepted (paused) client socket it optionally reads a PROXY
 * header, routes an upstream connection through {@link connect}, and splices
 * the two sockets until both directions are finished. The accept / listen /
 * worker side lives in listener.ts and tcp-proxy.ts.
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
 * Its neighbours, one idea each: options.ts (the options, resolved once per
 * listener), connection-host.ts (what the proxy gives every connection),
 * dialer.ts (the one dialer, band or not), termination.ts (how a connection
 * ended, refusals classified by error code), connection-events.ts (the
 * socket listeners, shared by every connection: an idle connection costs
 * one object, not a dozen closures). A connection counts only into the
 * shared {@link ProxyCounters}, and computes a key, a band or an
 * AbortController only when the options ask for one.
 *
 * The Connection itself stays one class, above the ~500 lines the house
 * aims for: its handlers (PROXY header, routing, data, half-close, close
 * accounting, timeouts, access log) read and write one per-connection
 * state, and a second object per connection would cost every idle
 * connection; each method is short.
 */
import type net from 'node:net';
import { PoiseError, type PoiseErrorCode } from '../core/errors.js';
import type { Lease } from '../runtime/lease.js';
import { connectionOutcome } from '../outbound/connection-outcome.js';
import { RetryRun } from '../outbound/retry-run.js';
import type { ConnectionHost } from './connection-host.js';
import {
  kConn,
  kCut,
  onClientClose,
  onClientData,
  onClientDrain,
  onClientEnd,
  onClientError,
  onHeaderData,
  onServerClose,
  onServerDrain,
  onServerEnd,
  onServerError,
  UPSTREAM_READS,
  type Tagged,
} from './connection-events.js';
import { ProxyCounter, type RefusalReason } from './counters.js';
import { Dialer, type DialHost } from './dialer.js';
import { encodeProxyV1, encodeProxyV2, parseProxyHeader, plainAddress, V1_MAX, type ProxyEndpoint } from './proxy-protocol.js';
import { BULK_READ, giveReadBuffer, handOver, lendReadBuffer, sharedReadBuffer, takeReadBuffer } from './read-buffers.js';
import { refusalReason, refusalTermination, TERMINATIONS, type Termination } from './termination.js';
import type { WheelEntry } from './timeout-wheel.js';

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

/** Client bytes read while its backend connects before the client is paused (a socket's default high-water mark). */
const EARLY_MAX_BYTES = 64 * 1024;

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

function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** One proxied connection (see the file comment). @internal */
export class Connection implements WheelEntry, DialHost {
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
  /** The connect in progress (dialer.ts), until a backend is spliced or the run ends. */
  private dialer: Dialer | undefined;
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
    const r = this.host.settings.connect;
    let key: string | number | undefined;
    try {
      key = this.keyOf();
    } catch (err) {
      this.refuse(err, err instanceof PoiseError ? err.code : undefined);
      return;
    }
    // A band, and the AbortController that takes a client that leaves out of
    // its admission queue, only with admission configured. With or without
    // one, a client that leaves while connecting cancels the dialer
    // (clientClose): its lease is returned 'cancelled', no backend blamed.
    const selector = this.host.admission;
    const rank = selector?.bandOf(this.source?.address);
    if (selector === undefined) {
      // Nothing decides on this client before its backend connects: read it now (see `early`).
      const c = this.client;
      c.on('data', onClientData);
      c.resume();
    }
    const router = this.host.router;
    const dialer = new Dialer(
      this,
      r,
      new RetryRun('connect', { router, key, priority: r.priority, attempts: r.attempts }),
      UPSTREAM_READS,
    );
    this.dialer = dialer;
    if (rank === undefined) {
      // Nothing to wait for: the first lease now, no promise per connection.
      dialer.dial(dialer.run.acquire());
      return;
    }
    // The first lease through the admission gate (retries are not queued again:
    // the connection was admitted once), then the same dialer. Both handlers
    // catch everything they could throw: the promise never rejects.
    const ac = new AbortController();
    this.abort = ac;
    router.acquireAsync({ key, band: rank, priority: r.priority, kind: 'connection', signal: ac.signal }).then(
      (lease) => {
        try {
          dialer.dial(lease);
        } catch (err) {
          this.crash(err);
        }
      },
      (err: unknown) => {
        try {
          // A client already gone is counted by its own close (client_abort, or shutdown when the proxy cut it).
          if (!ac.signal.aborted && !this.client.destroyed) this.refuse(err, err instanceof PoiseError ? err.code : undefined);
        } catch (e) {
          this.crash(e);
        }
      },
    );
  }

  // --- the dialer's events (DialHost) ------------------------------------------------

  /** @internal */
  wantsBackend(): boolean {
    return this.phase === Phase.Connecting && !this.client.destroyed;
  }

  /** @internal The run ended without a backend: the client is refused, unless it is already gone (its own close counts it). */
  dialFailed(err: Error, reason: PoiseErrorCode | undefined): void {
    // The access log says how many backends were tried before the refusal.
    this.attempts = this.dialer?.run.tries ?? 0;
    this.dialer = undefined;
    if (!this.client.destroyed) this.refuse(err, reason);
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
    const d = this.dialer;
    if (d !== undefined) {
      this.dialer = undefined;
      d.cancel();
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

  /** Refuses the client: no backend was spliced, for `reason` (an error code: termination.ts classifies by it). */
  private refuse(err: unknown, reason: PoiseErrorCode | undefined): void {
    this.cause = refusalTermination(reason);
    this.settle(refusalReason(reason));
    const local = reason === 'LocalResource';
    this.host.warn.warn(
      // A local refusal is rate-limited per system code (EMFILE, ENFILE, ENOBUFS, ...: the run's error's cause).
      local ? `LocalResource\u0000${String((err as { cause?: { code?: unknown } } | null)?.cause?.code)}` : errText(err),
      { err: errText(err), client: this.clientText() },
      local ? 'proxy: local resource exhausted; refusing client (no backend blamed)' : 'proxy: no backend accepted; closing client',
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

  /** @internal A backend accepted (the dialer): the pair is spliced. The socket reads through {@link UPSTREAM_READS}. */
  dialled(socket: net.Socket, lease: Lease, connectMs: number, attempts: number): void {
    const up = socket as Tagged;
    this.dialer = undefined;
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
    // While connecting there is no upstream yet: dialled() passes the FIN on.
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
      // A connect in progress is dropped with its lease ('cancelled'): no backend blamed, no retry spent.
      const d = this.dialer;
      if (d !== undefined) {
        this.dialer = undefined;
        d.cancel();
      }
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
