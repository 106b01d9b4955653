/**
 * Real grpc-js servers on loopback for the poise-lb/grpc tests and the
 * benchmark: one service with a unary `Echo` (answers its server's name
 * after the server's delay, optionally with an ORCA trailer) and a
 * server-streaming `Watch` (one message at once, then holds the stream
 * open until the caller cancels or the server dies). Messages are raw
 * bytes: no codegen, no proto file.
 */
import * as grpc from '@grpc/grpc-js';

const raw = (b: Buffer): Buffer => b;

/** The test service's definition (bytes in, bytes out). */
export const TEST_SERVICE = {
  echo: {
    path: '/poise.test.Test/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
  watch: {
    path: '/poise.test.Test/Watch',
    requestStream: false,
    responseStream: true,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
} satisfies grpc.ServiceDefinition;

/** The generic client of {@link TEST_SERVICE}. */
export const TestClient = grpc.makeGenericClientConstructor(TEST_SERVICE, 'Test') as unknown as new (
  target: string,
  creds: grpc.ChannelCredentials,
  options?: grpc.ChannelOptions,
) => TestClientInstance;

export interface TestClientInstance extends grpc.Client {
  echo(req: Buffer, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res?: Buffer) => void): grpc.ClientUnaryCall;
  watch(req: Buffer, md?: grpc.Metadata): grpc.ClientReadableStream<Buffer>;
}

export interface TestServer {
  readonly name: string;
  readonly address: string;
  /** Unary calls answered. */
  calls: number;
  /** Unary calls received (answered or not yet). */
  received: number;
  /** Streams open now. */
  streams: number;
  /** Reply delay, ms. */
  delayMs: number;
  /** An ORCA report (the trailer's bytes) sent with every unary reply, or undefined. */
  orca: Buffer | undefined;
  /** A status code every unary call fails with, or undefined. */
  failWith: grpc.status | undefined;
  /** When set, `Watch` streams a message every 100 ms after its first and ends (OK) this many ms after its start. */
  streamForMs: number | undefined;
  readonly server: grpc.Server;
  stop(): Promise<void>;
  kill(): void;
}

/** Starts one server on 127.0.0.1 (an OS port). */
export async function startServer(name: string, delayMs = 0): Promise<TestServer> {
  const server = new grpc.Server();
  let killed = false;
  const s: TestServer = {
    name,
    address: '',
    calls: 0,
    received: 0,
    streams: 0,
    delayMs,
    orca: undefined,
    failWith: undefined,
    streamForMs: undefined,
    server,
    stop: () => (killed ? Promise.resolve() : new Promise<void>((resolve) => server.tryShutdown(() => resolve()))),
    kill: () => {
      // As a crashed process: every connection dropped at once, no GOAWAY, no RST_STREAM (forceShutdown
      // would cancel each stream first, and the caller would see CANCELLED, not the lost connection).
      killed = true;
      for (const session of (server as unknown as { sessions: Map<{ destroy(): void }, unknown> }).sessions.keys()) session.destroy();
      server.forceShutdown();
    },
  };
  const reply = Buffer.from(name);
  server.addService(TEST_SERVICE, {
    echo: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      s.received++;
      const answer = (): void => {
        s.calls++;
        const trailer = new grpc.Metadata();
        if (s.orca !== undefined) trailer.set('endpoint-load-metrics-bin', s.orca);
        if (s.failWith !== undefined) cb({ code: s.failWith, details: `${name} fails`, metadata: trailer });
        else cb(null, reply, trailer);
      };
      if (s.delayMs > 0) setTimeout(answer, s.delayMs);
      else setImmediate(answer);
    },
    watch: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      s.streams++;
      call.write(reply);
      let open = true;
      call.on('cancelled', () => {
        if (open) s.streams--;
        open = false;
      });
      if (s.streamForMs === undefined) return;
      const tick = setInterval(() => {
        if (open) call.write(reply);
      }, 100);
      setTimeout(() => {
        clearInterval(tick);
        if (!open) return;
        open = false;
        s.streams--;
        call.end();
      }, s.streamForMs);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  (s as { address: string }).address = `127.0.0.1:${port}`;
  return s;
}

/** Encodes an ORCA load report's double fields (protobuf, by hand): field number → value. */
export function encodeOrca(fields: Record<number, number>, extra: Buffer = Buffer.alloc(0)): Buffer {
  const parts: Buffer[] = [];
  for (const [field, value] of Object.entries(fields)) {
    const b = Buffer.alloc(9);
    b[0] = (Number(field) << 3) | 1;
    b.writeDoubleLE(value, 1);
    parts.push(b);
  }
  parts.push(extra);
  return Buffer.concat(parts);
}

/** One unary call; resolves to the answering server's name, rejects with the ServiceError. */
export function echo(client: TestClientInstance, md = new grpc.Metadata()): Promise<string> {
  return new Promise((resolve, reject) => {
    client.echo(Buffer.alloc(0), md, (err, res) => (err ? reject(err) : resolve(res!.toString())));
  });
}
