// Active checks against real servers on loopback, with no user traffic:
// the owner's checker alone moves backends down and up, and routers see it.
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckVerdict, HealthCheckOptions } from '../../src/health/config.js';
import { HealthFlag } from '../../src/load/load-table.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

function listen<S extends Server | HttpServer>(s: S, port = 0): Promise<S> {
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
}
const portOf = (s: Server | HttpServer): number => (s.address() as AddressInfo).port;
const closed = (s: Server | HttpServer): Promise<void> => new Promise((r) => s.close(() => r()));

function balancer(check: HealthCheckOptions): { b: Balancer; log: ReturnType<typeof captureLog> } {
  const log = captureLog();
  const b = new Balancer({ capacity: 16, logger: log.logger, health: { check } });
  open.push(b);
  return { b, log };
}
const stateOf = (b: Balancer, id: string) => b.healthStats().backends.find((x) => x.id === id)!;

/** Ids picked by `n` acquire/release pairs. */
function picks(b: Balancer, n: number, policy: 'p2c:latency' | 'priority' = 'p2c:latency'): Map<string, number> {
  const r = b.router({ policy, seed: 7 });
  const seen = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const lease = r.acquire();
    seen.set(lease.id, (seen.get(lease.id) ?? 0) + 1);
    lease.release('success');
  }
  r.close();
  return seen;
}

describe('active checks: the rise/fall state machine (custom check, scripted verdicts)', () => {
  it('goes down on exactly the fall-th consecutive failure and up on the rise-th pass', async () => {
    const script: CheckVerdict[] = [
      'healthy',
      'unhealthy',
      'unhealthy',
      'healthy',
      'unhealthy',
      'unhealthy',
      'unhealthy',
      'healthy',
      'unhealthy',
      'healthy',
      'healthy',
    ];
    const seenBefore: string[] = [];
    let calls = 0;
    const { b, log } = balancer({
      kind: 'custom',
      intervalMs: 10,
      jitterPercent: 0,
      rise: 2,
      fall: 3,
      check: async (target) => {
        if (target.id !== 'a') return 'healthy';
        // The state left by the previous results, observed at the next check.
        seenBefore.push(stateOf(b, 'a').check);
        return script[Math.min(calls++, script.length - 1)]!;
      },
    });
    b.update([
      { id: 'a', address: '127.0.0.1:1' },
      { id: 'other', address: '127.0.0.1:2' },
    ]);
    await until(() => seenBefore.length >= script.length + 2, 'the script ran');
    // fall 3: the third failure in a row (index 6) takes it down; a pass in
    // between (index 3) resets the streak. rise 2: a failure (index 8) resets
    // the passes, and indexes 9, 10 bring it up (later calls keep passing).
    expect(seenBefore.slice(0, script.length + 2)).toEqual([
      'unchecked',
      'up',
      'up',
      'up',
      'up',
      'up',
      'up',
      'down',
      'down',
      'down',
      'down',
      'up',
      'up',
    ]);
    expect(log.find('backend down (active check)')).toHaveLength(1);
    expect(log.find('backend up (active check)')).toHaveLength(1);
    // Every line about a backend names its id and its address.
    for (const msg of ['backend down (active check)', 'backend up (active check)'])
      expect(log.find(msg)[0]).toMatchObject({ backend: 'a', address: '127.0.0.1:1', check: 'custom' });
    const c = b.healthStats().counters;
    expect(c.markedDown).toBe(1);
    expect(c.markedUp).toBe(1);
  });

  it.each([true, false])(
    'unejectOnPass %s: a passing check of an up backend ends a passive ejection at once, or leaves it to run out',
    async (unejectOnPass) => {
      let checks = 0;
      const { b, log } = balancer({
        kind: 'custom',
        intervalMs: 10,
        jitterPercent: 0,
        rise: 1,
        fall: 1,
        unejectOnPass,
        check: async (target) => {
          if (target.id === 'a') checks++;
          return 'healthy';
        },
      });
      b.update([
        { id: 'a', address: '127.0.0.1:1' },
        { id: 'other', address: '127.0.0.1:2' },
      ]);
      await until(() => checks >= 1, 'a first check of a');
      // One failure ejects a for a minute (passive ejection in the router).
      const r = b.router({ policy: 'round-robin', seed: 1, ejection: { consecutiveFailures: 1, baseMs: 60_000, maxMs: 120_000 } });
      for (;;) {
        const lease = r.acquire();
        const isA = lease.id === 'a';
        lease.release(isA ? 'failure' : 'cancelled');
        if (isA) break;
      }
      expect(stateOf(b, 'a').ejectedForMs).toBeGreaterThan(50_000);
      const seen = checks;
      if (unejectOnPass) {
        await until(() => stateOf(b, 'a').ejectedForMs === 0, 'the next passing check un-ejects a');
        expect(b.healthStats().counters.unejectedByCheck).toBe(1);
        expect(log.find('backend un-ejected (active check passed)')).toHaveLength(1);
        expect(log.find('backend un-ejected (active check passed)')[0]).toMatchObject({ backend: 'a', address: '127.0.0.1:1' });
        // Routable again: round-robin over both backends reaches a.
        const ids = new Set(
          Array.from({ length: 4 }, () => {
            const lease = r.acquire();
            lease.release('success');
            return lease.id;
          }),
        );
        expect(ids.has('a')).toBe(true);
      } else {
        await until(() => checks >= seen + 20, '20 more passing checks');
        expect(stateOf(b, 'a').ejectedForMs).toBeGreaterThan(50_000);
        expect(b.healthStats().counters.unejectedByCheck).toBe(0);
      }
      r.close();
    },
  );
});

