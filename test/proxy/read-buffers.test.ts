/**
 * What a backend sends is read into the proxy's own buffers
 * (src/proxy/read-buffers.ts): the thread's shared buffer, copied out at once,
 * or a buffer of the connection's own during bulk transfers, written on
 * without a copy and lent to a client write Node could not finish at once.
 * The hazard is a read landing in a buffer a pending write still points at;
 * these tests drive many connections through one thread with slow clients,
 * bulk and small replies interleaved, and compare every byte.
 */
import { createHash, randomFillSync } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  BULK_READ,
  FREE_MAX,
  READ_SIZE,
  giveReadBuffer,
  handOver,
  nextReadBuffer,
  readBufferStats,
  sharedReadBuffer,
  takeReadBuffer,
} from '../../src/proxy/read-buffers.js';
import { listenLoopback } from '../helpers/loopback.js';
import { loopbackBalancer, proxyOn } from '../helpers/proxy-on.js';
import { until } from '../helpers/until.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** xorshift32: the same script for the same seed. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/**
 * A backend whose every connection sends a stream scripted by a seed it
 * picks (the first 4 bytes): `rounds` of a bulk burst (12 MiB in the first
 * round — more than the kernel buffers between it and a client that reads
 * nothing, about 4 MiB each way, hold — 16 KiB to 600 KiB after it, in writes of 1 byte to 64 KiB, back to
 * back) then 300 small writes (10 to 3,000 bytes, one per event-loop turn:
 * mostly a read each), then FIN. Records the sha256 of each stream by seed,
 * and counts the connections whose writes wait for 'drain' right now
 * (`blocked()`: the proxy stopped reading them).
 */
async function scriptedBackend(rounds: number): Promise<{ port: number; sent: Map<number, string>; blocked: () => number }> {
  const sent = new Map<number, string>();
  let seeds = 1;
  let blocked = 0;
  const port = await listenLoopback(
    cleanups,
    (s) => {
      const seed = seeds++ * 7919;
      const r = rng(seed);
      const hash = createHash('sha256');
      const out = async (chunk: Buffer): Promise<void> => {
        hash.update(chunk);
        if (s.write(chunk)) return;
        blocked++;
        await new Promise<void>((res) => s.once('drain', () => res()));
        blocked--;
      };
      void (async () => {
        const head = Buffer.alloc(4);
        head.writeUInt32BE(seed);
        await out(head);
        for (let round = 0; round < rounds; round++) {
          for (let left = round === 0 ? 12 * 1024 * 1024 : 16 * 1024 + Math.floor(r() * 600 * 1024); left > 0; ) {
            const n = Math.min(left, 1 + Math.floor(r() * 64 * 1024));
            left -= n;
            await out(randomFillSync(Buffer.allocUnsafe(n)));
          }
          for (let i = 0; i < 300; i++) {
            await out(randomFillSync(Buffer.allocUnsafe(10 + Math.floor(r() * 2990))));
            await new Promise((res) => setImmediate(res));
          }
        }
        sent.set(seed, hash.digest('hex'));
        s.end();
      })().catch(() => s.destroy());
    },
    { noDelay: true },
  );
  return { port, sent, blocked: () => blocked };
}

/**
 * Reads a whole stream through the proxy from when `start` resolves,
 * stalling 20–120 ms after one chunk in 20: the kernel's buffers towards it
 * fill, so the proxy's writes to it pend while more replies arrive.
 * Resolves with its seed and sha256.
 */
function slowClient(port: number, seed: number, start: Promise<void>): Promise<{ seed: number; hash: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const r = rng(seed);
    const hash = createHash('sha256');
    let head = Buffer.alloc(0);
    let bytes = 0;
    const s = net.connect({ port, host: '127.0.0.1' });
    cleanups.push(() => s.destroy());
    s.on('error', reject);
    s.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
      if (head.length < 4) head = Buffer.concat([head, chunk.subarray(0, 4 - head.length)]);
      if (r() < 0.05) {
        s.pause();
        setTimeout(() => s.resume(), 20 + Math.floor(r() * 100));
      }
    });
    s.on('end', () => {
      s.end();
      resolve({ seed: head.readUInt32BE(0), hash: hash.digest('hex'), bytes });
    });
    s.pause();
    void start.then(
      () => s.resume(),
      () => s.resume(),
    );
  });
}

