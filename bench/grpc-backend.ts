/**
 * bench/grpc's backends, in a process of their own (so the client's CPU per
 * call is the client's): 4 grpc-js servers on loopback with a unary Echo of
 * raw bytes, answering after their delay, each with an ORCA
 * `endpoint-load-metrics-bin` trailer that weighted_round_robin and poise
 * read: rps_fractional = calls answered in the last whole second, and
 * application_utilization = that rate × the delay (Little's law: the mean
 * number of calls in service, as a server with one worker per unit of
 * utilization would report it). So weighted_round_robin's weight, qps /
 * utilization, is 1 / delay: 1000 for a 1 ms server, 100 for the 10 ms one —
 * a sane 10:1, whatever the rate. Before its first whole second a server
 * reports nothing (grpc-js then uses the mean weight). Sends `{ ports }` to
 * its parent.
 *
 *   node dist/bench/grpc-backend.js 1,1,1,10     (delays in ms)
 */
import * as grpc from '@grpc/grpc-js';

const raw = (b: Buffer): Buffer => b;
export const BENCH_SERVICE = {
  echo: {
    path: '/poise.bench.Bench/Echo',
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
} satisfies grpc.ServiceDefinition;

function orca(util: number, qps: number): Buffer {
  const b = Buffer.alloc(18);
  b[0] = (9 << 3) | 1; // application_utilization
  b.writeDoubleLE(util, 1);
  b[9] = (6 << 3) | 1; // rps_fractional
  b.writeDoubleLE(qps, 10);
  return b;
}

async function start(index: number, delayMs: number): Promise<number> {
  const server = new grpc.Server();
  const reply = Buffer.from(String(index));
  let window = 0;
  let lastRate = 0;
  setInterval(() => {
    lastRate = window;
    window = 0;
  }, 1000).unref();
  server.addService(BENCH_SERVICE, {
    echo: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
      setTimeout(() => {
        const trailer = new grpc.Metadata();
        if (lastRate > 0) trailer.set('endpoint-load-metrics-bin', orca((lastRate * delayMs) / 1000, lastRate));
        window++;
        cb(null, reply, trailer);
      }, delayMs);
    },
  });
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
  );
}

if (process.send !== undefined) {
  const delays = (process.argv[2] ?? '1,1,1,10').split(',').map(Number);
  const ports = await Promise.all(delays.map((d, i) => start(i, d)));
  process.send({ ports });
  process.on('disconnect', () => process.exit(0));
}
