/**
 * Fleet mode from the CLI: three `poise proxy --discover dns:... --redis ...`
 * child processes, one redis-server and dnsmasq (test/helpers/dns-server.ts)
 * in front of real TCP backends on 127.0.0.1, .2 and .3 (one port). Each
 * proxy asks a DNS server of its own (three dnsmasq serving the same records,
 * rewritten together), so the queries each server counts are one process's:
 * exactly one server is asked at a time, a record change reaches every proxy
 * (counted in what each backend receives, by proxy), and the watcher
 * SIGKILLed: another proxy is elected (its log line) and the next change
 * reaches the two left. No test sleeps: every step waits on an event.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { startDnsServer, type TestDns } from '../helpers/dns-server.js';
import { freePort } from '../helpers/ports.js';
import { echo, startProxy, type ProxyProcess } from '../helpers/proxy-process.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';

const IPS = ['127.0.0.1', '127.0.0.2', '127.0.0.3'] as const;

let redis: TestRedis;
/** dnss[i]: the DNS server proxy i asks (the same records in each). */
const dnss: TestDns[] = [];
let port: number;
/** Per backend address: the proxy tags (`p0:`...) of every connection it received. */
const received = new Map<string, string[]>();
const servers: net.Server[] = [];
const proxies: { proxy: ProxyProcess; listen: number; tag: string }[] = [];
const dead = new Set<ProxyProcess>();

