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
import {
  CONNECTION_OPTION_KEYS,
  connectionHost,
  freshStats,
  resolveConnectionOptions,
  serveConnection,
  type ConnectionHost,
  type ConnectionOptions,
  type ConnectionStats,
} from './proxy-connection.js';
import { integerIn } from '../core/validate.js';
import { ProxyCounters } from './proxy-counters.js';
import type { ProxyBandSelector } from './proxy-admission.js';

/** Options of {@link TcpProxy}. */
export interface TcpProxyOptions extends ConnectionOptions {
  router: Router;
  /** Admission band of each client (`fixedBand(p)`, `new CidrBands(...)`); needs an `AdmissionGate` on the router. Default: none. */
  admission?: ProxyBandSelector;
  /** Listen address; default host 127.0.0.1, port 0 (any free port). */
  host?: string;
  port?: number;
  logger?: Logger;
  /**
   * Shared counters to count into (metrics read them from any thread);
   * default a fresh one-row {@link ProxyCounters}. A proxy of several
   * workers gives each worker the same counters and its own `worker` row.
   */
  counters?: ProxyCounters;
  /** This proxy's row in `counters`, in [0, counters.workers); default 0. */
  worker?: number;
}

/** Counters of a running proxy. */
export interface TcpProxyStats extends ConnectionStats {
  accepted: number;
}

/**
 * @example
 * const balancer = new Balancer();
 * balancer.update([{ id: 'a', address: '127.0.0.1:7001' }, { id: 'b', address: '127.0.0.1:7002' }]);
 * const proxy = new TcpProxy({ router: balancer.router({ policy: 'p2c:connections' }), port: 6000 });
 * await proxy.listen();
 */
export class TcpProxy extends EventEmitter {
  readonly stats: TcpProxyStats = { accepted: 0, ...freshStats() };
  /** The shared counters this proxy counts into (its row: {@link TcpProxy.worker}). */
  readonly counters: ProxyCounters;
  /** This proxy's row in {@link TcpProxy.counters}. */
  readonly worker: number;
  private readonly opts: TcpProxyOptions;
  private readonly log: Logger;
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly host: ConnectionHost;

  /** Throws `InvalidConfig` naming a bad option. */
  constructor(opts: TcpProxyOptions) {
    super();
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, ['router', 'host', 'port', 'logger', 'admission', 'counters', 'worker', ...CONNECTION_OPTION_KEYS]);
    if (typeof opts.router !== 'object' || opts.router === null || typeof opts.router.acquire !== 'function') {
      invalidConfig('options.router', 'must be a Router', opts.router);
    }
    if (opts.admission !== undefined && typeof opts.admission?.bandOf !== 'function') invalidConfig('options.admission', 'must have a bandOf(address) method', opts.admission);
    if (opts.host !== undefined && (typeof opts.host !== 'string' || opts.host.length === 0)) {
      invalidConfig('options.host', 'must be a non-empty string', opts.host);
    }
    const settings = resolveConnectionOptions(opts);
    integerIn(opts.port ?? 0, 'options.port', 0, 65535);
    if (opts.counters !== undefined && !(opts.counters instanceof ProxyCounters)) invalidConfig('options.counters', 'must be a ProxyCounters', opts.counters);
    this.counters = opts.counters ?? ProxyCounters.create();
    this.worker = this.counters.checkWorker(opts.worker ?? 0, 'options.worker');
    this.opts = opts;
    this.log = opts.logger ?? defaultLogger();
    this.host = connectionHost(settings, {
      router: opts.router,
      admission: opts.admission,
      log: this.log,
      stats: this.stats,
      counters: this.counters,
      worker: this.worker,
      track: (socket) => this.track(socket),
      emit: (event, arg) => this.emit(event, arg),
    });
    this.server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true }, (client) => this.accept(client));
  }

  /** Whether the listener is bound (after `listen`, before `close`). */
  get listening(): boolean {
    return this.server.listening;
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
      this.server.close(() => {
        this.host.warn.flush();
        resolve();
      });
      if (opts.drain !== true) for (const s of this.sockets) s.destroy();
    });
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private accept(client: net.Socket): void {
    this.stats.accepted++;
    this.counters.accepted(this.worker);
    this.track(client);
    serveConnection(this.host, client);
  }
}
