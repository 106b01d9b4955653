/** Loopback ports for tests. */
import net from 'node:net';

/** Ports this process has handed out: the kernel may give a port just released again at once. */
const handedOut = new Set<number>();

/**
 * A port on 127.0.0.1 that nothing listens on: bound by the kernel's choice,
 * then closed. Somewhere to start a server, or a backend that refuses. Never
 * one this process was given before (two `freePort()` calls in a row could
 * otherwise return the same port: a CI run saw a proxy's --listen and
 * --metrics collide).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const { port } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(port));
      });
    });
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}
