/**
 * DNS discovery against a real DNS server: dnsmasq on a loopback port
 * (test/helpers/dns-server.ts), its hosts file rewritten and re-read, a
 * fault switch in front of it for SERVFAIL and silence. The re-query
 * schedule runs on injected timers: a test moves time by hand and waits for
 * the query it caused to be answered; no test sleeps or measures a duration.
 */
import net from 'node:net';
import http from 'node:http';
import https from 'node:https';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { DnsMembership } from '../../src/discovery/dns.js';
import { SrvMembership } from '../../src/discovery/srv.js';
import { discoverySource } from '../../src/discovery/schemes.js';
import { PoiseDispatcher } from '../../src/http/dispatcher.js';
import { createLogger } from '../../src/log.js';
import { bindMembership } from '../../src/membership/source.js';
import { connect } from '../../src/outbound/connect.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { startDnsServer, type TestDns } from '../helpers/dns-server.js';
import { runCli } from '../helpers/cli.js';
import { hangingPort } from '../helpers/hanging-port.js';
import { echo, startProxy } from '../helpers/proxy-process.js';
import { freePort } from '../helpers/ports.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';
import { captureLog } from '../helpers/log-capture.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { selfSignedCert } from '../helpers/redis-server.js';
import { manualClock } from '../helpers/runtime.js';
import { until } from '../helpers/until.js';

const silent = createLogger({ level: 'silent' });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function dnsServer(opts: Parameters<typeof startDnsServer>[0]): Promise<TestDns> {
  const d = await startDnsServer(opts);
  cleanups.push(() => d.stop());
  return d;
}

/** Manual timers that remember the delay of every timer set (the re-query schedule). */
class RecordingTimers extends ManualTimers {
  readonly delays: number[] = [];
  override setTimeout(fn: () => void, ms: number): unknown {
    this.delays.push(ms);
    return super.setTimeout(fn, ms);
  }
}

/** A source's snapshots as delivered. */
function collector(): { seen: MembershipSnapshot[]; listener: (s: MembershipSnapshot) => void } {
  const seen: MembershipSnapshot[] = [];
  return { seen, listener: (s) => void seen.push(s) };
}

