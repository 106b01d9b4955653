/**
 * Loopback HTTP backends that count what they really received (per backend,
 * with each request's method and `x-req` id), for the HTTP dispatcher tests.
 * Each answers through a replaceable `respond` (default: 200 with its id),
 * can hold requests until released, and can be killed mid-run (every open
 * connection reset, the listener closed: later connects are refused).
 */
import http from 'node:http';
import type net from 'node:net';
import type { BackendSpec } from '../../src/core/spec.js';

/** One request as a backend saw it. */
export interface Seen {
  backend: string;
  method: string;
  id: string;
  body: string;
}

export interface HttpBackend {
  readonly id: string;
  readonly port: number;
  readonly server: http.Server;
  /** Requests whose headers (and body) arrived, in order. */
  readonly seen: Seen[];
  /** Answers a request (the body is read first). Replace it to change the backend's behaviour. */
  respond: (req: http.IncomingMessage, res: http.ServerResponse, seen: Seen) => void;
  /** Requests held (not answered) while `hold` is true; {@link release} answers them. */
  hold: boolean;
  readonly held: Array<() => void>;
  /** Answers every held request now (and holds no more). */
  release(): void;
  /** Resets every open connection and stops listening: in-flight requests see a reset, new connects are refused. */
  kill(): Promise<void>;
  close(): Promise<void>;
  spec(): BackendSpec;
}

/** A fleet of `n` backends `h0 .. h{n-1}` and every request any of them saw, in order. */
export interface Fleet {
  readonly backends: HttpBackend[];
  readonly seen: Seen[];
  specs(): BackendSpec[];
  /** Requests each backend saw, by id. */
  counts(): Record<string, number>;
  close(): Promise<void>;
}

function ok(_req: http.IncomingMessage, res: http.ServerResponse, seen: Seen): void {
  res.writeHead(200, { 'content-type': 'text/plain', 'x-backend': seen.backend });
  res.end(seen.backend);
}

export async function httpBackend(id: string, all?: Seen[]): Promise<HttpBackend> {
  const sockets = new Set<net.Socket>();
  const b: HttpBackend = {
    id,
    port: 0,
    server: undefined as unknown as http.Server,
    seen: [],
    respond: ok,
    hold: false,
    held: [],
    release() {
      b.hold = false;
      for (const answer of b.held.splice(0)) answer();
    },
    async kill() {
      const closed = new Promise<void>((r) => b.server.close(() => r()));
      for (const s of sockets) s.resetAndDestroy();
      await closed;
    },
    async close() {
      b.hold = false;
      b.held.length = 0;
      b.server.closeAllConnections();
      await new Promise<void>((r) => b.server.close(() => r()));
    },
    spec: () => ({ id, address: `127.0.0.1:${b.port}` }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => {});
    req.on('end', () => {
      const seen: Seen = {
        backend: id,
        method: req.method ?? '',
        id: String(req.headers['x-req'] ?? ''),
        body: Buffer.concat(chunks).toString(),
      };
      b.seen.push(seen);
      all?.push(seen);
      const answer = (): void => {
        if (!res.destroyed) b.respond(req, res, seen);
      };
      if (b.hold) b.held.push(answer);
      else answer();
    });
  });
  server.keepAliveTimeout = 30_000;
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  (b as { server: http.Server }).server = server;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  (b as { port: number }).port = (server.address() as net.AddressInfo).port;
  return b;
}

export async function fleet(n: number): Promise<Fleet> {
  const seen: Seen[] = [];
  const backends = await Promise.all(Array.from({ length: n }, (_, i) => httpBackend(`h${i}`, seen)));
  return {
    backends,
    seen,
    specs: () => backends.map((b) => b.spec()),
    counts: () => Object.fromEntries(backends.map((b) => [b.id, b.seen.length])),
    close: async () => {
      await Promise.all(backends.map((b) => b.close().catch(() => {})));
    },
  };
}
