/**
 * `poise top --once` (non-TTY output) against a live MetricsServer in this
 * process, and against a Redis membership: the table's rows carry the
 * figures the table holds (connections, in-flight, EWMA, the share of the
 * picks made between the two scrapes, ejections, state).
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fetch } from 'undici';
import { Registry, Gauge } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MembershipPublisher } from '../../../src/membership/redis-publisher.js';
import { HttpCounters } from '../../../src/http/counters.js';
import { PoiseDispatcher } from '../../../src/http/dispatcher.js';
import { collectMetrics } from '../../../src/metrics/collect.js';
import { fleetWatcherLines } from '../../../src/cli/top.js';
import { MetricsServer } from '../../../src/metrics/server.js';
import { Balancer } from '../../../src/runtime/balancer.js';
import { createLogger } from '../../../src/log.js';
import { EXIT } from '../../../src/cli/exit.js';
import { CLI, runCli } from '../../helpers/cli.js';
import { endless, serve, trickle } from '../../helpers/hostile-http.js';
import { until } from '../../helpers/until.js';
import { manualClock } from '../../helpers/runtime.js';
import { ReportFlag } from '../../../src/load/backend-load.js';
import { startRedis, type TestRedis } from '../../helpers/redis-server.js';

const logger = createLogger({ level: 'silent' });

/** The table's rows as cells (header first), after the title line. */
function cells(stdout: string): string[][] {
  const lines = stdout.trimEnd().split('\n');
  return lines.slice(1).map((l) => l.trim().split(/\s+/));
}