/** A TCP server on 127.0.0.1:`port` (0: any) that counts accepted connections; close() and listen again on the same port. */
async function countingServer(port = 0): Promise<{ port: number; accepted: number; close(): Promise<void>; reopen(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let server: net.Server;
  const s = {
    port,
    accepted: 0,
    async reopen(): Promise<void> {
      server = net.createServer((c) => {
        s.accepted++;
        sockets.add(c);
        c.on('close', () => sockets.delete(c));
        c.on('error', () => {});
      });
      await new Promise<void>((resolve) => server.listen(s.port, '127.0.0.1', resolve));
      s.port = (server.address() as net.AddressInfo).port;
    },
    async close(): Promise<void> {
      for (const c of sockets) c.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  await s.reopen();
  return s;
}

describe('dns: A/AAAA discovery against dnsmasq', () => {
  it('re-resolves on the records TTL: the next query is scheduled at exactly ttl seconds, clamped to [1 s, 300 s]', async () => {
    for (const [ttl, expected] of [
      [5, 5_000],
      [0, 1_000],
      [100_000, 300_000],
    ] as const) {
      const d = await dnsServer({ hosts: { 'api.test': ['127.0.0.1'] }, ttl });
      const timers = new RecordingTimers();
      const source = new DnsMembership('api.test:8080', { servers: [d.server], timers, logger: silent });
      cleanups.push(() => source.close());
      const { seen, listener } = collector();
      await source.start(listener);
      expect(seen.map((s) => s.backends)).toEqual([[{ id: '127.0.0.1:8080', address: '127.0.0.1:8080', hostname: 'api.test' }]]);
      expect(timers.delays).toEqual([expected]);
      if (ttl !== 5) continue;
      // The record changes; nothing is asked before the TTL is up, the change is seen when it is.
      await d.setHosts({ 'api.test': ['127.0.0.2'] });
      const asked = d.queries;
      await timers.advance(expected - 1);
      expect(d.queries).toBe(asked);
      await timers.advance(1);
      await until(() => seen.length === 2, 'the re-resolved answer');
      expect(seen[1]!.backends.map((b) => b.address)).toEqual(['127.0.0.2:8080']);
      expect(seen[1]!.version).toBe(2);
      expect(seen[1]!.lineage).toBe(seen[0]!.lineage);
    }
  });

  it('an added A record joins and a removed one leaves; a lease held on the removed backend ends normally', async () => {
    const d = await dnsServer({ hosts: { 'api.test': ['127.0.0.1'] }, ttl: 5 });
    const timers = new RecordingTimers();
    const balancer = new Balancer({ capacity: 8, logger: silent });
    cleanups.push(() => balancer.close());
    const source = new DnsMembership('api.test:8080', { servers: [d.server], timers, logger: silent });
    const binding = await bindMembership(source, balancer, { logger: silent });
    cleanups.push(() => binding.close());
    const router = balancer.router({ policy: 'round-robin', logger: silent });
    const held = router.acquire();
    expect(held.address).toBe('127.0.0.1:8080');

    await d.setHosts({ 'api.test': ['127.0.0.1', '127.0.0.3'] });
    await timers.advance(5_000);
    await until(() => binding.version === 2, 'the added record applied');
    const added = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const l = router.acquire();
      added.add(l.address);
      l.release('success');
    }
    expect([...added].sort()).toEqual(['127.0.0.1:8080', '127.0.0.3:8080']);

    await d.setHosts({ 'api.test': ['127.0.0.3'] });
    await timers.advance(5_000);
    await until(() => binding.version === 3, 'the removal applied');
    for (let i = 0; i < 20; i++) {
      const l = router.acquire();
      expect(l.address).toBe('127.0.0.3:8080');
      l.release('success');
    }
    // The lease taken before the removal is still the caller's to end.
    expect(held.released).toBe(false);
    held.release('success');
    expect(held.released).toBe(true);
  });

  it('a dual-stack host (::1 and 127.0.0.1) is one backend with two addresses; the dial falls over to the family that answers', async () => {
    const d = await dnsServer({ hosts: { 'api.test': ['127.0.0.1', '::1'] } });
    const { seen, listener } = collector();
    const server = await countingServer();
    cleanups.push(() => server.close());
    const source = new DnsMembership(`api.test:${server.port}`, { servers: [d.server], timers: new ManualTimers(), logger: silent });
    cleanups.push(() => source.close());
    await source.start(listener);
    expect(seen[0]!.backends).toEqual([
      { id: `[::1]:${server.port}`, address: `[::1]:${server.port}`, hostname: 'api.test', fallbackIp: '127.0.0.1' },
    ]);
    // The backend listens on 127.0.0.1 only: [::1] refuses, the IPv4 address takes the connection, one lease.
    const balancer = new Balancer({ capacity: 4, logger: silent });
    cleanups.push(() => balancer.close());
    balancer.update(seen[0]!);
    const router = balancer.router({ logger: silent });
    for (let i = 0; i < 5; i++) {
      const { socket, lease, attempts } = await connect(router, { attempts: 1 });
      expect(attempts).toBe(1);
      expect(socket.remoteAddress).toBe('127.0.0.1');
      expect(lease.id).toBe(`[::1]:${server.port}`);
      socket.destroy();
    }
    expect(server.accepted).toBe(5);
  });

  it('keeps Host and TLS servername: the dispatcher sends the name, dials the discovered address', async () => {
    const d = await dnsServer({ hosts: { 'api.test': ['127.0.0.1'] } });
    const hosts: string[] = [];
    const plain = http.createServer((req, res) => {
      hosts.push(String(req.headers.host));
      res.end('ok');
    });
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => plain.close(() => resolve())));
    const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-sni-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const cert = selfSignedCert(dir);
    const servernames: string[] = [];
    const secure = https.createServer({ cert: readFileSync(cert.cert), key: readFileSync(cert.key) }, (req, res) => {
      servernames.push(String((req.socket as unknown as { servername?: string }).servername));
      hosts.push(String(req.headers.host));
      res.end('ok');
    });
    await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => secure.close(() => resolve())));

    for (const [scheme, port] of [
      ['http', (plain.address() as net.AddressInfo).port],
      ['https', (secure.address() as net.AddressInfo).port],
    ] as const) {
      const balancer = new Balancer({ capacity: 4, logger: silent });
      cleanups.push(() => balancer.close());
      const source = discoverySource(`dns:api.test:${port}?server=${d.server}`, { timers: new ManualTimers(), logger: silent });
      const binding = await bindMembership(source, balancer, { logger: silent });
      cleanups.push(() => binding.close());
      const dispatcher = new PoiseDispatcher({
        router: balancer.router({ logger: silent }),
        origin: `${scheme}://api.test:${port}`,
        pool: scheme === 'https' ? { connect: { rejectUnauthorized: false } } : undefined,
      });
      cleanups.push(() => dispatcher.close());
      const res = await dispatcher.request({ origin: `${scheme}://api.test:${port}`, path: '/', method: 'GET' });
      expect(await res.body.text()).toBe('ok');
    }
    expect(hosts).toEqual([
      `api.test:${(plain.address() as net.AddressInfo).port}`,
      `api.test:${(secure.address() as net.AddressInfo).port}`,
    ]);
    expect(servernames).toEqual(['api.test']);
  });

  it('a SERVFAIL, an empty answer and silence keep the last good membership; each failure is logged once per change of state', async () => {
    const d = await dnsServer({ hosts: { 'api.test': ['127.0.0.1', '127.0.0.2'] }, names: ['api.test'], ttl: 5 });
    const timers = new RecordingTimers();
    const log = captureLog('info');
    let wall = 0;
    const balancer = new Balancer({ capacity: 8, logger: silent });
    cleanups.push(() => balancer.close());
    const source = new DnsMembership('api.test:8080', {
      servers: [d.server],
      timers,
      logger: log.logger,
      wallClock: () => ++wall,
      timeoutMs: 200,
      tries: 1,
      retry: { baseMs: 1_000, maxMs: 1_000 },
    });
    const binding = await bindMembership(source, balancer, { logger: silent });
    cleanups.push(() => binding.close());
    const inForce = (): string[] => members(balancer).map((m) => m.address);
    expect(inForce()).toEqual(['127.0.0.1:8080', '127.0.0.2:8080']);
    expect(source.status).toMatchObject({ state: 'ok', records: 2, lastSuccessMs: 1 });
    const errors = (): number => Object.values(source.status.errors).reduce((a, b) => a + b, 0);

    const step = async (what: string): Promise<void> => {
      const before = errors() + source.status.lastSuccessMs;
      await timers.advance(timers.delays.at(-1)!);
      await until(() => errors() + source.status.lastSuccessMs !== before, what);
    };

    d.fault = 'servfail';
    await step('a SERVFAIL answered');
    await step('a second SERVFAIL answered');
    expect(source.status.errors.servfail).toBe(2);
    expect(source.status.state).toBe('stale');
    expect(inForce()).toEqual(['127.0.0.1:8080', '127.0.0.2:8080']);
    expect(log.find('discovery failed')).toHaveLength(1);

    d.fault = 'drop';
    await step('a silent server timed out');
    expect(source.status.errors.timeout).toBe(1);
    expect(inForce()).toEqual(['127.0.0.1:8080', '127.0.0.2:8080']);

    d.fault = 'none';
    await d.setHosts({}, 'api.test');
    await step('an empty answer');
    await step('a second empty answer');
    expect(source.status.errors.empty).toBe(2);
    expect(source.status).toMatchObject({ state: 'stale', records: 2 });
    expect(inForce()).toEqual(['127.0.0.1:8080', '127.0.0.2:8080']);
    // servfail, timeout, empty: three changes of state, three lines (not one per query).
    expect(log.find('discovery failed')).toHaveLength(3);
    expect(binding.version).toBe(1);

    await d.setHosts({ 'api.test': ['127.0.0.2'] });
    await step('the record back');
    expect(source.status).toMatchObject({ state: 'ok', records: 1 });
    expect(inForce()).toEqual(['127.0.0.2:8080']);
    expect(log.find('discovery answers again')).toHaveLength(1);
  });

  it('NXDOMAIN at start rejects with the reason (initial: reject) or waits for the name (initial: wait)', async () => {
    const d = await dnsServer({ hosts: {} });
    const source = new DnsMembership('nope.test:80', { servers: [d.server], timers: new ManualTimers(), logger: silent });
    const err = await source
      .start(() => {})
      .then(
        () => undefined,
        (e: unknown) => e as Error & { code?: string },
      );
    expect(err?.message).toBe('dns:nope.test:80: A nope.test: ENOTFOUND');
    expect(source.status.errors.notfound).toBe(1);
    expect(source.status.state).toBe('failing');

    const timers = new RecordingTimers();
    const waiting = new DnsMembership('late.test:80', { servers: [d.server], timers, logger: silent, initial: 'wait' });
    cleanups.push(() => waiting.close());
    const { seen, listener } = collector();
    await waiting.start(listener);
    expect(seen).toHaveLength(0);
    expect(waiting.problem?.code).toBe('Unavailable');
    await d.setHosts({ 'late.test': ['127.0.0.9'] });
    await timers.advance(timers.delays.at(-1)!);
    await until(() => seen.length === 1, 'the name once it exists');
    expect(waiting.problem).toBeUndefined();
  });
});

