/** Loopback sockets for proxy tests: a server whose sockets `cleanups` destroys, half-open clients, reading one to its FIN, a hello client of an echo server. */
import net from 'node:net';

/**
 * Listens on a free port of `host` (127.0.0.1 unless given) and hands every accepted socket to
 * `onConnection` (an error destroys it); `cleanups` destroys the open ones
 * and closes the server. Resolves with the port.
 */
export async function listenLoopback(
  cleanups: Array<() => unknown>,
  onConnection: (s: net.Socket) => void,
  opts: net.ServerOpts = {},
  host = '127.0.0.1',
): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer(opts, (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
    onConnection(s);
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  );
  return (server.address() as net.AddressInfo).port;
}

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

/** A client of `port` that writes `hello`; `echoed` resolves once `echo:hello` comes back (admitted and spliced to an `echoServer('echo')`). */
export function helloClient(port: number): { echoed: Promise<void>; socket: net.Socket } {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.write('hello');
  const echoed = new Promise<void>((resolve, reject) => {
    socket.once('data', (d) => (d.toString() === 'echo:hello' ? resolve() : reject(new Error(d.toString()))));
    socket.once('error', reject);
  });
  return { echoed, socket };
}

/** Destroys `socket` and resolves once it has closed. */
export function destroyed(socket: net.Socket): Promise<void> {
  return new Promise((r) => (socket.destroyed ? r() : (socket.once('close', () => r()), socket.destroy())));
}
