/**
 * bench/proxy-heap: live V8 heap per idle spliced pair, the proxy in this
 * thread, beside docs/benchmarks.md's RSS figure (which includes V8's pages
 * and young generation). One process holds 4 backends (which keep every
 * socket), the proxy and the clients, so each pair counts four sockets.
 *
 *   node --expose-gc dist/bench/proxy-heap.js floor|poise|bare [N=2000]
 *
 * - floor: accept paused, connect upstream, setNoDelay, resume on connect —
 *   two sockets with nothing on them, not a proxy (Node's own minimum);
 * - poise: TcpProxy (p2c:connections) with its defaults;
 * - bare: bench/proxy-bare's per-connection code (pipe() both ways).
 * 200 warm-up pairs, gc() × 3, then N pairs 100 at a time, gc() × 3; prints
 * (heapUsed after − before) / N and the same for RSS.
 */
import net from 'node:net';
import { Balancer } from '../src/runtime.js';
import { TcpProxy } from '../src/net.js';
import { bareSplice } from './lib/bare-splice.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('proxy-heap: run with node --expose-gc');
const mode = process.argv[2] ?? '';
if (!['floor', 'poise', 'bare'].includes(mode))
  throw new Error(`proxy-heap: mode must be floor, poise or bare, got ${JSON.stringify(mode)}`);
const N = Number(process.argv[3] ?? 2000);
const held: net.Socket[] = [];
const listenOn = (server: net.Server): Promise<number> =>
  new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
const backends = await Promise.all([0, 1, 2, 3].map(() => listenOn(net.createServer((c) => held.push(c)))));
let port: number;
let next = 0;
const upstream = (): net.Socket => {
  const up = net.connect({ host: '127.0.0.1', port: backends[next]!, allowHalfOpen: true });
  next = (next + 1) % backends.length;
  return up;
};
if (mode === 'poise') {
  const b = new Balancer();
  b.update(backends.map((p, i) => ({ id: `b${i}`, address: `127.0.0.1:${p}` })));
  port = (await new TcpProxy({ router: b.router({ policy: 'p2c:connections' }), port: 0, host: '127.0.0.1' }).listen()).port;
} else if (mode === 'floor') {
  port = await listenOn(
    net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (client) => {
      const up = upstream();
      client.setNoDelay(true);
      up.setNoDelay(true);
      up.once('connect', () => client.resume());
    }),
  );
} else {
  port = await listenOn(
    net.createServer({ allowHalfOpen: true }, (client) => {
      bareSplice(client, backends[next]!);
      next = (next + 1) % backends.length;
    }),
  );
}
const clients: net.Socket[] = [];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
async function open(n: number): Promise<void> {
  for (let i = 0; i < n; i += 100)
    await Promise.all(
      Array.from({ length: Math.min(100, n - i) }, () => new Promise<void>((r) => clients.push(net.connect(port, '127.0.0.1', () => r())))),
    );
  while (held.length < clients.length) await sleep(20);
}
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc!();
    await sleep(50);
  }
}
await open(200);
await settle();
const before = process.memoryUsage();
await open(N);
await sleep(300);
await settle();
const after = process.memoryUsage();
console.log(
  `${process.version} ${mode}: heap ${((after.heapUsed - before.heapUsed) / N).toFixed(0)} B per pair, ` +
    `RSS ${((after.rss - before.rss) / N / 1024).toFixed(2)} KB per pair (${N} pairs, 4 sockets each in this process)`,
);
process.exit(0);
