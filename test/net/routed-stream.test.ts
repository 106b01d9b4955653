import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { openLeases } from '../helpers/leases.js';
import { routedStream, type RoutedSocket } from '../../src/net/routed-stream.js';
import { PoiseError } from '../../src/core/errors.js';
import { thrown } from '../helpers/thrown.js';

interface Server {
  server: net.Server;
  port: number;
  accepted: () => number;
  sockets: Set<net.Socket>;
}

async function echoServer(name: string): Promise<Server> {
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
  return { server, port: (server.address() as net.AddressInfo).port, accepted: () => accepted, sockets };
}

async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function balancerWith(backends: { id: string; port: number }[]): Balancer {
  const balancer = new Balancer({ capacity: 16 });
  balancer.update(backends.map((x) => ({ id: x.id, address: `127.0.0.1:${x.port}` })));
  return balancer;
}

/** What a driver sees: the events in order. */
function watch(socket: net.Socket): { events: string[]; errors: unknown[]; closed: Promise<void> } {
  const events: string[] = [];
  const errors: unknown[] = [];
  socket.on('connect', () => events.push('connect'));
  socket.on('error', (e) => {
    events.push('error');
    errors.push(e);
  });
  const closed = new Promise<void>((r) =>
    socket.on('close', () => {
      events.push('close');
      r();
    }),
  );
  return { events, errors, closed };
}

/** Resolves once `cond` holds, polling the event loop (bounded; for the server side of a connect). */
async function until(cond: () => boolean, what: string, deadlineMs = 5000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

function once(socket: net.Socket, event: string): Promise<void> {
  return new Promise((r) => socket.once(event, () => r()));
}

function roundTrip(socket: net.Socket, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    socket.once('data', (d) => resolve(d.toString()));
    socket.once('error', reject);
    socket.write(payload);
  });
}

let a: Server;
let b: Server;
beforeAll(async () => {
  a = await echoServer('a');
  b = await echoServer('b');
});
afterAll(async () => {
  for (const s of [a, b]) {
    for (const c of s.sockets) c.destroy();
    await new Promise<void>((r) => s.server.close(() => r()));
  }
});

