/**
 * One proxied connection: the per-connection data path of {@link TcpProxy}.
 * Given an accepted (paused) client socket, it routes an upstream connection
 * through {@link connect} and splices the two sockets until either side
 * closes. The accept / listen side lives in proxy.ts.
 */
import type net from 'node:net';
import type { Logger } from '../log.js';
import type { Router } from '../runtime/router.js';
import { connect } from './connect.js';

/** The settings a connection reads (validated by TcpProxy). @internal */
export interface ConnectionSettings {
  attempts?: number;
  connectTimeoutMs?: number;
  idleTimeoutMs?: number;
  key?: (socket: net.Socket) => string | number | undefined;
}

/** Counters a connection updates. */
export interface ConnectionStats {
  active: number;
  /** Inbound connections closed because no backend accepted. */
  failed: number;
  bytesIn: number;
  bytesOut: number;
}

/** What a connection needs from the proxy that accepted it. @internal */
export interface ConnectionHost {
  readonly router: Router;
  readonly settings: ConnectionSettings;
  readonly log: Logger;
  readonly stats: ConnectionStats;
  /** Tracks a socket so that closing the proxy can destroy it. */
  track(socket: net.Socket): void;
  /** `'spliced'` / `'closed'` with the backend id, `'failed'` with the error. */
  emit(event: 'spliced' | 'closed' | 'failed', arg: unknown): void;
}

/**
 * Routes `client` (accepted with `pauseOnConnect`, already tracked) to a
 * backend and splices the pair; closes the client when no backend accepts.
 * @internal
 */
export function serveConnection(host: ConnectionHost, client: net.Socket): void {
  client.on('error', () => client.destroy());
  const key = host.settings.key?.(client);
  const ac = new AbortController();
  const onEarlyClose = (): void => ac.abort(new Error('client closed before the upstream connected'));
  client.once('close', onEarlyClose);
  connect(host.router, {
    key,
    attempts: host.settings.attempts,
    connectTimeoutMs: host.settings.connectTimeoutMs,
    signal: ac.signal,
  }).then(
    ({ socket: upstream, lease }) => {
      client.off('close', onEarlyClose);
      host.track(upstream);
      splice(host, client, upstream, lease.id);
    },
    (err: unknown) => {
      client.off('close', onEarlyClose);
      if (ac.signal.aborted) return;
      host.stats.failed++;
      host.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'proxy: no backend accepted; closing client');
      client.destroy();
      host.emit('failed', err);
    },
  );
}

function splice(host: ConnectionHost, client: net.Socket, upstream: net.Socket, backend: string): void {
  const stats = host.stats;
  stats.active++;
  let open = 2;
  const closed = (): void => {
    if (--open === 0) {
      stats.active--;
      host.emit('closed', backend);
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
    stats.bytesIn += chunk.length;
  });
  upstream.on('data', (chunk: Buffer) => {
    stats.bytesOut += chunk.length;
  });
  const idle = host.settings.idleTimeoutMs ?? 0;
  if (idle > 0) {
    client.setTimeout(idle, () => client.destroy());
    upstream.setTimeout(idle, () => upstream.destroy());
  }
  client.pipe(upstream);
  upstream.pipe(client);
  client.resume();
  host.emit('spliced', backend);
}
