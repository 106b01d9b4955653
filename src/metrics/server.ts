/**
 * MetricsServer: `/metrics` (Prometheus text format) and `/healthz` over
 * node:http — what `poise proxy --metrics HOST:PORT` serves.
 */
import type * as Http from 'node:http';
import { http } from '../core/node-http.js';
import type net from 'node:net';
import { Registry } from 'prom-client';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';

/** Options of {@link MetricsServer}. */
export interface MetricsServerOptions {
  /** The registry scraped on `/metrics`. */
  registry: Registry;
  /** Listen address; default host 127.0.0.1, port 0 (any free port). */
  host?: string;
  port?: number;
  /**
   * `/healthz` answers 200 when this returns undefined, else 503 with the
   * returned reason (e.g. "no membership in force"). Default: always ready.
   */
  notReady?: () => string | undefined;
  /**
   * Awaited before each `/metrics` scrape: gathers figures that live in
   * other threads (e.g. every proxy worker's admission gate) so the
   * synchronous collectors read them fresh. A rejection fails the scrape (500).
   */
  beforeScrape?: () => Promise<void>;
}

/**
 * @example
 * const server = new MetricsServer({ registry, port: 9464, notReady: () => (balancer.hasMembership ? undefined : 'no membership') });
 * await server.listen();
 */
export class MetricsServer {
  private readonly server: Http.Server;
  private readonly opts: MetricsServerOptions;

  /** Throws `InvalidConfig` naming a bad option. */
  constructor(opts: MetricsServerOptions) {
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, ['registry', 'host', 'port', 'notReady', 'beforeScrape']);
    if (!(opts.registry instanceof Registry)) invalidConfig('options.registry', 'must be a prom-client Registry', opts.registry);
    if (opts.host !== undefined && (typeof opts.host !== 'string' || opts.host.length === 0))
      invalidConfig('options.host', 'must be a non-empty string', opts.host);
    integerIn(opts.port ?? 0, 'options.port', 0, 65535);
    if (opts.notReady !== undefined && typeof opts.notReady !== 'function')
      invalidConfig('options.notReady', 'must be a function', opts.notReady);
    if (opts.beforeScrape !== undefined && typeof opts.beforeScrape !== 'function')
      invalidConfig('options.beforeScrape', 'must be a function returning a promise', opts.beforeScrape);
    this.opts = opts;
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  /** Starts listening; resolves with the bound address. */
  listen(): Promise<net.AddressInfo> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host: this.opts.host ?? '127.0.0.1', port: this.opts.port ?? 0 }, () => {
        this.server.off('error', reject);
        resolve(this.server.address() as net.AddressInfo);
      });
    });
  }

  /** The bound address (after `listen`). */
  address(): net.AddressInfo {
    return this.server.address() as net.AddressInfo;
  }

  /** Stops listening and closes idle keep-alive connections. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
  }

  private async handle(req: Http.IncomingMessage, res: Http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('method not allowed\n');
      return;
    }
    if (path === '/metrics') {
      try {
        await this.opts.beforeScrape?.();
        const body = await this.opts.registry.metrics();
        res.writeHead(200, { 'content-type': this.opts.registry.contentType }).end(req.method === 'HEAD' ? undefined : body);
      } catch (err) {
        res
          .writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
          .end(`scrape failed: ${err instanceof Error ? err.message : String(err)}\n`);
      }
      return;
    }
    if (path === '/healthz') {
      const reason = this.opts.notReady?.();
      res
        .writeHead(reason === undefined ? 200 : 503, { 'content-type': 'text/plain; charset=utf-8' })
        .end(reason === undefined ? 'ok\n' : `not ready: ${reason}\n`);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found: try /metrics or /healthz\n');
  }
}