beforeAll(async () => {
  redis = await startRedis();
  for (let i = 0; i < 3; i++) dnss.push(await startDnsServer({ hosts: { 'api.test': ['127.0.0.1', '127.0.0.2'] }, ttl: 1 }));
  port = await freePort();
  for (const ip of IPS) {
    received.set(ip, []);
    const server = net.createServer((c) => {
      c.on('data', (d) => {
        received.get(ip)!.push(d.toString());
        c.write(`${ip}:${d}`);
      });
      c.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(port, ip, resolve));
    servers.push(server);
  }
  for (let i = 0; i < 3; i++) {
    const listen = await freePort();
    const proxy = startProxy([
      '--listen',
      `127.0.0.1:${listen}`,
      '--discover',
      `dns:api.test:${port}`,
      '--dns-server',
      dnss[i]!.server,
      '--redis',
      redis.url,
      '--cluster',
      'api',
      '--watcher-lease',
      '3s',
      '--workers',
      '0',
    ]);
    proxies.push({ proxy, listen, tag: `p${i}` });
  }
  await Promise.all(proxies.map((p) => p.proxy.until((rs) => rs.some((r) => r['msg'] === 'proxy ready'), 'proxy ready')));
}, 90_000);

afterAll(async () => {
  for (const p of proxies) p.proxy.kill();
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  await Promise.all(dnss.map((d) => d.stop()));
  await redis?.stop();
});

const live = (): typeof proxies => proxies.filter((p) => !dead.has(p.proxy));
const elected = (p: ProxyProcess): number => p.find('elected fleet watcher').length;

/** Waits until each live proxy sends `rounds` connections in a row only to `want` (what the backends received, by proxy). */
async function allRouteTo(want: readonly string[], rounds = 12): Promise<void> {
  for (const p of live()) {
    await until(
      async () => {
        for (let i = 0; i < rounds; i++) {
          const reply = await echo(p.listen, p.tag);
          if (!want.includes(reply.split(':')[0]!)) return false;
        }
        return true;
      },
      `${p.tag} routing only to ${want.join(', ')}`,
      30_000,
    );
  }
}

/** Every DNS server's query count now. */
const queries = (): number[] => dnss.map((d) => d.queries);
/** The proxies (by index) whose DNS server was asked since `before`. */
function askedSince(before: number[]): number[] {
  return queries().flatMap((n, i) => (n > before[i]! ? [i] : []));
}
/** Sets the records of api.test in every DNS server. */
const setHosts = (addresses: string[]): Promise<unknown> => Promise.all(dnss.map((d) => d.setHosts({ 'api.test': addresses })));

describe('poise proxy --discover dns: --redis: fleet mode', () => {
  it('one process asks the DNS server; a record change reaches every proxy', async () => {
    await until(() => proxies.reduce((n, p) => n + elected(p.proxy), 0) === 1, 'one elected watcher');
    const before = queries();
    await allRouteTo(['127.0.0.1', '127.0.0.2']);
    // An address added: every proxy sends to it (counted at that backend, by proxy tag).
    await setHosts(['127.0.0.1', '127.0.0.2', '127.0.0.3']);
    await until(
      async () => {
        for (const p of proxies) await echo(p.listen, p.tag);
        return proxies.every((p) => received.get('127.0.0.3')!.includes(p.tag));
      },
      'every proxy sending to 127.0.0.3',
      30_000,
    );
    // Two removed: every proxy sends only to the one left, and the removed ones receive nothing more.
    await setHosts(['127.0.0.3']);
    await allRouteTo(['127.0.0.3']);
    const [n1, n2] = [received.get('127.0.0.1')!.length, received.get('127.0.0.2')!.length];
    for (const p of proxies) for (let i = 0; i < 20; i++) expect(await echo(p.listen, p.tag)).toBe(`127.0.0.3:${p.tag}`);
    expect([received.get('127.0.0.1')!.length, received.get('127.0.0.2')!.length]).toEqual([n1, n2]);
    // Through the whole window of changes only the elected proxy asked (each would ask without fleet mode).
    const watcher = proxies.findIndex((p) => elected(p.proxy) === 1);
    expect(proxies.map((p) => elected(p.proxy)).sort()).toEqual([0, 0, 1]);
    expect(askedSince(before)).toEqual([watcher]);
  }, 90_000);

  it('the watcher SIGKILLed: another proxy is elected and only it asks the DNS server, and the next change reaches the proxies left', async () => {
    const watcher = proxies.find((p) => elected(p.proxy) === 1)!;
    watcher.proxy.child.kill('SIGKILL');
    dead.add(watcher.proxy);
    await until(() => live().some((p) => elected(p.proxy) === 1), 'another proxy elected', 30_000);
    const successor = proxies.findIndex((p) => !dead.has(p.proxy) && elected(p.proxy) === 1);
    const before = queries();
    await setHosts(['127.0.0.1', '127.0.0.2']);
    await allRouteTo(['127.0.0.1', '127.0.0.2']);
    expect(askedSince(before)).toEqual([successor]);
    expect(
      live()
        .map((p) => elected(p.proxy))
        .sort(),
    ).toEqual([0, 1]);

    // poise top --redis names the watcher that holds the lease: the successor's host:pid and what it watches.
    const top = await runCli(['top', '--redis', redis.url, '--cluster', 'api', '--once']);
    expect(top.code, top.stderr).toBe(0);
    const line = top.stdout.split('\n').find((l) => l.startsWith('fleet watcher: '));
    const id = `${os.hostname()}:${proxies[successor]!.proxy.child.pid} dns:api.test:${port}`;
    expect(line).toMatch(/^fleet watcher: .* {2}token \d+ {2}lease \d+\.\d s left$/);
    expect(line!.slice('fleet watcher: '.length).split('  ')[0]).toBe(id);
  }, 90_000);
});

describe('poise bench --discover dns: --redis: fleet mode', () => {
  it('joins the election, publishes what dns: found into Redis and runs on the membership it reads back', async () => {
    const bport = await freePort();
    const d = await startDnsServer({ hosts: { 'bench.test': ['127.0.0.1'] } });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-bench-fleet-'));
    const raw = new Redis(redis.url);
    try {
      const json = path.join(dir, 'b.json');
      const r = await runCli([
        'bench',
        '--discover',
        `dns:bench.test:${bport}`,
        '--dns-server',
        d.server,
        '--redis',
        redis.url,
        '--cluster',
        'bench',
        ...'--workers 1 --duration 300ms --policy random --scenario uniform'.split(' '),
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
      expect(result.config).toMatchObject({ membership: `dns:bench.test:${bport} (fleet mode, redis cluster bench)`, backends: 1 });
      expect(result.policies[0]!.perBackend.map((b) => b.id)).toEqual([`127.0.0.1:${bport}`]);
      expect(result.policies[0]!.perBackend[0]!.requests).toBeGreaterThan(0);
      // The snapshot it ran on is the one its watcher published into Redis.
      const stored = JSON.parse((await raw.get('poise:bench:snapshot'))!) as { document: { backends: { id: string }[] } };
      expect(stored.document.backends.map((b) => b.id)).toEqual([`127.0.0.1:${bport}`]);
    } finally {
      await raw.quit();
      await d.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
