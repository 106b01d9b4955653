/** A real TCP echo server on loopback, for tests of what connects to backends. */
import net from 'node:net';
import { afterAll, beforeAll } from 'vitest';

export interface EchoServer {
  readonly server: net.Server;
  readonly port: number;
  /** The connections open on this server now. */
  readonly sockets: Set<net.Socket>;
  /** Connections open now. */
  open(): number;
  /** Connections accepted since the start. */
  accepted(): number;
  /** Destroys every open connection and closes the server. */
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 (a port of the kernel's choice) and answers each chunk with `name:chunk`. */
export async function echoServer(name: string): Promise<EchoServer> {
  let accepted = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
    s.on('data', (d) => s.write(`${name}:${d.toString()}`));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    server,
    port: (server.address() as net.AddressInfo).port,
    sockets,
    open: () => sockets.size,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/**
 * An {@link echoServer} shared by every test of the calling file: started
 * before the first (vitest `beforeAll`), closed after the last. Call at the
 * top level of a test file; read `port` and `sockets` inside tests.
 */
export function fileEchoServer(name: string): EchoServer {
  let server: EchoServer | undefined;
  beforeAll(async () => {
    server = await echoServer(name);
  });
  afterAll(() => server?.close());
  const started = (): EchoServer => {
    if (server === undefined) throw new Error(`echo server ${name} read before beforeAll started it`);
    return server;
  };
  return {
    get server() {
      return started().server;
    },
    get port() {
      return started().port;
    },
    get sockets() {
      return started().sockets;
    },
    open: () => started().open(),
    accepted: () => started().accepted(),
    close: () => started().close(),
  };
}