describe('poise top', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('--metrics URL --once: one table with state, connections, in-flight, EWMA, the pick share between its two scrapes, ejections, role and lag', async () => {
    // τ of a day: the 50 ms initial estimate does not move within the test (EWMA_MS reads 50.0).
    const b = new Balancer({ logger, tauMs: 86_400_000 });
    b.update([
      { id: 'b0', address: '127.0.0.1:7000', role: 'primary' },
      { id: 'b1', address: '127.0.0.1:7001', role: 'replica' },
      { id: 'b2', address: '127.0.0.1:7002', priority: 1, status: 'draining' },
    ]);
    // What a roles check writes: b1 1.234 s behind.
    b.ownerTable.db.write(b.slotEntries().find((e) => e.id === 'b1')!.slot, 2, 1234, 0, 0);
    const registry = new Registry();
    collectMetrics(b, { registry });
    const router = b.router({ policy: 'round-robin' });
    const held = [
      router.acquire({ exclude: ['b1'], kind: 'connection' }),
      router.acquire({ exclude: ['b1'], kind: 'connection' }),
      router.acquire({ exclude: ['b0'], kind: 'request' }),
    ];
    let scrapes = 0;
    // Registered after the poise metrics, so its collect runs after the first scrape's snapshot:
    // the picks it makes land between the CLI's two scrapes (128 on b0, 64 on b1: counted in 64s).
    new Gauge({
      name: 'test_scrapes',
      help: 'scrapes seen',
      registers: [registry],
      collect() {
        if (++scrapes === 1) {
          for (let i = 0; i < 128; i++) router.acquire({ exclude: ['b1'] }).release('cancelled');
          for (let i = 0; i < 64; i++) router.acquire({ exclude: ['b0'] }).release('cancelled');
        }
        this.set(scrapes);
      },
    });
    const server = new MetricsServer({ registry });
    const { port } = await server.listen();
    try {
      const r = await runCli(['top', '--metrics', `http://127.0.0.1:${port}`, '--once', '--interval', '200ms']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(scrapes).toBe(2);
      expect(r.stdout.split('\n')[0]).toMatch(new RegExp(`^poise top  http://127\\.0\\.0\\.1:${port}/metrics  every 200 ms  \\d{4}-`));
      expect(r.stdout).not.toContain('\x1b[');
      expect(cells(r.stdout)).toEqual([
        [
          'BACKEND',
          'PRIO',
          'STATE',
          'CONNS',
          'INFLIGHT',
          'EWMA_MS',
          'SHARE_%',
          'EJECTIONS',
          'ROLE',
          'LAG_MS',
          'RAMP_%',
          'REPORTED_W',
          'AGENT',
        ],
        // AGENT "-": no agent asked anything (b2's "draining" is the membership's, not the backend's "drain").
        ['b0', '0', 'ready', '2', '0', '50.0', '66.7', '0', 'primary', '-', '100', '1.00', '-'],
        ['b1', '0', 'ready', '0', '1', '50.0', '33.3', '0', 'replica', '1234', '100', '1.00', '-'],
        ['b2', '1', 'draining', '0', '0', '50.0', '0.0', '0', '-', '-', '100', '1.00', '-'],
        // No retry budget configured: retries are still counted.
        ['retry', 'budget', '(default):', 'no', 'budget', 'retries', 'allowed', '0', 'refused', '0'],
      ]);
    } finally {
      for (const l of held) l.release('cancelled');
      await server.close();
      b.close();
    }
  });

  it('--metrics: the resilience columns (slow start ramp, reported weight, drain / maint) and the retry budget line, from a real scrape', async () => {
    const clock = manualClock(1000);
    const b = new Balancer({
      logger,
      clock: clock.now,
      tauMs: 86_400_000,
      slowStart: { windowMs: 20_000, aggression: 1, minWeightPercent: 10 },
      retryBudget: { ratio: 0.2, minRetriesPerSecond: 1, ttlMs: 10_000 },
    });
    const warm = [
      { id: 'a', address: '127.0.0.1:7000' },
      { id: 'b', address: '127.0.0.1:7001' },
    ];
    b.update(warm);
    b.update([...warm, { id: 'cold', address: '127.0.0.1:7002' }]);
    // 5 s into a 20 s linear window: the joiner is at 25 %.
    clock.advance(5000);
    const slot = (id: string) => b.slotEntries().find((e) => e.id === id)!.slot;
    // What an agent would write: a at 50 % of its weight, b draining.
    b.ownerTable.reported.setAgentWeight(slot('a'), 500_000);
    b.ownerTable.reported.setAdmin(slot('b'), ReportFlag.Drain);
    // 100 requests allow max(floor 10, 20 % of 100) = 20 retries of 25 asked: 20 allowed, 5 refused, none left.
    const router = b.router();
    for (let i = 0; i < 100; i++) router.retryBudget.onRequest();
    for (let i = 0; i < 25; i++) router.retryBudget.tryRetry();
    const registry = new Registry();
    collectMetrics(b, { registry });
    const server = new MetricsServer({ registry });
    const { port } = await server.listen();
    try {
      const r = await runCli(['top', '--metrics', `http://127.0.0.1:${port}`, '--once', '--interval', '100ms']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const rows = cells(r.stdout);
      expect(rows[0]!.slice(10)).toEqual(['RAMP_%', 'REPORTED_W', 'AGENT']);
      expect(rows.slice(1, 4).map((row) => [row[0], ...row.slice(10)])).toEqual([
        ['a', '100', '0.50', '-'],
        ['b', '100', '1.00', 'drain'],
        ['cold', '25', '1.00', '-'],
      ]);
      expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('retry budget (default): available 0  retries allowed 20  refused 5');
    } finally {
      router.close();
      await server.close();
      b.close();
    }
  });

  it('--metrics: CONNS is "-" for a backend that served only HTTP requests (the dispatcher leases requests), the count for one with connection leases', async () => {
    const web = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
    const b = new Balancer({ logger, tauMs: 86_400_000 });
    const only = { id: 'web', address: `127.0.0.1:${(web.address() as AddressInfo).port}` };
    b.update([only]);
    const counters = HttpCounters.create({ capacity: b.table.capacity });
    const router = b.router();
    const dispatcher = new PoiseDispatcher({ router, origin: 'http://api', counters });
    const registry = new Registry();
    collectMetrics(b, { registry, http: counters });
    const server = new MetricsServer({ registry });
    const { port } = await server.listen();
    try {
      for (let i = 0; i < 3; i++) expect(await (await fetch('http://api/', { dispatcher })).text()).toBe('ok');
      b.update([only, { id: 'tcp', address: '127.0.0.1:7000' }]);
      const held = router.acquire({ exclude: ['web'], kind: 'connection' });
      const r = await runCli(['top', '--metrics', `http://127.0.0.1:${port}`, '--once', '--interval', '100ms']);
      held.release('cancelled');
      expect([r.code, r.stderr]).toEqual([0, '']);
      const rows = cells(r.stdout);
      expect(rows[0]!.slice(0, 5)).toEqual(['BACKEND', 'PRIO', 'STATE', 'CONNS', 'INFLIGHT']);
      expect(rows.slice(1, 3).map((row) => row.slice(0, 5))).toEqual([
        ['web', '0', 'ready', '-', '0'],
        ['tcp', '0', 'ready', '1', '0'],
      ]);
    } finally {
      await dispatcher.close();
      await server.close();
      b.close();
      await new Promise((r) => web.close(r));
    }
  });

  it('on a TTY (a pty from script(1)) it clears once, then redraws each frame in place: cursor home, the table, clear below', async () => {
    const b = new Balancer({ logger, tauMs: 86_400_000 });
    b.update([{ id: 'b0', address: '127.0.0.1:7000' }]);
    const registry = new Registry();
    collectMetrics(b, { registry });
    const server = new MetricsServer({ registry });
    const { port } = await server.listen();
    const cmd = `${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} top --metrics http://127.0.0.1:${port} --interval 100ms`;
    const child = spawn('script', ['-qfec', cmd, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    try {
      await until(() => out.split('\x1b[H').length >= 6, 'four frames on the pty', 15_000);
    } finally {
      process.kill(-child.pid!, 'SIGKILL');
      await server.close();
      b.close();
    }
    expect(out.startsWith('\x1b[H\x1b[2J\x1b[H')).toBe(true);
    // Frames after the first: each starts at home and ends by clearing what is below it.
    const frames = out.split('\x1b[H').slice(2, -1);
    expect(frames.length).toBeGreaterThanOrEqual(2);
    for (const f of frames) {
      expect(f).toMatch(/^poise top {2}http:\/\/127\.0\.0\.1:\d+\/metrics {2}every 100 ms/);
      expect(f).toMatch(/BACKEND +PRIO +STATE/);
      expect(f).toMatch(/b0 +0 +ready +0 +0 +50\.0/);
      expect(f.endsWith('\x1b[J')).toBe(true);
    }
  });

  it('--redis URL --cluster NAME --once: state per backend from the membership; the load columns say "-"', async () => {
    const pub = new MembershipPublisher({ url: redis.url, cluster: 'topc', logger });
    try {
      await pub.apply({
        cluster: 'topc',
        backends: [
          { id: 'x', address: '127.0.0.1:7100', status: 'draining' },
          { id: 'y', address: '127.0.0.1:7101', priority: 2, role: 'replica' },
        ],
      });
      const r = await runCli(['top', '--redis', redis.url, '--cluster', 'topc', '--once']);
      expect([r.code, r.stderr]).toEqual([0, '']);
      expect(r.stdout.split('\n')[0]).toMatch(
        /^poise top {2}cluster topc {2}version 1 {2}lineage [0-9a-f]{32} {2}\(membership only: load columns need --metrics\)$/,
      );
      expect(cells(r.stdout)).toEqual([
        [
          'BACKEND',
          'PRIO',
          'STATE',
          'CONNS',
          'INFLIGHT',
          'EWMA_MS',
          'SHARE_%',
          'EJECTIONS',
          'ROLE',
          'LAG_MS',
          'RAMP_%',
          'REPORTED_W',
          'AGENT',
        ],
        ['x', '0', 'draining', '-', '-', '-', '-', '-', '-', '-', '-', '-', '-'],
        ['y', '2', 'ready', '-', '-', '-', '-', '-', 'replica', '-', '-', '-', '-'],
      ]);
    } finally {
      await pub.close();
    }
  });

  it('$POISE_REDIS_URL and $POISE_CLUSTER stand in for --redis and --cluster, as for poise members; the flags win over them', async () => {
    const pub = new MembershipPublisher({ url: redis.url, cluster: 'topenv', logger });
    try {
      await pub.apply({ cluster: 'topenv', backends: [{ id: 'e', address: '127.0.0.1:7200' }] });
      const help = (await runCli(['top', '--help'])).stdout;
      for (const says of ['default $POISE_REDIS_URL', 'default $POISE_CLUSTER', 'BACKEND, PRIO, STATE (its status) and ROLE'])
        expect(help.replace(/\s+/g, ' ')).toContain(says);
      const env = { POISE_REDIS_URL: redis.url, POISE_CLUSTER: 'topenv' };
      const r = await runCli(['top', '--once'], '', env);
      expect([r.code, r.stderr]).toEqual([0, '']);
      expect(r.stdout.split('\n')[0]).toMatch(/^poise top {2}cluster topenv {2}version 1 /);
      expect(cells(r.stdout).slice(1)).toEqual([['e', '0', 'ready', '-', '-', '-', '-', '-', '-', '-', '-', '-', '-']]);
      // --cluster over $POISE_CLUSTER: a cluster with nothing stored is named.
      const other = await runCli(['top', '--once', '--cluster', 'nothing-here'], '', env);
      expect([other.code, other.stderr]).toEqual([EXIT.notFound, 'poise top: no membership stored for cluster "nothing-here"\n']);
      // Without either, the usage error says so.
      expect(await runCli(['top', '--once'], '', { POISE_REDIS_URL: redis.url, POISE_CLUSTER: '' })).toMatchObject({
        code: 2,
        stderr: expect.stringContaining('--cluster: required with --redis (or set POISE_CLUSTER)'),
      });
    } finally {
      await pub.close();
    }
  });

  it('usage errors name the flag (exit 2); an unreachable --metrics is exit 1 naming the URL', async () => {
    expect(await runCli(['top'])).toMatchObject({ code: 2, stderr: expect.stringContaining('give exactly one of --metrics and --redis') });
    expect(await runCli(['top', '--metrics', 'ftp://x'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--metrics: must be an http:// URL, got "ftp://x"'),
    });
    expect(await runCli(['top', '--redis', redis.url])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--cluster: required with --redis'),
    });
    expect(await runCli(['top', '--metrics', 'http://127.0.0.1:1', '--interval', '5ms'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--interval'),
    });
    const down = await runCli(['top', '--metrics', 'http://127.0.0.1:1/metrics', '--once', '--interval', '100ms']);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain('--metrics: cannot scrape http://127.0.0.1:1/metrics');
  });
});

describe('poise top --once against a hostile endpoint', () => {
  it('--max-bytes: an endless body fails the command with the cap in the message (exit 3)', async () => {
    const url = await serve(endless);
    const r = await runCli(['top', '--metrics', url, '--once', '--interval', '100ms', '--max-bytes', '65536']);
    expect(r.stderr).toBe(`poise top: --metrics: the body of ${url} exceeds the limit of 65536 bytes\n`);
    expect(r.code).toBe(3);
  });

  it('--timeout: headers, then a body that never ends, fails the command at the timeout (exit 1)', async () => {
    const url = await serve(trickle);
    const r = await runCli(['top', '--metrics', url, '--once', '--interval', '100ms', '--timeout', '300ms']);
    expect(r.stderr).toBe(
      `poise top: --metrics: ${url} did not answer within 300 ms (--timeout covers the request, the body and the parse)\n`,
    );
    expect(r.code).toBe(1);
  });

  it('--timeout and --max-bytes are validated and belong to --metrics', async () => {
    expect(await runCli(['top', '--metrics', 'http://127.0.0.1:1', '--timeout', '5ms'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--timeout: must be a duration in [100ms, 10m]'),
    });
    expect(await runCli(['top', '--metrics', 'http://127.0.0.1:1', '--max-bytes', '10'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--max-bytes: must be an integer in [1024, 1073741824], got "10"'),
    });
    expect(await runCli(['top', '--redis', 'redis://127.0.0.1:1', '--cluster', 'c', '--timeout', '1s'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--timeout and --max-bytes go with --metrics, not --redis'),
    });
  });
});

describe('poise top --redis: the fleet watcher line', () => {
  it('names the holder, its token and the lease left; says when none holds it; nothing when none was ever elected', () => {
    expect(fleetWatcherLines({ holder: undefined, lastToken: 0 })).toEqual([]);
    expect(fleetWatcherLines({ holder: { token: 3, id: 'web-1:42 dns:api.internal:8080', ttlMs: 12_345 }, lastToken: 3 })).toEqual([
      'fleet watcher: web-1:42 dns:api.internal:8080  token 3  lease 12.3 s left',
    ]);
    expect(fleetWatcherLines({ holder: undefined, lastToken: 4 })).toEqual([
      'fleet watcher: none holds the lease (last token 4): no discovery change reaches Redis until one is elected',
    ]);
  });
});
