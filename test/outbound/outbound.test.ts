import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { connect } from '../../src/outbound/connect.js';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { fileEchoServer } from '../helpers/echo-server.js';
import { freePort } from '../helpers/ports.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { until } from '../helpers/until.js';
import { rejection } from '../helpers/thrown.js';

function roundTrip(socket: net.Socket, payload: string): Promise<string> {
  return new Promise((resolve, reject) => {
    socket.once('data', (d) => resolve(d.toString()));
    socket.once('error', reject);
    socket.write(payload);
  });
}

function closeSocket(socket: net.Socket): Promise<void> {
  return new Promise((r) => {
    socket.once('close', () => r());
    socket.end();
  });
}

const a = fileEchoServer('a');
const b = fileEchoServer('b');
const balancers: Balancer[] = [];

function balancerWith(backends: { id: string; port: number; priority?: number }[]): Balancer {
  const balancer = new Balancer({ capacity: 16 });
  balancer.update(backends.map((x) => ({ id: x.id, address: `127.0.0.1:${x.port}`, priority: x.priority ?? 0 })));
  balancers.push(balancer);
  return balancer;
}

afterEach(() => {
  for (const x of balancers.splice(0)) x.close();
});

describe('connect()', () => {
  it('holds a connection lease while the socket is open and releases it on close', async () => {
    const router = balancerWith([{ id: 'a', port: a.port }]).router({ policy: 'p2c:connections' });
    const { socket, lease, attempts } = await connect(router);
    expect(attempts).toBe(1);
    expect(lease.id).toBe('a');
    expect(router.openLeases).toBe(1);
    expect(await roundTrip(socket, 'hi')).toBe('a:hi');
    await closeSocket(socket);
    await until(() => lease.released, 'the lease release');
    expect(router.openLeases).toBe(0);
  });

  it('a refused backend is a failure and the next backend is tried, never the same one twice', async () => {
    const dead = await freePort();
    const router = balancerWith([
      { id: 'dead', port: dead },
      { id: 'a', port: a.port },
    ]).router({ policy: 'round-robin', ejection: { consecutiveFailures: 100 } });
    const results: number[] = [];
    for (let i = 0; i < 6; i++) {
      const c = await connect(router, { attempts: 2 });
      expect(c.lease.id).toBe('a');
      results.push(c.attempts);
      await closeSocket(c.socket);
    }
    // Round-robin alternates: every other connect first hits the dead backend, then retries on 'a'.
    expect(results.filter((n) => n === 2).length).toBeGreaterThanOrEqual(2);
    await until(() => router.openLeases === 0, 'all leases released');
  });

  it('gives up with NoEligibleCandidates naming the connect error when every backend refuses', async () => {
    const router = balancerWith([
      { id: 'd1', port: await freePort() },
      { id: 'd2', port: await freePort() },
    ]).router({ policy: 'random' });
    const err = await rejection(connect(router, { attempts: 5 }));
    expect(err.code).toBe('NoEligibleCandidates');
    expect(err.message).toMatch(/^connect: no backend accepted a connection \(2 tried\): connect ECONNREFUSED/);
    expect(router.openLeases).toBe(0);
  });

  it('rejects bad options naming them', async () => {
    const router = balancerWith([{ id: 'a', port: a.port }]).router();
    await expect(connect(router, { attempts: 0 })).rejects.toThrow('options.attempts: must be an integer in [1, 100], got 0');
    await expect(connect(router, { connectTimeoutMs: -1 })).rejects.toThrow(
      'options.connectTimeoutMs: must be a finite number > 0, got -1',
    );
    await expect(connect(router, { timers: {} as never })).rejects.toThrow('options.timers: must have a function now, got a object');
  });

  it('on an injected TimerSource: an attempt times out exactly at connectTimeoutMs of its clock, a failure, and the next backend is tried', async () => {
    const bal = balancerWith([
      { id: 'silent', port: a.port },
      { id: 'a', port: a.port },
    ]);
    const router = bal.router({ policy: 'round-robin', seed: 1, ejection: { consecutiveFailures: 100 } });
    const timers = new ManualTimers();
    // The first dial gets a socket that never connects (a backend that drops the SYN); later dials are real.
    let dials = 0;
    const createSocket = (o: net.NetConnectOpts): net.Socket => (dials++ === 0 ? new net.Socket() : net.connect(o));
    let settled = false;
    const pending = connect(router, { connectTimeoutMs: 500, timers, createSocket }).finally(() => (settled = true));
    await timers.advance(499);
    expect(settled).toBe(false);
    expect(dials).toBe(1);
    await timers.advance(1);
    const c = await pending;
    expect({ id: c.lease.id, attempts: c.attempts, dials }).toEqual({ id: 'a', attempts: 2, dials: 2 });
    // The connect-time sample is read on the injected clock, which did not move during the real connect.
    expect(c.connectMs).toBe(0);
    expect(bal.table.stats(bal.slotEntries().find((e) => e.id === 'silent')!.slot).failures).toBe(1);
    await closeSocket(c.socket);
  });
});

describe('TcpProxy', () => {
  it('splices clients to backends and balances held connections exactly with p2c:connections over two', async () => {
    const router = balancerWith([
      { id: 'a', port: a.port },
      { id: 'b', port: b.port },
    ]).router({ policy: 'p2c:connections' });
    const proxy = new TcpProxy({ router, port: 0 });
    const { port } = await proxy.listen();
    const clients: net.Socket[] = [];
    const seen = { a: 0, b: 0 };
    for (let i = 0; i < 20; i++) {
      const s = net.connect({ host: '127.0.0.1', port });
      await new Promise<void>((r) => s.once('connect', () => r()));
      const reply = await roundTrip(s, `m${i}`);
      expect(reply).toMatch(new RegExp(`^[ab]:m${i}$`));
      seen[reply[0] as 'a' | 'b']++;
      clients.push(s);
    }
    expect(seen).toEqual({ a: 10, b: 10 });
    expect(proxy.stats.active).toBe(20);
    for (const s of clients) await closeSocket(s);
    await until(() => proxy.stats.active === 0 && router.openLeases === 0, 'all spliced pairs to close');
    expect(proxy.stats.accepted).toBe(20);
    expect(proxy.stats.failed).toBe(0);
    await proxy.close();
  });

  it('retries past a dead backend and closes the client only when none accepts', async () => {
    const dead = await freePort();
    const router = balancerWith([
      { id: 'dead', port: dead },
      { id: 'a', port: a.port },
    ]).router({ policy: 'round-robin', ejection: { consecutiveFailures: 100 } });
    const proxy = new TcpProxy({ router, port: 0, attempts: 2 });
    const { port } = await proxy.listen();
    for (let i = 0; i < 4; i++) {
      const s = net.connect({ host: '127.0.0.1', port });
      expect(await roundTrip(s, 'x')).toBe('a:x');
      await closeSocket(s);
    }
    await proxy.close();

    const onlyDead = balancerWith([{ id: 'dead', port: dead }]).router({ policy: 'random' });
    const failing = new TcpProxy({ router: onlyDead, port: 0, attempts: 1 });
    const addr = await failing.listen();
    const s = net.connect({ host: '127.0.0.1', port: addr.port });
    await new Promise<void>((r) => s.once('close', () => r()));
    expect(failing.stats.failed).toBe(1);
    await failing.close();
  });

  it('rejects a port out of range', () => {
    const router = balancerWith([{ id: 'a', port: a.port }]).router();
    expect(() => new TcpProxy({ router, port: 70000 })).toThrow('options.port: must be an integer in [0, 65535], got 70000');
  });
});