describe('srv: discovery against dnsmasq', () => {
  it("re-resolves after the smallest of the SRV TTL (read from the wire) and the targets' TTLs", async () => {
    for (const [srvTtl, targetTtl, expected] of [
      [7, 100, 7_000],
      [200, 9, 9_000],
    ] as const) {
      const d = await dnsServer({ hostRecords: [`h.test,127.0.0.1,${targetTtl}`], srv: ['_t._tcp.srv.test,h.test,80,0,1'], ttl: srvTtl });
      const timers = new RecordingTimers();
      const source = new SrvMembership('_t._tcp.srv.test', { servers: [d.server], timers, logger: silent });
      cleanups.push(() => source.close());
      const { seen, listener } = collector();
      await source.start(listener);
      expect(seen[0]!.backends).toEqual([{ id: 'h.test:80', address: '127.0.0.1:80', hostname: 'h.test', priority: 0, weight: 100 }]);
      expect(timers.delays).toEqual([expected]);
    }
  });

  it('SRV priority is failover: priority-0 backends killed, connections move to priority 1, and back when they return', async () => {
    const [a, b, c] = await Promise.all([countingServer(), countingServer(), countingServer()]);
    cleanups.push(() => c!.close());
    const d = await dnsServer({
      hosts: { 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.1'], 'c.test': ['127.0.0.1'] },
      srv: [
        `_svc._tcp.srv.test,a.test,${a!.port},0,1`,
        `_svc._tcp.srv.test,b.test,${b!.port},0,1`,
        `_svc._tcp.srv.test,c.test,${c!.port},1,1`,
      ],
    });
    const source = new SrvMembership('_svc._tcp.srv.test', { servers: [d.server], timers: new ManualTimers(), logger: silent });
    const balancer = new Balancer({ capacity: 8, logger: silent });
    cleanups.push(() => balancer.close());
    const binding = await bindMembership(source, balancer, { logger: silent });
    cleanups.push(() => binding.close());
    expect(members(balancer).map((m) => [m.id, m.priority, m.weight, m.hostname])).toEqual([
      [`a.test:${a!.port}`, 0, 100, 'a.test'],
      [`b.test:${b!.port}`, 0, 100, 'b.test'],
      [`c.test:${c!.port}`, 1, 100, 'c.test'],
    ]);
    const clock = manualClock();
    const router = balancer.router({
      policy: 'round-robin',
      clock: clock.now,
      logger: silent,
      ejection: { consecutiveFailures: 1, baseMs: 10_000, maxMs: 10_000 },
    });
    const dial = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const { socket } = await connect(router, { attempts: 3 });
        socket.destroy();
      }
    };
    const counts = () => [a!.accepted, b!.accepted, c!.accepted];

    await dial(100);
    expect(counts()).toEqual([50, 50, 0]);

    await a!.close();
    await b!.close();
    await dial(100);
    // Each refused dial ejected its backend at once (one failure), and the connection was retried on priority 1.
    expect(counts()).toEqual([50, 50, 100]);

    await a!.reopen();
    await b!.reopen();
    clock.advance(10_001);
    await dial(100);
    expect(counts()).toEqual([100, 100, 100]);
  });

  it('SRV weights 3:1 become poise weights 300:100; 20,000 picks give 3:1 within 5 standard deviations', async () => {
    const d = await dnsServer({
      hosts: { 'a.test': ['127.0.0.1'], 'b.test': ['127.0.0.2'], 'z.test': ['127.0.0.3'] },
      srv: [
        '_w._tcp.srv.test,a.test,7001,0,3',
        '_w._tcp.srv.test,b.test,7002,0,1',
        '_z._tcp.srv.test,z.test,7003,0,0',
        '_z._tcp.srv.test,a.test,7001,0,1',
      ],
    });
    const source = new SrvMembership('_w._tcp.srv.test', { servers: [d.server], timers: new ManualTimers(), logger: silent });
    const balancer = new Balancer({ capacity: 8, logger: silent });
    cleanups.push(() => balancer.close());
    const binding = await bindMembership(source, balancer, { logger: silent });
    cleanups.push(() => binding.close());
    const router = balancer.router({ policy: 'weighted', seed: 7, logger: silent });
    expect(members(balancer).map((m) => [m.id, m.weight])).toEqual([
      ['a.test:7001', 300],
      ['b.test:7002', 100],
    ]);
    // p = 3/4, n = 20,000: sd = sqrt(p(1-p)/n) = 0.00306; 5 sd = 0.0153. Equal weights (p = 1/2) are 80 sd away.
    const n = 20_000;
    let toA = 0;
    for (let i = 0; i < n; i++) {
      const l = router.acquire();
      if (l.id === 'a.test:7001') toA++;
      l.release('success');
    }
    expect(Math.abs(toA / n - 0.75)).toBeLessThan(0.0153);

    // RFC 2782: a weight-0 record beside a weighted one has a very small chance: 1 against 100.
    const zero = new SrvMembership('_z._tcp.srv.test', { servers: [d.server], timers: new ManualTimers(), logger: silent });
    cleanups.push(() => zero.close());
    const { seen, listener } = collector();
    await zero.start(listener);
    expect(seen[0]!.backends.map((x) => [x.id, x.weight])).toEqual([
      ['a.test:7001', 100],
      ['z.test:7003', 1],
    ]);
  });
});