describe('active checks against real servers', () => {
  it('tcp: a backend that stops accepting is down after fall checks and back after rise, with no traffic', async () => {
    const s = await listen(createServer((sock) => sock.destroy()));
    const port = portOf(s);
    const keep = await listen(createServer((sock) => sock.destroy()));
    open.push(keep);
    const { b } = balancer({ kind: 'tcp', intervalMs: 20, jitterPercent: 0, rise: 2, fall: 3, timeoutMs: 500 });
    b.update([
      { id: 'a', address: `127.0.0.1:${port}` },
      { id: 'k', address: `127.0.0.1:${portOf(keep)}` },
    ]);
    await until(() => stateOf(b, 'a').check === 'up', 'a checked up');
    expect(b.healthStats().counters.markedDown).toBe(0);
    await closed(s);
    const failedBefore = b.healthStats().counters.checksFailed;
    await until(() => stateOf(b, 'a').check === 'down', 'a marked down');
    // Only a's checks fail (k keeps accepting): exactly `fall` of them took it down.
    expect(b.healthStats().counters.checksFailed - failedBefore).toBe(3);
    // a holds slot 0 (the first slot of the first membership): its health word says unhealthy.
    expect(b.table.stats(0).health & HealthFlag.Unhealthy).toBe(HealthFlag.Unhealthy);
    // Routers in any thread read the health word: a is never picked now.
    expect(picks(b, 200).get('a')).toBeUndefined();
    const restarted = await listen(
      createServer((sock) => sock.destroy()),
      port,
    );
    open.push(restarted);
    const passedBefore = b.healthStats().counters.checksPassed;
    await until(() => stateOf(b, 'a').check === 'up', 'a back up');
    expect(b.healthStats().counters.markedUp).toBe(1);
    expect(b.healthStats().counters.checksPassed - passedBefore).toBeGreaterThanOrEqual(2);
    expect(picks(b, 400).get('a') ?? 0).toBeGreaterThan(0);
  });

  it('http: a backend returning 503 is taken out; 200 with the expected body stays in', async () => {
    const ok = await listen(createHttpServer((_req, res) => res.end('status: ok')));
    const bad = await listen(
      createHttpServer((_req, res) => {
        res.statusCode = 503;
        res.end('status: ok');
      }),
    );
    const wrongBody = await listen(createHttpServer((_req, res) => res.end('starting')));
    const ok2 = await listen(createHttpServer((_req, res) => res.end('status: ok')));
    open.push(ok, bad, wrongBody, ok2);
    const { b, log } = balancer({ kind: 'http', path: '/healthz', bodyIncludes: 'ok', intervalMs: 20, jitterPercent: 0, rise: 1, fall: 2 });
    // Two of four healthy: 50 % available is not below the 50 % panic threshold, so the two down backends stay out
    // (with one of three, priority panic would route over all three, as Envoy does: docs/policies.md).
    b.update([
      { id: 'ok', address: `127.0.0.1:${portOf(ok)}` },
      { id: 'ok2', address: `127.0.0.1:${portOf(ok2)}` },
      { id: 'bad', address: `127.0.0.1:${portOf(bad)}` },
      { id: 'body', address: `127.0.0.1:${portOf(wrongBody)}` },
    ]);
    await until(
      () =>
        stateOf(b, 'bad').check === 'down' &&
        stateOf(b, 'body').check === 'down' &&
        stateOf(b, 'ok').check === 'up' &&
        stateOf(b, 'ok2').check === 'up',
      'checks settled',
    );
    expect(
      log
        .find('backend down')
        .map((r) => r['backend'])
        .sort(),
    ).toEqual(['bad', 'body']);
    expect(String(log.find('backend down').find((r) => r['backend'] === 'bad')!['reason'])).toContain('status 503 outside [200, 399]');
    expect([...picks(b, 300).keys()].sort()).toEqual(['ok', 'ok2']);
  });

  it('http: a degraded reply (x-envoy-degraded) takes traffic only when its priority has no healthy host left', async () => {
    let healthyUp = true;
    const healthy = await listen(
      createHttpServer((_req, res) => {
        res.statusCode = healthyUp ? 200 : 503;
        res.end();
      }),
    );
    const degraded = await listen(
      createHttpServer((_req, res) => {
        res.setHeader('x-envoy-degraded', '1');
        res.end();
      }),
    );
    open.push(healthy, degraded);
    const { b, log } = balancer({ kind: 'http', intervalMs: 20, jitterPercent: 0, rise: 1, fall: 1 });
    b.update([
      { id: 'h', address: `127.0.0.1:${portOf(healthy)}` },
      { id: 'd', address: `127.0.0.1:${portOf(degraded)}` },
    ]);
    await until(() => stateOf(b, 'd').degraded && stateOf(b, 'h').check === 'up', 'd degraded');
    expect(b.healthStats().counters.markedDegraded).toBe(1);
    expect(log.find('backend degraded (active check)').map((r) => [r['backend'], r['address']])).toEqual([
      ['d', `127.0.0.1:${portOf(degraded)}`],
    ]);
    expect([...picks(b, 300).keys()]).toEqual(['h']);
    healthyUp = false;
    await until(() => stateOf(b, 'h').check === 'down', 'h down');
    expect([...picks(b, 300).keys()]).toEqual(['d']);
  });

  it('redis: a server that answers PING with something else is down, naming it (PONG from a real Redis: test/integration/health-checks)', async () => {
    const liar = await listen(createServer((sock) => sock.once('data', () => sock.end('-ERR unknown command\r\n'))));
    open.push(liar);
    const { b, log } = balancer({ kind: 'redis', intervalMs: 20, jitterPercent: 0, rise: 1, fall: 1 });
    b.update([{ id: 'liar', address: `127.0.0.1:${portOf(liar)}` }]);
    await until(() => stateOf(b, 'liar').check === 'down', 'redis check settled');
    expect(String(log.find('backend down')[0]!['reason'])).toContain('not +PONG');
  });

  it('postgres: a non-postgres port is down (ReadyForQuery from a real PostgreSQL: test/integration/health-checks); SELECT 1 goes through a supplied client', async () => {
    const silent = await listen(createServer((sock) => sock.once('data', () => sock.end())));
    open.push(silent);
    const { b } = balancer({ kind: 'postgres', database: 'test', intervalMs: 20, jitterPercent: 0, rise: 1, fall: 1, timeoutMs: 1000 });
    b.update([{ id: 'silent', address: `127.0.0.1:${portOf(silent)}` }]);
    await until(() => stateOf(b, 'silent').check === 'down', 'postgres check settled');

    // With a client the check dials nothing itself: the address is never connected to.
    const queries: string[] = [];
    let fail = false;
    const client = {
      query: async (sql: string) => {
        queries.push(sql);
        if (fail) throw new Error('connection terminated');
        return { rows: [{ '?column?': 1 }] };
      },
    };
    const { b: b2 } = balancer({ kind: 'postgres', client, intervalMs: 20, jitterPercent: 0, rise: 1, fall: 1 });
    b2.update([
      { id: 'pg', address: '127.0.0.1:5432' },
      { id: 'x', address: '127.0.0.1:5432' },
    ]);
    await until(() => stateOf(b2, 'pg').check === 'up', 'client check up');
    fail = true;
    await until(() => stateOf(b2, 'pg').check === 'down', 'client check down');
    expect(new Set(queries)).toEqual(new Set(['SELECT 1']));
  });

  it('a check that does not finish within timeoutMs fails and counts as timed out', async () => {
    const { b } = balancer({
      kind: 'custom',
      intervalMs: 10,
      jitterPercent: 0,
      timeoutMs: 20,
      rise: 1,
      fall: 1,
      check: () => new Promise(() => {}),
    });
    b.update([
      { id: 'a', address: '127.0.0.1:1' },
      { id: 'z', address: '127.0.0.1:2' },
    ]);
    await until(() => stateOf(b, 'a').check === 'down' && stateOf(b, 'z').check === 'down', 'both timed out');
    const c = b.healthStats().counters;
    expect(c.checksTimedOut).toBe(c.checksFailed);
    expect(c.checksTimedOut).toBeGreaterThanOrEqual(2);
  });
});
