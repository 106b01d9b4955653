/**
 * The backends of bench/fleet-tail.ts, in a child process of their own
 * (forked with IPC; several hosts give independent event loops): `servers`
 * loopback HTTP servers, each a queue with `concurrency` service slots whose
 * service time is exponential with mean `serviceMs` × the server's slowdown
 * (timers, not CPU: capacity is modelled, so the figures do not depend on how
 * many cores the machine lends the backends). Each sits behind
 * poise-lb/probe-server (in-flight and latency, the probe path, the
 * `poise-load` header) and also reports ORCA load (`endpoint-load-metrics`:
 * utilization = busy slots ÷ slots, queries/s of the last second), for the
 * ORCA-weighted round robin.
 *
 *   fork('dist/bench/fleet-tail-backend.js', [JSON.stringify({ servers, concurrency, serviceMs })])
 *   → { ports }                                once listening
 *   ← { kind: 'slow', factors: number[] }      set every server's slowdown → { ok: true }
 *   ← { kind: 'stats' }                        → { probes, requests, inflightP99: number[] } (counters since the last stats)
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProbeServer } from '../src/probe-server.js';
import { Rng } from '../src/core/rng.js';

const conf = JSON.parse(process.argv[2] ?? '{}') as { servers: number; concurrency: number; serviceMs: number };
const rng = new Rng();
const factors = new Array<number>(conf.servers).fill(1);

interface Server {
  busy: number;
  queue: Array<() => void>;
  served: number;
  /** Completions in the current and the last whole second (ORCA's qps). */
  window: number;
  lastWindow: number;
  probes: ReturnType<typeof createProbeServer>;
  samples: number[];
}

function exp(mean: number): number {
  return -Math.log(1 - rng.float()) * mean;
}

function serve(i: number): Promise<number> {
  const s: Server = { busy: 0, queue: [], served: 0, window: 0, lastWindow: 0, probes: createProbeServer(), samples: [] };
  servers.push(s);
  const start = (run: () => void): void => {
    s.busy++;
    setTimeout(run, exp(conf.serviceMs * factors[i]!));
  };
  const listener = (_req: http.IncomingMessage, res: http.ServerResponse): void => {
    const run = (): void => {
      s.busy--;
      s.served++;
      s.window++;
      const util = Math.min(1, Math.max(0.01, (s.busy + s.queue.length + 1) / conf.concurrency));
      res.writeHead(200, {
        'endpoint-load-metrics': `TEXT cpu_utilization=${util.toFixed(3)}, rps_fractional=${Math.max(1, s.lastWindow)}`,
      });
      res.end('ok');
      const next = s.queue.shift();
      if (next !== undefined) start(next);
    };
    if (s.busy < conf.concurrency) start(run);
    else s.queue.push(run);
  };
  const server = http.createServer({ keepAliveTimeout: 120_000, requestTimeout: 0 }, s.probes.wrap(listener));
  server.on('connection', (socket) => socket.setNoDelay(true));
  return new Promise((resolve) =>
    server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, () => resolve((server.address() as AddressInfo).port)),
  );
}

const servers: Server[] = [];
const ports: number[] = [];
for (let i = 0; i < conf.servers; i++) ports.push(await serve(i));
let probesBefore = 0;
let servedBefore = 0;
setInterval(() => {
  for (const s of servers) {
    s.lastWindow = s.window;
    s.window = 0;
  }
}, 1000).unref();
setInterval(() => {
  for (const s of servers) s.samples.push(s.probes.inflight);
}, 5).unref();

function p99(xs: number[]): number {
  if (xs.length === 0) return 0;
  const sorted = xs.slice().sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))]!;
}

process.on('message', (m: { kind: 'slow'; factors: number[] } | { kind: 'stats' }) => {
  if (m.kind === 'slow') {
    for (let i = 0; i < factors.length; i++) factors[i] = m.factors[i] ?? 1;
    process.send!({ ok: true });
    return;
  }
  const probes = servers.reduce((a, s) => a + s.probes.probes, 0);
  const served = servers.reduce((a, s) => a + s.served, 0);
  const inflightP99 = servers.map((s) => p99(s.samples));
  for (const s of servers) s.samples = [];
  process.send!({ probes: probes - probesBefore, requests: served - servedBefore, inflightP99 });
  probesBefore = probes;
  servedBefore = served;
});
process.on('disconnect', () => process.exit(0));
process.send!({ ports });
