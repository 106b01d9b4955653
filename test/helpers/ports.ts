/** Loopback ports for tests. */
import net from 'node:net';

/**
 * A port on 127.0.0.1 that nothing listens on: bound by the kernel's choice,
 * then closed. Somewhere to start a server, or a backend that refuses.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
