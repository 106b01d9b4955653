/**
 * ioredis over routedStream (a custom `Connector`, the docs/guide.md recipe) against
 * three real redis-server instances: cache shards keyed by a key prefix with
 * `maglev`, and read replicas under `p2c:connections` with one killed mid-run.
 */
import tls from 'node:tls';
import { AbstractConnector, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { Maglev } from '../../src/policy/maglev.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { leasesBack } from '../helpers/leases.js';
import type { Router } from '../../src/runtime/router.js';
import { routedStream, type RoutedSocket, type RoutedStreamOptions } from '../../src/outbound/routed-stream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';

/** The docs/guide.md recipe: every connection (and reconnection) of the client is routed; ioredis's `tls` option upgrades it. */
function routedConnector(router: Router, opts?: RoutedStreamOptions, onSocket?: (s: RoutedSocket) => void) {
  const open = routedStream(router, opts);
  return class RoutedConnector extends AbstractConnector {
    private readonly tlsOptions: tls.ConnectionOptions | undefined;
    constructor(options: unknown) {
      super(0);
      this.tlsOptions = (options as { tls?: tls.ConnectionOptions }).tls;
    }
    connect() {
      this.connecting = true;
      const socket = open();
      onSocket?.(socket);
      this.stream = this.tlsOptions === undefined ? socket : tls.connect({ ...this.tlsOptions, socket });
      return Promise.resolve(this.stream);
    }
  };
}

let servers: TestRedis[] = [];
beforeAll(async () => {
  for (let i = 0; i < 3; i++) servers.push(await startRedis());
}, 60_000);
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
  servers = [];
});

async function flushAll(): Promise<void> {
  for (const s of servers) {
    const direct = new Redis(s.port, '127.0.0.1');
    await direct.flushall();
    direct.disconnect();
  }
}

/** Every key on server i, asked of the server itself. */
async function serverKeys(i: number): Promise<string[]> {
  const direct = new Redis(servers[i]!.port, '127.0.0.1');
  try {
    return await direct.keys('*');
  } finally {
    direct.disconnect();
  }
}

function threeServers(): Balancer {
  const balancer = new Balancer({ capacity: 8 });
  balancer.update(servers.map((s, i) => ({ id: `r${i}`, address: `127.0.0.1:${s.port}` })));
  return balancer;
}

