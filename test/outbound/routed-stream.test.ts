import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { openLeases } from '../helpers/leases.js';
import { routedStream, type RoutedSocket } from '../../src/outbound/routed-stream.js';
import { PoiseError } from '../../src/core/errors.js';
import { thrown } from '../helpers/thrown.js';
import { AdmissionGate, type AdmissionBandStats } from '../../src/admission/admission.js';
import { Rng } from '../../src/core/rng.js';
import { fileEchoServer } from '../helpers/echo-server.js';
import { freePort } from '../helpers/ports.js';
import { until } from '../helpers/until.js';

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

const a = fileEchoServer('a');
const b = fileEchoServer('b');

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
    const dead = await freePort();
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
      { id: 'x', port: await freePort() },
      { id: 'y', port: await freePort() },
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
    const ports = [await freePort(), await freePort(), await freePort()];
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
    const dead = await freePort();
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

  it('a connected socket reset by its backend after it answered releases its lease once, not as a failure', async () => {
    const balancer = balancerWith([{ id: 'a', port: a.port }]);
    const socket = routedStream(balancer.router({ policy: 'round-robin', ejection: { consecutiveFailures: 10 } }))();
    const seen = watch(socket);
    await once(socket, 'connect');
    await roundTrip(socket, 'x');
    for (const s of a.sockets) s.resetAndDestroy();
    await seen.closed;
    expect(seen.events).toEqual(['connect', 'error', 'close']);
    expect((seen.errors[0] as { code?: string }).code).toBe('ECONNRESET');
    // The backend echoed before the reset: it answered, so the reset is the stream's, not a failure of the backend
    // (a reset before any byte is one: test/outbound/reset-before-answer.test.ts).
    expect(balancer.table.stats(0).failures).toBe(0);
    expect(openLeases(balancer)).toBe(0);
    balancer.close();
  });

  it('re-emits connect for a driver that calls connect() after the socket is already up', async () => {
    const balancer = balancerWith([{ id: 'a', port: a.port }]);
    const socket = routedStream(balancer.router({ policy: 'round-robin' }))();
    await once(socket, 'connect');
    let called = 0;
    socket.connect(5432, 'localhost', () => called++);
    await until(() => called > 0, 'the connect callback');
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
    expect(() => routedStream(router, { band: Number.NaN })).toThrow(/options\.band: must be a finite number/);
    expect(() => routedStream(router, { band: 1, admissionTimeoutMs: 0 })).toThrow(/options\.admissionTimeoutMs/);
    expect(() => routedStream(router, { admissionTimeoutMs: 50 })).toThrow(/options\.admissionTimeoutMs: needs options\.band/);
    const err = thrown(() => routedStream(router, { attempts: 1.5 }));
    expect(err.code).toBe('InvalidConfig');
    expect(err.message).toMatch(/options\.attempts/);
    balancer.close();
  });
});

/** `n` turns of the event loop. */
async function turns(n: number): Promise<void> {
  for (let k = 0; k < n; k++) await new Promise((r) => setImmediate(r));
}

/** Runs `fn` after `hops` microtask hops (0: now). */
function afterMicrotasks(hops: number, fn: () => void): void {
  if (hops === 0) fn();
  else queueMicrotask(() => afterMicrotasks(hops - 1, fn));
}

/**
 * One backend of 4 connections behind a gate of two bands: 10 (ceiling 1)
 * and 1 (ceiling 0.25: admitted while fewer than 2 connections are open).
 */
function gated(port: number, maxQueue?: number): { balancer: Balancer; router: ReturnType<Balancer['router']>; gate: AdmissionGate } {
  const balancer = new Balancer({ capacity: 4 });
  balancer.update([{ id: 'a', address: `127.0.0.1:${port}`, maxInflight: 4 }]);
  const router = balancer.router({ policy: 'p2c:connections' });
  const gate = new AdmissionGate(router, { bands: [10, 1], ceilings: [1, 0.25], kind: 'connection', maxQueue });
  return { balancer, router, gate };
}

