/**
 * One source of stats: a proxy's figures are its shared ProxyCounters,
 * read in any thread without asking the workers. After 5,000 connections
 * through 2 worker threads (one on Node < 22.12, which has no reusePort) —
 * clean closes, clients that reset mid-stream, backends that reset
 * mid-stream — the counters equal what the backends and clients saw, byte
 * for byte, read in the owner and in a thread of their own.
 */
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Balancer } from '../../dist/src/runtime.js';
import { TcpProxy, type TcpProxyStats } from '../../dist/src/net.js';
import { ProxyCounter } from '../../dist/src/proxy/counters.js';
import { countingBackend, type CountingBackend } from '../helpers/counting-backend.js';
import { until } from '../helpers/until.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A byte the bodies never contain: the backend resets the connection when it reads it. */
const RESET = 0x21; // '!'

/** An echo backend that resets (RST) a connection on reading `!`; it counts every byte it received. */
async function backend(): Promise<CountingBackend> {
  const b = await countingBackend((s, d) => {
    if (d.includes(RESET)) s.resetAndDestroy();
    else s.write(d);
  });
  cleanup.push(() => b.close());
  return b;
}

/** A seeded xorshift32: the same 5,000 body sizes every run. */
function sizes(n: number, seed: number): number[] {
  let x = seed;
  return Array.from({ length: n }, () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return 1 + ((x >>> 0) % 16384);
  });
}

type Ending = 'clean' | 'client-reset' | 'server-reset';

/**
 * One client: sends `size` letters and reads the whole echo, then ends it
 * the `ending` way. Resolves with the bytes it sent and received once its
 * socket closed.
 */
function client(port: number, size: number, ending: Ending): Promise<{ sent: number; received: number }> {
  return new Promise((resolve, reject) => {
    const body = Buffer.alloc(size, 0x61 + (size % 26));
    let sent = size;
    let received = 0;
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => {
      if (ending === 'clean') s.end(body);
      else s.write(body);
    });
    s.on('data', (d: Buffer) => {
      received += d.length;
      if (received !== size || ending === 'clean') return;
      // The whole echo is here: reset from this side, or ask the backend to.
      if (ending === 'client-reset') s.resetAndDestroy();
      else {
        s.write(Buffer.of(RESET));
        sent++;
      }
    });
    s.on('end', () => s.end());
    // A reset reaches the client as ECONNRESET (or a plain close): either way it is over.
    s.on('error', (err: NodeJS.ErrnoException) => {
      if (ending === 'clean') reject(err);
    });
    s.on('close', () => resolve({ sent, received }));
  });
}

describe('proxy stats: one source, the shared counters', () => {
  it('after 5,000 connections (a tenth reset by the client, a tenth by the backend, mid-stream) through 2 workers, the counters equal what backends and clients saw', async () => {
    const backs = await Promise.all([0, 1].map(() => backend()));
    const bal = new Balancer();
    bal.update(backs.map((b, i) => ({ id: `b${i}`, address: `127.0.0.1:${b.port}` })));
    cleanup.push(() => bal.close());
    const proxy = new TcpProxy({ balancer: bal, workers: 2, policy: 'p2c:connections' });
    const { port } = await proxy.listen();
    cleanup.push(async () => void (await proxy.close()));

    const n = 5000;
    const plan = sizes(n, 0x2545f491);
    const ending = (i: number): Ending => (i % 10 === 3 ? 'client-reset' : i % 10 === 7 ? 'server-reset' : 'clean');
    let sent = 0;
    let received = 0;
    let next = 0;
    // 64 clients at a time.
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (next < n) {
          const i = next++;
          const r = await client(port, plan[i]!, ending(i));
          // Every client got its whole echo before it (or the backend) ended the connection.
          expect(r.received).toBe(plan[i]);
          sent += r.sent;
          received += r.received;
        }
      }),
    );
    // The proxy counts a connection closed once both of its sockets are: after the client saw its close.
    await until(() => proxy.counters.open() === 0, 'every connection counted closed');

    const bodies = plan.reduce((a, b) => a + b, 0);
    const resets = Array.from({ length: n }, (_, i) => ending(i)).filter((e) => e === 'server-reset').length;
    expect(resets).toBe(500);
    expect(received).toBe(bodies);
    expect(sent).toBe(bodies + resets);
    // What the backends saw: every connection, every byte the clients sent.
    expect(backs.reduce((a, b) => a + b.accepted, 0)).toBe(n);
    expect(backs.reduce((a, b) => a + b.bytes, 0)).toBe(sent);

    const expected: TcpProxyStats = {
      accepted: n,
      held: 0,
      active: 0,
      failed: 0,
      localErrors: 0,
      timeouts: 0,
      badHeaders: 0,
      bytesIn: sent,
      bytesOut: received,
    };
    const { total, threads } = await proxy.collectStats();
    expect(total).toEqual(expected);
    expect(proxy.stats).toEqual(expected);
    expect(threads).toHaveLength(proxy.threads);
    const sum = (k: keyof TcpProxyStats): number => threads.reduce((a, t) => a + t[k], 0);
    for (const k of Object.keys(expected) as (keyof TcpProxyStats)[]) expect(sum(k), k).toBe(expected[k]);
    // With reusePort (Node >= 22.12) the kernel spread the clients over both threads.
    if (proxy.threads === 2) for (const t of threads) expect(t.accepted).toBeGreaterThan(0);
    // Every connection ended in exactly one outcome: closed after its splice, none refused or lost.
    for (let w = 0; w < proxy.threads; w++) expect(proxy.counters.refusedCount(w)).toBe(0);
    expect(proxy.counters.total(ProxyCounter.WorkerLost)).toBe(0);
    expect(proxy.counters.durationBuckets().reduce((a, b) => a + b, 0)).toBe(n);

    // The same figures from a thread of their own, with no message to the proxy or its workers.
    const seen = await new Promise<{ total: TcpProxyStats; threads: TcpProxyStats[]; open: number }>((resolve, reject) => {
      const w = new Worker(new URL('../fixtures/proxy-stats-reader.mjs', import.meta.url), {
        workerData: { buffer: proxy.counters.buffer, first: proxy.worker, rows: proxy.threads },
      });
      w.once('message', resolve);
      w.once('error', reject);
    });
    expect(seen.total).toEqual(expected);
    expect(seen.threads).toEqual(threads);
    expect(seen.open).toBe(0);
  });
});