describe('ioredis with a routed Connector', () => {
  it('cache shards: maglev keyed by the key prefix puts every key on the server the policy names, as the servers report', async () => {
    await flushAll();
    const balancer = threeServers();
    const router = balancer.router({ policy: 'maglev' });
    const clients = new Map<string, Redis>();
    const shard = (prefix: string): Redis => {
      let c = clients.get(prefix);
      if (c === undefined) {
        c = new Redis({ Connector: routedConnector(router, { key: prefix }), maxRetriesPerRequest: 2 });
        clients.set(prefix, c);
      }
      return c;
    };
    const prefixes = Array.from({ length: 30 }, (_, i) => `tenant-${i}`);
    for (const p of prefixes) for (let j = 0; j < 5; j++) await shard(p).set(`${p}:k${j}`, String(j));
    // What the policy says, computed apart from the router: the same ids in Maglev.
    const ids = servers.map((_, i) => `r${i}`);
    const maglev = new Maglev();
    const backends = ids.map((id) => new Backend(id));
    const expected = servers.map(() => new Set<string>());
    for (const p of prefixes) for (let j = 0; j < 5; j++) expected[maglev.pick(backends, { key: p })]!.add(`${p}:k${j}`);
    for (let i = 0; i < servers.length; i++) {
      const direct = new Redis(servers[i]!.port, '127.0.0.1');
      const keys = new Set(await direct.keys('*'));
      direct.disconnect();
      expect(keys).toEqual(expected[i]);
      expect(keys.size).toBeGreaterThan(0);
    }
    for (const c of clients.values()) await c.quit();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('cache shards: one shard killed mid-run — the live shards keep their keys; with ejection after 1 failure the dead shard keys move to its Maglev successor (the table over the two left) and come back to it on reconnection once it is restarted and the ejection has expired', async () => {
    // What the policy does, stated: routing is per connection. A prefix's
    // client stays on its server while the connection lives, so the live
    // shards' clients never move. A dead shard's client reconnects; the
    // refused connect ejects the backend (consecutiveFailures 1), the same
    // socket's retry sees a view without it, and Maglev over the two left
    // names the new owner. The keys return only when the client reconnects
    // after the ejection expired (here: disconnect(true) after the restart).
    await flushAll();
    const balancer = threeServers();
    const router = balancer.router({ policy: 'maglev', ejection: { consecutiveFailures: 1, baseMs: 300, maxMs: 1000 } });
    const victim = servers[2]!;
    const ids = servers.map((_, i) => `r${i}`);
    const maglev = new Maglev();
    const all = ids.map((id) => new Backend(id));
    const left = all.slice(0, 2);
    const prefixes = Array.from({ length: 30 }, (_, i) => `tenant-${i}`);
    const owner = new Map(prefixes.map((p) => [p, all[maglev.pick(all, { key: p })]!.id]));
    const successor = new Map(prefixes.map((p) => [p, left[maglev.pick(left, { key: p })]!.id]));
    const dead = prefixes.filter((p) => owner.get(p) === 'r2');
    // Both live servers take some of the dead shard's prefixes (8 prefixes: 6 and 2).
    expect(new Set(dead.map((p) => successor.get(p)))).toEqual(new Set(['r0', 'r1']));
    const clients = new Map<string, Redis>();
    const errors: string[] = [];
    for (const p of prefixes) {
      const c = new Redis({ Connector: routedConnector(router, { key: p }), maxRetriesPerRequest: 5, retryStrategy: () => 10 });
      c.on('error', (e: Error) => errors.push(e.message));
      clients.set(p, c);
    }
    const writeAll = (tag: string): Promise<unknown> =>
      Promise.all(prefixes.flatMap((p) => Array.from({ length: 3 }, (_, j) => clients.get(p)!.set(`${p}:${tag}${j}`, tag))));
    const keysOf = (keep: (p: string) => boolean, tag: string): string[] =>
      prefixes.filter(keep).flatMap((p) => Array.from({ length: 3 }, (_, j) => `${p}:${tag}${j}`));
    let down = false;
    try {
      await writeAll('a');
      down = true;
      await victim.kill();
      await writeAll('b');
      // On the servers: each live server holds its own prefixes' keys from
      // before and during the outage, and the dead prefixes whose successor it is.
      for (const i of [0, 1]) {
        const id = `r${i}`;
        const expected = [
          ...keysOf((p) => owner.get(p) === id, 'a'),
          ...keysOf((p) => owner.get(p) === id, 'b'),
          ...keysOf((p) => owner.get(p) === 'r2' && successor.get(p) === id, 'b'),
        ];
        expect(new Set(await serverKeys(i))).toEqual(new Set(expected));
      }
      expect(balancer.table.stats(2).ejectionsTotal).toBeGreaterThanOrEqual(1);
      // Restarted on the same port (empty: no persistence). New connections of a
      // dead prefix go back to it once the ejection has expired.
      await victim.restart();
      down = false;
      await until(() => {
        const lease = router.acquire({ key: dead[0]! });
        lease.release('cancelled');
        return lease.id === 'r2';
      }, 'the dead prefix routed back to r2 once its ejection expired');
      for (const p of dead) clients.get(p)!.disconnect(true);
      await writeAll('c');
      expect(new Set(await serverKeys(2))).toEqual(new Set(keysOf((p) => owner.get(p) === 'r2', 'c')));
      for (const i of [0, 1]) {
        const keys = new Set(await serverKeys(i));
        for (const k of keysOf((p) => owner.get(p) === `r${i}`, 'c')) expect(keys.has(k)).toBe(true);
        for (const k of keysOf((p) => owner.get(p) === 'r2', 'c')) expect(keys.has(k)).toBe(false);
      }
      for (const m of errors) expect(m).toMatch(/ECONNRESET|ECONNREFUSED|Connection is closed|EPIPE|no backend accepted/i);
    } finally {
      for (const c of clients.values()) c.disconnect();
      if (down) await victim.restart(); // the next tests need all three
    }
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
  }, 60_000);

  it('read replicas: a killed server fails only its own clients, which reconnect to the others; counters exact at the end', async () => {
    for (const s of servers) {
      const direct = new Redis(s.port, '127.0.0.1');
      await direct.set('whoami', String(s.port));
      direct.disconnect();
    }
    const balancer = threeServers();
    const router = balancer.router({ policy: 'p2c:connections', ejection: { consecutiveFailures: 2, baseMs: 60_000 } });
    const victim = servers[2]!;
    let killed = false;
    const sockets: { socket: RoutedSocket; afterKill: boolean; errors: number }[] = [];
    // 12 clients: a server stays without one only if every draw after the third
    // misses it (each pair misses a given one of three with probability 1/3): < 2e-5.
    const clients = Array.from({ length: 12 }, () => {
      const errors: unknown[] = [];
      const onSocket = (socket: RoutedSocket): void => {
        const entry = { socket, afterKill: killed, errors: 0 };
        socket.on('error', () => entry.errors++);
        sockets.push(entry);
      };
      const redis = new Redis({
        Connector: routedConnector(router, undefined, onSocket),
        retryStrategy: () => 10,
        maxRetriesPerRequest: 5,
      });
      redis.on('error', (e) => errors.push(e));
      return { redis, errors };
    });
    const before: number[] = [];
    const after: number[] = [];
    let done = 0;
    let killing: Promise<void> | undefined;
    const failures: string[] = [];
    await Promise.all(
      clients.map(async ({ redis }) => {
        for (let i = 0; i < 50; i++) {
          const wasKilled = killed;
          try {
            const port = Number(await redis.get('whoami'));
            (wasKilled ? after : before).push(port);
          } catch (err) {
            failures.push((err as Error).message);
          }
          if (++done === 200) {
            killing = victim.kill();
            await killing;
            killed = true;
          }
        }
      }),
    );
    expect(killed).toBe(true);
    // Before the kill all three served; after it, only the two left.
    expect(new Set(before)).toEqual(new Set(servers.map((s) => s.port)));
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((p) => p !== victim.port)).toBe(true);
    // Socket errors only on connections routed to the killed server.
    expect(sockets.filter((s) => s.errors > 0).every((s) => s.socket.lease?.id === 'r2')).toBe(true);
    // The reconnections after the kill went to the others.
    expect(sockets.filter((s) => s.afterKill && s.socket.lease !== undefined).every((s) => s.socket.lease!.id !== 'r2')).toBe(true);
    // Clients that reconnected elsewhere: more sockets than clients, and the victim's share moved.
    expect(sockets.length).toBeGreaterThan(clients.length);
    for (const m of failures) expect(m).toMatch(/ECONNRESET|Connection is closed|max retries/i);
    for (const c of clients) c.redis.disconnect();
    expect(await leasesBack(balancer)).toBe(0);
    balancer.close();
    await victim.restart();
  }, 60_000);

  it('TLS: ioredis with its tls option over a routed socket, the server CA verified (the server speaks TLS only)', async () => {
    const secure = await startRedis({ tls: true });
    try {
      const balancer = new Balancer({ capacity: 4 });
      balancer.update([{ id: 'r-tls', address: `127.0.0.1:${secure.port}` }]);
      const router = balancer.router({ policy: 'p2c:connections' });
      const sockets: RoutedSocket[] = [];
      const client = new Redis({
        Connector: routedConnector(router, undefined, (s) => sockets.push(s)),
        // The identity checked is `host`'s (an IP: no SNI; Node 26 refuses an IP as `servername`).
        tls: { ca: secure.ca, host: '127.0.0.1' },
      });
      client.on('error', () => {});
      await client.set('over', 'tls');
      expect(await client.get('over')).toBe('tls');
      expect(sockets.length).toBe(1);
      expect(sockets[0]!.lease?.id).toBe('r-tls');
      expect(balancer.table.connections(0)).toBe(1);
      await client.quit();
      expect(await leasesBack(balancer)).toBe(0);
      balancer.close();
    } finally {
      await secure.stop();
    }
  }, 60_000);
});
