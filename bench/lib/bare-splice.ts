/**
 * The per-connection code of bench/proxy-bare, the bare Node peer: shared
 * with bench/proxy-heap so both measure the same thing. Nothing of poise.
 */
import net from 'node:net';

/**
 * Splices `client` onto a new half-open connection to 127.0.0.1:`port`:
 * `setNoDelay(true)` on both, `pipe()` both ways (a FIN passes on as a FIN,
 * the other direction keeps flowing), an error on either destroys both.
 */
export function bareSplice(client: net.Socket, port: number): void {
  const upstream = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on('error', () => upstream.destroy());
  upstream.on('error', () => client.destroy());
}