describe('routedStream', () => {
  it('ignores the driver host and port, connects to the routed backend, and holds one lease exactly as long as the socket', async () => {
    const balancer = balancerWith([{ id: 'a', port: a.port }]);
    const factory = routedStream(balancer.router({ policy: 'p2c:connections' }));
    const socket = factory();
    const seen = watch(socket);
    // What pg does: connect(port, host) on the stream it was given.
    socket.connect(1, 'host.invalid');
    await once(socket, 'connect');
    expect(openLeases(balancer)).toBe(1);
    expect(socket.lease?.id).toBe('a');
    expect(socket.attempts).toBe(1);
    expect(await roundTrip(socket, 'hi')).toBe('a:hi');
    socket.end();
    await seen.closed;
    expect(seen.events).toEqual(['connect', 'close']);
    expect(openLeases(balancer)).toBe(0);
    expect(balancer.table.stats(0).failures).toBe(0);
    balancer.close();
  });

  it('balances 20 held sockets exactly 10/10 over two backends with p2c:connections (two choices of two compare both)', async () => {
    const balancer = balancerWith([
      { id: 'a', port: a.port },
      { id: 'b', port: b.port },
    ]);
    const factory = routedStream(balancer.router({ policy: 'p2c:connections' }));
    const before = { a: a.accepted(), b: b.accepted() };
    const sockets = Array.from({ length: 20 }, () => factory());
    await Promise.all(sockets.map((s) => once(s, 'connect')));
    await until(() => a.accepted() + b.accepted() - before.a - before.b === 20, 'the servers to accept 20');
    expect(a.accepted() - before.a).toBe(10);
    expect(b.accepted() - before.b).toBe(10);
    expect(balancer.table.connections(0)).toBe(10);
    expect(balancer.table.connections(1)).toBe(10);
    await Promise.all(sockets.map((s) => new Promise<void>((r) => s.once('close', () => r()).end())));
    expect(openLeases(balancer)).toBe(0);
    balancer.close();
  });

  it('retries a refused connect on the other backend without showing the driver the failed attempt; 200 sockets, counts exact', async () => {
    const dead = await closedPort();
    const balancer = balancerWith([
      { id: 'dead', port: dead },
      { id: 'a', port: a.port },
    ]);
    // Ejection off in effect (a huge threshold): every socket may draw the dead one first.
    const router = balancer.router({ policy: 'round-robin', ejection: { consecutiveFailures: 1000 } });
    const factory = routedStream(router);
    const before = a.accepted();
    const sockets: RoutedSocket[] = [];
    const watched = [];
    for (let i = 0; i < 200; i++) {
      const s = factory();
      sockets.push(s);
      watched.push(watch(s));
    }
    await Promise.all(sockets.map((s) => once(s, 'connect')));
    await until(() => a.accepted() - before >= 200, 'the server to accept 200');
    expect(a.accepted() - before).toBe(200);
    // Round robin alternates the first draw: half the sockets tried the dead backend first.
    expect(sockets.filter((s) => s.attempts === 2).length).toBe(100);
    expect(sockets.every((s) => s.lease?.id === 'a')).toBe(true);
    expect(balancer.table.stats(0).failures).toBe(100);
    expect(balancer.table.connections(1)).toBe(200);
    for (const s of sockets) s.end();
    await Promise.all(watched.map((w) => w.closed));
    for (const w of watched) expect(w.events).toEqual(['connect', 'close']);
    expect(openLeases(balancer)).toBe(0);
    balancer.close();
  });

  it('fails with one NoEligibleCandidates error and one close when no backend accepts; every lease is back', async () => {
    const balancer = balancerWith([
      { id: 'x', port: await closedPort() },
      { id: 'y', port: await closedPort() },
    ]);
    const factory = routedStream(balancer.router({ policy: 'round-robin' }), { attempts: 5 });
    const socket = factory();
    const seen = watch(socket);
    await seen.closed;
    expect(seen.events).toEqual(['error', 'close']);
    const err = seen.errors[0] as PoiseError;
    expect(err).toBeInstanceOf(PoiseError);
    expect(err.code).toBe('NoEligibleCandidates');
    expect(err.message).toMatch(/2 tried.*ECONNREFUSED/);
    expect(socket.attempts).toBe(2);
    expect(openLeases(balancer)).toBe(0);
    expect(balancer.table.stats(0).failures + balancer.table.stats(1).failures).toBe(2);
    balancer.close();
  });

  it('stops after `attempts` backends even when more are left', async () => {
    const ports = [await closedPort(), await closedPort(), await closedPort()];
    const balancer = balancerWith(ports.map((port, i) => ({ id: `d${i}`, port })));
    const socket = routedStream(balancer.router({ policy: 'round-robin' }), { attempts: 2 })();
    const seen = watch(socket);
    await seen.closed;
    expect(socket.attempts).toBe(2);
    expect((seen.errors[0] as PoiseError).code).toBe('NoEligibleCandidates');
    expect(openLeases(balancer)).toBe(0);
    balancer.close();
  });

  it('an empty membership fails the socket asynchronously (listeners attached after creation still see it)', async () => {
    const balancer = new Balancer({ capacity: 4 });
    balancer.update([]);
    const socket = routedStream(balancer.router({ policy: 'round-robin' }))();
    const seen = watch(socket);
    await seen.closed;
    expect(seen.events).toEqual(['error', 'close']);
    expect((seen.errors[0] as PoiseError).code).toBe('Empty');
    balancer.close();
  });

  it('a driver destroy before connect cancels: no retry, no failure blamed, lease back (200 runs)', async () => {
    const balancer = balancerWith([
      { id: 'a', port: a.port },
      { id: 'b', port: b.port },
    ]);
    const factory = routedStream(balancer.router({ policy: 'round-robin' }));
    for (let i = 0; i < 200; i++) {
      const s = factory();
      const seen = watch(s);
      s.destroy(new Error('timeout expired')); // what pg does on connectionTimeoutMillis
      await seen.closed;
      expect(seen.events).toEqual(['error', 'close']);
      expect((seen.errors[0] as Error).message).toBe('timeout expired');
      expect(s.attempts).toBe(1);
    }
    expect(openLeases(balancer)).toBe(0);
    expect(balancer.table.stats(0).failures + balancer.table.stats(1).failures).toBe(0);
    balancer.close();
  });

  it('a driver destroy at any moment of a retry cancels it: one close, no connect, every lease back (200 runs over the gaps)', async () => {
    const dead = await closedPort();
    const balancer = balancerWith([
      { id: 'dead', port: dead },
      { id: 'a', port: a.port },
    ]);
    // Round robin from 'dead': every socket's first attempt fails and the second goes to 'a'.
    const router = balancer.router({ policy: 'round-robin', ejection: { consecutiveFailures: 100_000 } });
    const factory = routedStream(router);
    for (let i = 0; i < 200; i++) {
      const s = factory();
      const seen = watch(s);
      // Destroy after 0..7 turns of the loop: before the refusal, in the gap, while redialling, after connect.
      for (let k = 0; k < i % 8; k++) await new Promise((r) => setImmediate(r));
      const wasUp = seen.events.includes('connect');
      s.destroy(i % 2 === 0 ? undefined : new Error('pool ending'));
      await seen.closed;
      await new Promise((r) => setImmediate(r));
      expect(seen.events.filter((e) => e === 'close').length).toBe(1);
      if (!wasUp) expect(seen.events).not.toContain('connect');
      if (i % 2 === 1) expect(seen.errors.map((e) => (e as Error).message)).toEqual(['pool ending']);
      else expect(seen.errors).toEqual([]);
      expect(openLeases(balancer)).toBe(0);
    }
    balancer.close();
  });

  it('a connected socket reset by its backend releases its lease as a failure, once', async () => {
    const balancer = balancerWith([{ id: 'a', port: a.port }]);
    const socket = routedStream(balancer.router({ policy: 'round-robin', ejection: { consecutiveFailures: 10 } }))();
    const seen = watch(socket);
    await once(socket, 'connect');
    await roundTrip(socket, 'x');
    for (const s of a.sockets) s.resetAndDestroy();
    await seen.closed;
    expect(seen.events).toEqual(['connect', 'error', 'close']);
    expect((seen.errors[0] as { code?: string }).code).toBe('ECONNRESET');
    expect(balancer.table.stats(0).failures).toBe(1);
    expect(openLeases(balancer)).toBe(0);
    balancer.close();
  });

  it('re-emits connect for a driver that calls connect() after the socket is already up', async () => {
    const balancer = balancerWith([{ id: 'a', port: a.port }]);
    const socket = routedStream(balancer.router({ policy: 'round-robin' }))();
    await once(socket, 'connect');
    let called = 0;
    socket.connect(5432, 'localhost', () => called++);
    await new Promise((r) => setImmediate(r));
    expect(called).toBe(1);
    const closed = once(socket, 'close');
    socket.destroy();
    await closed;
    expect(openLeases(balancer)).toBe(0);
    balancer.close();
  });

  it('routes every socket of a keyed factory to the key owner', async () => {
    const balancer = balancerWith([
      { id: 'a', port: a.port },
      { id: 'b', port: b.port },
    ]);
    const router = balancer.router({ policy: 'maglev' });
    const owner = router.acquire({ key: 'tenant-7' });
    const expected = owner.id;
    owner.release('cancelled');
    const factory = routedStream(router, { key: 'tenant-7' });
    const sockets = Array.from({ length: 10 }, () => factory());
    const watched = sockets.map(watch);
    await Promise.all(sockets.map((s) => once(s, 'connect')));
    expect(sockets.every((s) => s.lease?.id === expected)).toBe(true);
    for (const s of sockets) s.destroy();
    await Promise.all(watched.map((w) => w.closed));
    expect(openLeases(balancer)).toBe(0);
    balancer.close();
  });

  it('refuses bad options naming them', () => {
    const balancer = balancerWith([{ id: 'a', port: a.port }]);
    const router = balancer.router();
    expect(() => routedStream(router, { attempts: 0 })).toThrow(/options\.attempts/);
    expect(() => routedStream(router, { connectTimeoutMs: -1 })).toThrow(/options\.connectTimeoutMs/);
    expect(() => routedStream(router, { atempts: 2 } as never)).toThrow(/atempts/);
    const err = thrown(() => routedStream(router, { attempts: 1.5 }));
    expect(err.code).toBe('InvalidConfig');
    expect(err.message).toMatch(/options\.attempts/);
    balancer.close();
  });
});