function bandOf(gate: AdmissionGate, band: number): AdmissionBandStats {
  return gate.admissionStats().bands.find((x) => x.band === band)!;
}

async function connected(factory: () => RoutedSocket, n: number): Promise<RoutedSocket[]> {
  const out: RoutedSocket[] = [];
  for (let i = 0; i < n; i++) {
    const s = factory();
    await once(s, 'connect');
    out.push(s);
  }
  return out;
}

async function closeAll(sockets: RoutedSocket[]): Promise<void> {
  await Promise.all(sockets.map((s) => new Promise<void>((r) => s.once('close', () => r()).destroy())));
}

describe('routedStream with admission (band through a real AdmissionGate)', () => {
  it('a held-back band waits as a connecting socket while a higher band connects; it is admitted, and its early write delivered, once capacity frees below its ceiling', async () => {
    const { balancer, router, gate } = gated(a.port);
    const low = routedStream(router, { band: 1 });
    const high = routedStream(router, { band: 10 });
    const held = await connected(low, 2);
    // Open connections as the server counts them (its accepts lag the clients' 'connect').
    const open = (n: number, what: string): Promise<void> => until(() => a.sockets.size === n, what);
    await open(2, 'the server to hold the two low-band sockets');
    const waiting = low();
    const seen = watch(waiting);
    // What a driver sees while it waits: a connecting socket; a write waits for 'connect'.
    expect(waiting.connecting).toBe(true);
    expect(waiting.readyState).toBe('opening');
    const reply = new Promise<string>((r) => waiting.once('data', (d) => r(d.toString())));
    waiting.write('early');
    expect(bandOf(gate, 1).queued).toBe(1);
    const highs = await connected(high, 2);
    await open(4, 'the server to accept the two high-band sockets');
    expect(bandOf(gate, 1).queued).toBe(1);
    expect(waiting.attempts).toBe(0);
    expect(openLeases(balancer)).toBe(4);
    // Back to 2 open: still not below the low band's limit of 2.
    await closeAll(highs);
    await open(2, 'the server to see the high-band sockets closed');
    await turns(2);
    expect(bandOf(gate, 1).queued).toBe(1);
    expect(waiting.attempts).toBe(0);
    await closeAll([held.pop()!]);
    expect(await reply).toBe('a:early');
    expect(seen.events).toEqual(['connect']);
    await open(2, 'the server to hold one low-band socket and the admitted one');
    expect(waiting.lease?.id).toBe('a');
    expect(bandOf(gate, 1)).toMatchObject({ admitted: 3, admittedAfterWait: 1, queued: 0 });
    expect(bandOf(gate, 10)).toMatchObject({ admitted: 2, admittedAfterWait: 0 });
    await closeAll([...held, waiting]);
    expect(openLeases(balancer)).toBe(0);
    gate.close();
    balancer.close();
  });

  it('QueueFull, QueueTimeout and Closed reach the driver as one error carrying the PoiseError code, then one close; nothing dialled, no lease', async () => {
    const { balancer, router, gate } = gated(a.port, 1);
    const held = await connected(routedStream(router, { band: 1 }), 2);
    const refusal = async (s: RoutedSocket): Promise<PoiseError> => {
      const seen = watch(s);
      await seen.closed;
      expect(seen.events).toEqual(['error', 'close']);
      expect(s.attempts).toBe(0);
      return seen.errors[0] as PoiseError;
    };
    const first = routedStream(router, { band: 1, admissionTimeoutMs: 30 })();
    const full = await refusal(routedStream(router, { band: 1 })());
    expect(full).toBeInstanceOf(PoiseError);
    expect(full.code).toBe('QueueFull');
    expect((await refusal(first)).code).toBe('QueueTimeout');
    const last = routedStream(router, { band: 1 })();
    gate.close();
    expect((await refusal(last)).code).toBe('Closed');
    expect(bandOf(gate, 1).rejected).toMatchObject({ QueueFull: 1, QueueTimeout: 1, Closed: 1, Cancelled: 0 });
    expect(openLeases(balancer)).toBe(2);
    // A band on a router without a gate: the socket fails with the InvalidConfig naming the option.
    const ungated = balancerWith([{ id: 'a', port: a.port }]);
    const err = await refusal(routedStream(ungated.router(), { band: 1 })());
    expect(err.code).toBe('InvalidConfig');
    expect(err.message).toMatch(/acquireAsync\(options\)\.band: needs an AdmissionGate/);
    await closeAll(held);
    expect(openLeases(balancer)).toBe(0);
    ungated.close();
    balancer.close();
  });

  it('a driver destroy at 200 random moments of an admission wait: cancelled in the queue or released after the grant, counters and waiters exact every run', async () => {
    const { balancer, router, gate } = gated(a.port);
    const low = routedStream(router, { band: 1 });
    const rng = new Rng(15);
    const held: RoutedSocket[] = [];
    let inQueue = 0;
    let afterGrant = 0;
    let afterConnect = 0;
    for (let run = 0; run < 200; run++) {
      held.push(...(await connected(low, 2 - held.length)));
      const band0 = bandOf(gate, 1);
      const s = low();
      const seen = watch(s);
      expect(gate.admissionStats().waiting).toBe(1);
      const error = run % 3 === 0 ? new Error('timeout expired') : undefined;
      const frees = run % 2 === 1;
      // What the moment implies: 'queue' (destroyed before the gate served it), 'grant' (granted, not connected), or either/connected.
      let expected: 'queue' | 'grant' | 'any' = 'queue';
      if (frees) {
        // Capacity frees; the destroy comes 0..5 microtasks after that release
        // (before the gate serves the queue, between the grant and the
        // socket seeing it, while dialling) or 0..9 loop turns later.
        const h = held.pop()!;
        const hops = rng.below(6);
        const later = rng.below(10);
        // The release queues the gate's dispatch as a microtask: a destroy
        // before it is a cancellation in the queue; one or more hops later
        // the lease was granted (and the socket may be dialling).
        if (later === 0) expected = hops === 0 ? 'queue' : 'grant';
        else expected = 'any';
        h.once('close', () => {
          if (later === 0) afterMicrotasks(hops, () => s.destroy(error));
          else void turns(later).then(() => s.destroy(error));
        });
        h.destroy();
      } else {
        await turns(rng.below(16));
        s.destroy(error);
      }
      await seen.closed;
      await turns(1);
      const band1 = bandOf(gate, 1);
      const cancelled = band1.rejected.Cancelled - band0.rejected.Cancelled;
      const admitted = band1.admitted - band0.admitted;
      expect(cancelled + admitted).toBe(1);
      expect(gate.admissionStats().waiting).toBe(0);
      expect(openLeases(balancer)).toBe(held.length);
      expect(seen.events.filter((e) => e === 'close')).toHaveLength(1);
      expect(seen.errors).toEqual(error === undefined ? [] : [error]);
      if (expected === 'queue') expect(cancelled).toBe(1);
      if (expected === 'grant') expect([admitted, seen.events.includes('connect')]).toEqual([1, false]);
      if (cancelled === 1) {
        expect(s.attempts).toBe(0);
        expect(seen.events).not.toContain('connect');
        inQueue++;
      } else if (seen.events.includes('connect')) afterConnect++;
      else afterGrant++;
    }
    // Every kind of moment was hit: at least the 100 runs that freed nothing
    // ended in the queue, and the seed's draws include microtask moments of both kinds.
    expect(inQueue).toBeGreaterThan(100);
    expect(afterGrant).toBeGreaterThan(0);
    expect(afterConnect).toBeGreaterThan(0);
    expect(inQueue + afterGrant + afterConnect).toBe(200);
    await closeAll(held);
    expect(openLeases(balancer)).toBe(0);
    expect(gate.admissionStats().waiting).toBe(0);
    gate.close();
    balancer.close();
  });
});
