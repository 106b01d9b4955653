/**
 * TcpProxy: inbound routing — `poise proxy`. Accepts TCP connections on a
 * listening address and splices each onto a backend chosen by the Router
 * (through {@link connect}, so connect failures retry on another backend and
 * feed passive health, and every spliced connection holds a connection lease
 * until either side closes).
 *
 * Node 20 has no `reusePort`, so one proxy listens in one thread; the Router
 * still shares the LoadTable with every other router of the Balancer, so a
 * proxy and embedded routers in workers see one another's load.
 */
import net from 'node:net';
import { EventEmitter } from 'node:events';
import { invalidConfig, checkOptionKeys } from '../core/errors.js';
import { defaultLogger, type Logger } from '../log.js';
import type { Router } from '../runtime/router.js';
import { checkConnectOptions, connect } from './connect.js';
import { integerIn, nonNegativeNumber } from '../core/validate.js';

/** Options of {@link TcpProxy}. */
export interface TcpProxyOptions {
  router: Router;
  /** Listen address; default host 127.0.0.1, port 0 (any free port). */
  host?: string;
  port?: number;
  /** Backends tried per inbound connection; default 3. */
  attempts?: number;
  /** Per-attempt upstream connect timeout, ms; default 2000. */
  connectTimeoutMs?: number;
  /** Close a spliced pair idle for this long, ms; default 0 (never). */
  idleTimeoutMs?: number;
  /** Affinity key per inbound socket (for `rendezvous` / `maglev`), e.g. the client address. */
  key?: (socket: net.Socket) => string | number | undefined;
  logger?: Logger;
}

/** Counters of a running proxy. */
export interface TcpProxyStats {
  accepted: number;
  active: number;
  /** Inbound connections closed because no backend accepted. */
  failed: number;
  bytesIn: number;
  bytesOut: number;
}

/**
 * @example
 * const balancer = new Balancer();
 * balancer.update([{ id: 'a', address: '127.0.0.1:7001' }, { id: 'b', address: '127.0.0.1:7002' }]);
 * const proxy = new TcpProxy({ router: balancer.router({ policy: 'p2c:connections' }), port: 6000 });
 * await proxy.listen();
 */
export class TcpProxy extends EventEmitter {
  readonly stats: TcpProxyStats = { accepted: 0, active: 0, failed: 0, bytesIn: 0, bytesOut: 0 };
  private readonly opts: TcpProxyOptions;
  private readonly log: Logger;
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  /** Throws `InvalidConfig` naming a bad option. */
  constructor(opts: TcpProxyOptions) {
    super();
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, ['router', 'host', 'port', 'attempts', 'connectTimeoutMs', 'idleTimeoutMs', 'key', 'logger']);
    if (typeof opts.router !== 'object' || opts.router === null || typeof opts.router.acquire !== 'function') {
      invalidConfig('options.router', 'must be a Router', opts.router);
    }
    if (opts.host !== undefined && (typeof opts.host !== 'string' || opts.host.length === 0)) {
      invalidConfig('options.host', 'must be a non-empty string', opts.host);
    }
    checkConnectOptions(opts);
    if (opts.key !== undefined && typeof opts.key !== 'function') invalidConfig('options.key', 'must be a function of the client socket', opts.key);
    integerIn(opts.port ?? 0, 'options.port', 0, 65535);
    nonNegativeNumber(opts.idleTimeoutMs ?? 0, 'options.idleTimeoutMs');
    this.opts = opts;
    this.log = opts.logger ?? defaultLogger();
    this.server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true }, (client) => this.accept(client));
  }

  /** Starts listening; resolves with the bound address. */
  listen(): Promise<net.AddressInfo> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host: this.opts.host ?? '127.0.0.1', port: this.opts.port ?? 0 }, () => {
        this.server.off('error', reject);
        const address = this.server.address() as net.AddressInfo;
        this.log.info({ address: `${address.address}:${address.port}` }, 'proxy listening');
        resolve(address);
      });
    });
  }

  /** The bound address (after `listen`). */
  address(): net.AddressInfo {
    return this.server.address() as net.AddressInfo;
  }

  /** Stops accepting; with `{ drain: false }` (default) also closes every spliced pair. */
  close(opts: { drain?: boolean } = {}): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      if (opts.drain !== true) for (const s of this.sockets) s.destroy();
    });
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private accept(client: net.Socket): void {
    this.stats.accepted++;
    this.track(client);
    client.on('error', () => client.destroy());
    const key = this.opts.key?.(client);
    const ac = new AbortController();
    const onEarlyClose = (): void => ac.abort(new Error('client closed before the upstream connected'));
    client.once('close', onEarlyClose);
    connect(this.opts.router, {
      key,
      attempts: this.opts.attempts,
      connectTimeoutMs: this.opts.connectTimeoutMs,
      signal: ac.signal,
    }).then(
      ({ socket: upstream, lease }) => {
        client.off('close', onEarlyClose);
        this.track(upstream);
        this.splice(client, upstream, lease.id);
      },
      (err: unknown) => {
        client.off('close', onEarlyClose);
        if (ac.signal.aborted) return;
        this.stats.failed++;
        this.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'proxy: no backend accepted; closing client');
        client.destroy();
        this.emit('failed', err);
      },
    );
  }

  private splice(client: net.Socket, upstream: net.Socket, backend: string): void {
    this.stats.active++;
    let open = 2;
    const closed = (): void => {
      if (--open === 0) {
        this.stats.active--;
        this.emit('closed', backend);
      }
    };
    client.once('close', closed);
    upstream.once('close', closed);
    // An error on either side tears down both; a clean end is half-closed through.
    upstream.on('error', () => {
      upstream.destroy();
      client.destroy();
    });
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('data', (chunk: Buffer) => {
      this.stats.bytesIn += chunk.length;
    });
    upstream.on('data', (chunk: Buffer) => {
      this.stats.bytesOut += chunk.length;
    });
    const idle = this.opts.idleTimeoutMs ?? 0;
    if (idle > 0) {
      client.setTimeout(idle, () => client.destroy());
      upstream.setTimeout(idle, () => upstream.destroy());
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
    this.emit('spliced', backend);
  }
}
