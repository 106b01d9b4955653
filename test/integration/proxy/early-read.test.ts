/**
 * The proxy reads a client while its backend connects (no admission gate):
 * a client gone meanwhile frees its slot at once, and what it sent is
 * replayed in order on the backend a retry reaches. Against a backend whose
 * connects hang (a stopped child process: test/helpers/hanging-port).
 */
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Balancer } from '../../../src/runtime/balancer.js';
import { loopbackBalancer, proxyOn as proxyFor } from '../../helpers/proxy-on.js';
import type { Router } from '../../../src/runtime/router.js';
import type { TcpProxy, TcpProxyOptions } from '../../../src/proxy/tcp-proxy.js';
import { captureLog } from '../../helpers/log-capture.js';
import { openLeases } from '../../helpers/leases.js';
import { ManualTimers } from '../../helpers/manual-timers.js';
import { hangingPort } from '../../helpers/hanging-port.js';
import { until } from '../../helpers/until.js';
import { dial as dialFrom, readAll } from '../../helpers/loopback.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function listen(onConnection: (s: net.Socket) => void, opts: net.ServerOpts = {}): Promise<number> {
  const server = net.createServer(opts, (s) => {
    s.on('error', () => s.destroy());
    onConnection(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as net.AddressInfo).port;
}

const balancer = (backends: Array<{ id: string; port: number; host?: string }>): Balancer => loopbackBalancer(cleanups, backends);
const proxyOn = (router: Router, opts: Partial<TcpProxyOptions> = {}): Promise<{ proxy: TcpProxy; port: number }> =>
  proxyFor(cleanups, router, opts);

function dial(port: number): Promise<net.Socket> {
  return dialFrom(cleanups, port);
}

describe('read while the backend connects', () => {
  it('a client that resets while its backend connect hangs gives its connection-limit slot back at once, not when the connect ends', async () => {
    const hang = await hangingPort(cleanups);
    const bal = balancer([{ id: 'hang', port: hang }]);
    // The connect would end at its 60 s timeout: the slot can only come back earlier if the client is read meanwhile.
    const { proxy, port } = await proxyOn(bal.router({ policy: 'round-robin' }), {
      maxConnections: 1,
      connectTimeoutMs: 60_000,
      attempts: 1,
    });
    const client = await dial(port);
    await until(() => proxy.connections === 1, 'admitted');
    // A reset with nothing unread (a FIN, or a reset behind unread bytes, which Node reads as a FIN, is a
    // half-close the backend must still get once connected).
    client.resetAndDestroy();
    await until(() => proxy.connections === 0, 'slot back while the connect still hangs');
    expect(proxy.stats.accepted).toBe(1);
    expect(proxy.counters.refusals('client_abort')).toBe(1);
    expect(proxy.stats.active).toBe(0);
  });

  it('bytes and FIN sent while the first backend hangs are replayed, exactly once and in order, on the backend a retry reaches', async () => {
    const hang = await hangingPort(cleanups);
    const digests: string[] = [];
    const live = await listen(
      (s) => {
        void readAll(s).then((got) => {
          const d = createHash('sha256').update(got).digest('hex');
          digests.push(d);
          s.end(`${got.length} ${d}`);
        });
      },
      { allowHalfOpen: true },
    );
    const bal = balancer([
      { id: 'hang', port: hang },
      { id: 'live', port: live },
    ]);
    const log = captureLog('info');
    const { proxy, port } = await proxyOn(bal.router({ policy: 'round-robin' }), {
      connectTimeoutMs: 300,
      attempts: 2,
      accessLog: log.logger,
    });
    // 8 clients, each 200 KiB (more than the proxy reads before pausing a connecting client) and its FIN at once:
    // round robin sends every other first attempt to the hanging backend, which times out after 300 ms.
    const runs = Array.from({ length: 8 }, async () => {
      const body = randomBytes(200 * 1024);
      const client = await dial(port);
      const reply = readAll(client);
      client.end(body);
      return { want: `${body.length} ${createHash('sha256').update(body).digest('hex')}`, got: (await reply).toString() };
    });
    for (const r of await Promise.all(runs)) expect(r.got).toBe(r.want);
    expect(digests).toHaveLength(8);
    expect(proxy.stats.failed).toBe(0);
    expect(proxy.stats.bytesIn).toBe(8 * 200 * 1024);
    // Half of them were read while connecting to the hanging backend and replayed after the retry.
    await until(() => log.find('connection').length === 8, 'every access record');
    const records = log.find('connection');
    expect(records.every((r) => r['backend'] === 'live' && r['bytesIn'] === 200 * 1024)).toBe(true);
    expect(records.filter((r) => r['attempts'] === 2)).toHaveLength(4);
  });

  it('a client gone while its first backend hangs: when that connect times out, no other backend is tried', async () => {
    // rendezvous keyed by the client's address: find which of two ids 127.0.0.1 goes to first, and make that one hang.
    const probe = balancer([
      { id: 'a', port: 1 },
      { id: 'b', port: 2 },
    ]);
    const lease = probe.router({ policy: 'rendezvous' }).acquire({ key: '127.0.0.1' });
    const first = lease.id;
    lease.release('cancelled');
    const hang = await hangingPort(cleanups);
    let reached = 0;
    const live = await listen((s) => {
      reached++;
      s.destroy();
    });
    const bal = balancer([
      { id: first, port: hang },
      { id: first === 'a' ? 'b' : 'a', port: live },
    ]);
    const timers = new ManualTimers();
    const { proxy, port } = await proxyOn(bal.router({ policy: 'rendezvous' }), {
      key: 'client-ip',
      timers,
      connectTimeoutMs: 1000,
      attempts: 2,
    });
    const client = await dial(port);
    await until(() => openLeases(bal) === 1, 'the first attempt holds its lease');
    client.resetAndDestroy();
    await until(() => proxy.counters.refusals('client_abort') === 1, 'the reset counted');
    // The hanging connect times out now: before, the run went on to the live backend for a client already gone.
    await timers.advance(1000);
    await until(() => openLeases(bal) === 0, 'the timed-out attempt returned its lease');
    // A connect to the live backend would land within a few I/O turns; give it 100 of them.
    for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
    expect(reached).toBe(0);
    expect(openLeases(bal)).toBe(0);
  });
});