describe('upstream reads into the proxy’s own buffers', () => {
  it('8 stalling clients of one thread, 3 runs, bulk bursts and small replies interleaved: every byte in order, every own buffer given back once, at most 3 out per connection', async () => {
    const CLIENTS = 8;
    // One run hits a read into the shared buffer behind a pending write a few times: three runs, so a copy left out shows.
    for (let run = 0; run < 3; run++) {
      const { port: backendPort, sent, blocked } = await scriptedBackend(6);
      const balancer = loopbackBalancer(cleanups, [{ id: 'b', port: backendPort }]);
      const { proxy, port } = await proxyOn(cleanups, balancer.router());
      const before = readBufferStats();
      let peak = 0;
      const sampler = setInterval(() => {
        peak = Math.max(peak, readBufferStats().out - before.out);
      }, 1);
      cleanups.push(() => clearInterval(sampler));
      // The clients read nothing until the proxy stopped reading every backend:
      // the kernel's buffers towards each client are full and its writes pend.
      const full = until(() => blocked() === CLIENTS, 'every backend connection blocked by the proxy', 20_000, 5);
      const clients = Array.from({ length: CLIENTS }, (_, i) => slowClient(port, 1000 * run + i, full));
      await full;
      const got = await Promise.all(clients);
      clearInterval(sampler);
      expect(sent.size).toBe(CLIENTS);
      for (const g of got) {
        expect(g.bytes).toBeGreaterThan(12 * 1024 * 1024);
        expect(g.hash, `run ${run}, stream of seed ${g.seed}`).toBe(sent.get(g.seed));
      }
      await until(
        () => proxy.stats.active === 0 && readBufferStats().out === before.out,
        'every connection closed and its buffers given back',
      );
      const after = readBufferStats();
      // The own-buffer path ran (bulk reads), writes pended on buffers read into
      // (the hazard this guards), and nothing was given back twice (out would fall below its start).
      expect(after.taken - before.taken).toBeGreaterThanOrEqual(CLIENTS);
      expect(after.lends - before.lends).toBeGreaterThanOrEqual(CLIENTS);
      expect(after.out).toBe(before.out);
      expect(after.free).toBeLessThanOrEqual(FREE_MAX);
      expect(peak).toBeLessThanOrEqual(3 * CLIENTS);
    }
  });

  it('a connection whose bulk is over holds no buffer while it stays open', async () => {
    const backendPort = await listenLoopback(cleanups, (s) => {
      // 4 MiB, then a short reply to every request the client sends.
      s.write(Buffer.alloc(4 * 1024 * 1024, 0x61));
      s.on('data', () => s.write('ok\n'));
    });
    const balancer = loopbackBalancer(cleanups, [{ id: 'b', port: backendPort }]);
    const { port } = await proxyOn(cleanups, balancer.router());
    const before = readBufferStats();
    const client = net.connect({ port, host: '127.0.0.1' });
    cleanups.push(() => client.destroy());
    let received = 0;
    let tookDuringBulk = false;
    client.on('data', (c: Buffer) => {
      received += c.length;
      if (readBufferStats().out > before.out) tookDuringBulk = true;
    });
    await until(() => received === 4 * 1024 * 1024, 'the 4 MiB through');
    expect(tookDuringBulk).toBe(true);
    client.write('ping\n');
    await until(() => received === 4 * 1024 * 1024 + 3, 'the short reply');
    // The short reply was a small read with nothing pending: the connection went back to the shared buffer.
    expect(readBufferStats().out).toBe(before.out);
    expect(client.destroyed).toBe(false);
  });
});

describe('read buffer hand-over', () => {
  it('a socket’s first read goes into the shared buffer; a hand-over is taken once; the shared buffer is never pooled', () => {
    const shared = sharedReadBuffer();
    expect(shared.length).toBe(READ_SIZE);
    expect(BULK_READ).toBeLessThan(READ_SIZE);
    expect(nextReadBuffer()).toBe(shared);
    const own = takeReadBuffer();
    expect(own).not.toBe(shared);
    expect(own.length).toBe(READ_SIZE);
    handOver(own);
    expect(nextReadBuffer()).toBe(own);
    expect(nextReadBuffer()).toBe(shared);
    const s0 = readBufferStats();
    giveReadBuffer(shared);
    expect(readBufferStats()).toEqual(s0);
    giveReadBuffer(own);
    expect(readBufferStats().out).toBe(s0.out - 1);
    // Reused, not allocated again.
    const again = takeReadBuffer();
    expect(again).toBe(own);
    expect(readBufferStats().allocated).toBe(s0.allocated);
    giveReadBuffer(again);
  });

  it(`the free list keeps at most ${FREE_MAX} buffers; every take is matched by one give`, () => {
    const s0 = readBufferStats();
    const bufs = Array.from({ length: FREE_MAX + 10 }, () => takeReadBuffer());
    expect(new Set(bufs).size).toBe(bufs.length);
    expect(readBufferStats().out).toBe(s0.out + bufs.length);
    for (const b of bufs) giveReadBuffer(b);
    const s1 = readBufferStats();
    expect(s1.out).toBe(s0.out);
    expect(s1.free).toBe(FREE_MAX);
  });
});