/** The backends in force, by id. */
function members(balancer: Balancer) {
  return balancer
    .slotEntries()
    .filter((e) => !e.removed)
    .map((e) => e.spec)
    .sort((x, y) => x.id.localeCompare(y.id));
}

describe('the CLI: --discover', () => {
  it('poise members show --discover srv:... --dns-server prints what the source found; a bad spec exits 2 naming the flag', async () => {
    const d = await dnsServer({
      hosts: { 'a.test': ['127.0.0.1', '::1'] },
      srv: ['_cli._tcp.srv.test,a.test,7001,0,3'],
    });
    const shown = await runCli(['members', 'show', '--discover', 'srv:_cli._tcp.srv.test', '--dns-server', d.server, '--json']);
    expect(shown.stderr).toBe('');
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout).backends).toEqual([
      { id: 'a.test:7001', address: '[::1]:7001', weight: 300, priority: 0, hostname: 'a.test', fallbackIp: '127.0.0.1' },
    ]);
    const bad = await runCli(['members', 'show', '--discover', 'dns:a.test']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--discover: target: must be "name:port"');
  });
});

describe('Happy Eyeballs: a dual-stack backend whose first address hangs', () => {
  it('connects through the second address (tried 250 ms after the first, gRPC A61): one backend, one attempt, no timeout', async () => {
    const hangs: Array<() => unknown> = [];
    cleanups.push(async () => {
      for (const c of hangs) await c();
    });
    // 127.0.0.1:port drops every SYN; [::1]:port (the same port, the other family) accepts.
    const port = await hangingPort(hangs);
    const v6 = net.createServer((c) => c.on('error', () => {}));
    let accepted = 0;
    v6.on('connection', (c) => {
      accepted++;
      c.destroy();
    });
    await new Promise<void>((resolve) => v6.listen(port, '::1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => v6.close(() => resolve())));
    const balancer = new Balancer({ capacity: 4, logger: silent });
    cleanups.push(() => balancer.close());
    balancer.update([{ id: 'dual', address: `127.0.0.1:${port}`, fallbackIp: '::1', hostname: 'dual.test' }]);
    const router = balancer.router({ logger: silent });
    const { socket, attempts, lease } = await connect(router, { attempts: 1, connectTimeoutMs: 10_000 });
    expect([socket.remoteAddress, attempts, lease.id]).toEqual(['::1', 1, 'dual']);
    socket.destroy();
    await until(() => accepted === 1, 'the IPv6 address accepted');
  });
});

describe('poise proxy --discover', () => {
  it('routes to what dns: found, shows poise_discovery_* in /metrics, and keeps routing through a SERVFAIL (state stale)', async () => {
    const d = await dnsServer({ hosts: { 'api.test': ['127.0.0.1'] }, ttl: 1 });
    const backend = net.createServer((c) => {
      c.on('data', (x) => c.write(`b:${x}`));
      c.on('error', () => {});
    });
    await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => backend.close(() => resolve())));
    const [listen, metrics] = [await freePort(), await freePort()];
    const bport = (backend.address() as net.AddressInfo).port;
    const proxy = startProxy([
      '--listen',
      `127.0.0.1:${listen}`,
      '--discover',
      `dns:api.test:${bport}`,
      '--dns-server',
      d.server,
      '--workers',
      '0',
      '--metrics',
      `127.0.0.1:${metrics}`,
    ]);
    cleanups.push(() => proxy.kill());
    await proxy.until((rs) => rs.some((r) => r['msg'] === 'proxy ready'), 'proxy ready');
    expect(await echo(listen, 'x')).toBe('b:x');
    const scrape = async () => parseMetricsText(await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text());
    const value = (f: Awaited<ReturnType<typeof scrape>>, name: string, labels: Record<string, string> = {}) =>
      f.get(name)?.samples.find((x) => Object.entries(labels).every(([k, v]) => x.labels[k] === v))?.value;
    const src = `dns:api.test:${bport}`;
    let f = await scrape();
    expect(value(f, 'poise_discovery_records', { source: src })).toBe(1);
    expect(value(f, 'poise_discovery_state', { source: src, state: 'ok' })).toBe(1);
    d.fault = 'servfail';
    await until(async () => {
      f = await scrape();
      return (value(f, 'poise_discovery_errors_total', { source: src, kind: 'servfail' }) ?? 0) > 0;
    }, 'a SERVFAIL counted');
    expect(value(f, 'poise_discovery_state', { source: src, state: 'stale' })).toBe(1);
    expect(await echo(listen, 'y')).toBe('b:y');
    expect(await proxy.stop()).toBe(0);
  });
});

