/** Half-open loopback client sockets for proxy tests, and reading one to its FIN. */
import net from 'node:net';

/** Connects a half-open client to host:port; `cleanups` gets its destroy. */
export function dial(cleanups: Array<() => unknown>, port: number, host = '127.0.0.1', localAddress?: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host, localAddress, allowHalfOpen: true });
    s.once('connect', () => resolve(s));
    s.once('error', reject);
    cleanups.push(() => s.destroy());
  });
}

/** Everything `socket` reads until its FIN. */
export function readAll(socket: net.Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.once('end', () => resolve(Buffer.concat(chunks)));
    socket.once('error', reject);
  });
}