describe('poise bench --discover', () => {
  it('serves the SRV targets itself and routes by their priority and weight: priority 1 gets nothing while priority 0 stands', async () => {
    const [p1, p2, p3] = [await freePort(), await freePort(), await freePort()];
    const d = await dnsServer({
      hosts: { 'a.test': ['127.0.0.1'] },
      srv: [`_b._tcp.srv.test,a.test,${p1},0,3`, `_b._tcp.srv.test,a.test,${p2},0,1`, `_b._tcp.srv.test,a.test,${p3},1,1`],
    });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-bench-discover-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const json = path.join(dir, 'b.json');
    const r = await runCli([
      'bench',
      '--discover',
      'srv:_b._tcp.srv.test',
      '--dns-server',
      d.server,
      '--workers',
      '1',
      '--duration',
      '500ms',
      '--policy',
      'weighted',
      '--scenario',
      'uniform',
      '--json',
      json,
      '--report',
      path.join(dir, 'b.html'),
    ]);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(readFileSync(json, 'utf8')) as {
      config: { membership: string; backends: number };
      policies: { perBackend: { id: string; requests: number }[] }[];
    };
    expect(result.config).toMatchObject({ membership: 'srv:_b._tcp.srv.test', backends: 3 });
    const by = new Map(result.policies[0]!.perBackend.map((b) => [b.id, b.requests]));
    expect(by.get(`a.test:${p3}`)).toBe(0);
    // Weights 300:100: far more to the first (a count, not a ratio test: the run is short and the machine shared).
    expect(by.get(`a.test:${p1}`)!).toBeGreaterThan(by.get(`a.test:${p2}`)!);
    expect(by.get(`a.test:${p2}`)!).toBeGreaterThan(0);
  });
});
