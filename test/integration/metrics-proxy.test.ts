/**
 * Metrics of a running proxy under load from two worker threads: a TcpProxy
 * in this thread (clients spliced through it) and two real worker threads,
 * each with its own Router on the same Balancer, holding TCP connections
 * opened with connect(). The backends are real TCP servers that count the
 * connections they hold; every scrape goes over HTTP to a MetricsServer and
 * is parsed by the strict text-format parser.
 */
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { collectMetrics } from '../../src/metrics/collect.js';
import { MetricsServer } from '../../src/metrics/server.js';
import { parseMetricsText, type MetricFamily } from '../../src/metrics/text-format.js';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { ProxyCounters } from '../../src/proxy/counters.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A backend that counts the connections open on it now and echoes bytes. */
async function countingBackend(): Promise<{ port: number; open: () => number }> {
  let open = 0;
  const server = net.createServer((s) => {
    open++;
    s.on('data', (d) => s.write(d));
    s.on('error', () => {});
    s.on('close', () => open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return { port: (server.address() as net.AddressInfo).port, open: () => open };
}

async function scrape(port: number): Promise<{ text: string; families: Map<string, MetricFamily>; contentType: string | null }> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  return { text, families: parseMetricsText(text), contentType: res.headers.get('content-type') };
}

function value(families: Map<string, MetricFamily>, name: string, labels: Record<string, string>): number | undefined {
  // A histogram's _bucket/_sum/_count samples live in the family of the base name.
  const f = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ''));
  const s = f?.samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  return s?.value;
}

function holder(balancer: Balancer, hold: number): Promise<{ worker: Worker; perBackend: Record<string, number> }> {
  const worker = new Worker(new URL('../fixtures/metrics-holder.mjs', import.meta.url), {
    workerData: { attachment: balancer.attachment(), hold },
  });
  balancer.watchWorker(worker);
  cleanups.push(() => worker.terminate().then(() => undefined));
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (m: { kind: string; perBackend: Record<string, number> }) => resolve({ worker, perBackend: m.perBackend }));
  });
}

function client(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
}

describe('metrics of a running proxy and two router worker threads', () => {
  it('the per-backend connection gauge equals what each backend counts, across threads, in every scrape of 5 load rounds; proxy counters match the clients', async () => {
    const backends = [await countingBackend(), await countingBackend(), await countingBackend()];
    const balancer = new Balancer({ logger });
    cleanups.push(() => balancer.close());
    balancer.update(
      backends.map((b, i) => ({
        id: `b${i}`,
        address: `127.0.0.1:${b.port}`,
        priority: i === 2 ? 1 : 0,
        locality: i === 1 ? 'zone "b"\\1' : 'zone-a',
      })),
    );
    const counters = ProxyCounters.create({ workers: 1 });
    const proxy = new TcpProxy({ router: balancer.router({ policy: 'p2c:connections' }), counters, logger });
    await proxy.listen();
    cleanups.push(async () => {
      await proxy.close();
    });
    const registry = new Registry();
    collectMetrics(balancer, { registry, cluster: 'api', proxy: counters });
    const server = new MetricsServer({ registry, notReady: () => (balancer.hasMembership && proxy.listening ? undefined : 'not ready') });
    const { port } = await server.listen();
    cleanups.push(() => server.close());

    // Two worker threads with their own routers hold 7 and 5 connections.
    const [w1, w2] = await Promise.all([holder(balancer, 7), holder(balancer, 5)]);
    const clients: net.Socket[] = [];
    cleanups.push(() => {
      for (const c of clients) c.destroy();
    });
    let sent = 0;
    for (let round = 0; round < 5; round++) {
      // Each round adds 4 clients through the proxy and echoes a few bytes on each.
      for (let k = 0; k < 4; k++) {
        const c = await client(proxy.address().port);
        clients.push(c);
        const msg = `round ${round} client ${k}\n`;
        const echoed = new Promise<void>((r) => c.once('data', () => r()));
        c.write(msg);
        sent += msg.length;
        await echoed;
      }
      const total = 12 + clients.length;
      await until(() => backends.reduce((a, b) => a + b.open(), 0) === total, `backends holding ${total}`);
      const { families, contentType } = await scrape(port);
      expect(contentType).toBe(registry.contentType);
      backends.forEach((b, i) => {
        expect(value(families, 'poise_backend_connections', { cluster: 'api', backend: `b${i}` }), `b${i} in round ${round}`).toBe(
          b.open(),
        );
      });
      expect(value(families, 'poise_proxy_accepted_total', { worker: '0' })).toBe(clients.length);
      expect(value(families, 'poise_proxy_active_connections', { worker: '0' })).toBe(clients.length);
      expect(value(families, 'poise_proxy_bytes_total', { direction: 'in' })).toBe(sent);
      expect(value(families, 'poise_proxy_bytes_total', { direction: 'out' })).toBe(sent);
    }
    // The workers' own view agrees with the backends' (their connections are part of each gauge).
    const held = { ...w1.perBackend };
    for (const [id, n] of Object.entries(w2.perBackend)) held[id] = (held[id] ?? 0) + n;
    expect(Object.values(held).reduce((a, n) => a + n, 0)).toBe(12);
    // The label with a quote and a backslash survives the text format.
    const { families } = await scrape(port);
    expect(value(families, 'poise_backend_connections', { backend: 'b1', locality: 'zone "b"\\1' })).toBe(backends[1]!.open());

    // Clients leave: duration histogram counts every spliced connection; workers close: gauges drop to 0.
    for (const c of clients) c.destroy();
    w1.worker.postMessage('close');
    w2.worker.postMessage('close');
    await until(() => backends.every((b) => b.open() === 0), 'backends at 0');
    await until(
      async () => value((await scrape(port)).families, 'poise_proxy_active_connections', { worker: '0' }) === 0,
      'proxy active 0',
    );
    const after = (await scrape(port)).families;
    backends.forEach((_b, i) => {
      expect(value(after, 'poise_backend_connections', { backend: `b${i}` })).toBe(0);
    });
    expect(value(after, 'poise_proxy_connection_duration_seconds_count', {})).toBe(20);
    expect(value(after, 'poise_proxy_connection_duration_seconds_bucket', { le: '+Inf' })).toBe(20);
  });

  it('a backend ejected by passive health shows state="ejected" and ejections_total 1 in the next scrape; ready again after the ejection ends', async () => {
    const balancer = new Balancer({ logger });
    cleanups.push(() => balancer.close());
    balancer.update([
      { id: 'good', address: '127.0.0.1:1' },
      { id: 'bad', address: '127.0.0.1:2' },
    ]);
    const registry = new Registry();
    collectMetrics(balancer, { registry });
    const server = new MetricsServer({ registry });
    const { port } = await server.listen();
    cleanups.push(() => server.close());
    const before = (await scrape(port)).families;
    expect(value(before, 'poise_backend_state', { backend: 'bad', state: 'ready' })).toBe(1);
    expect(value(before, 'poise_backend_state', { backend: 'bad', state: 'ejected' })).toBe(0);
    const router = balancer.router({ policy: 'round-robin', ejection: { consecutiveFailures: 3, baseMs: 400, maxMs: 400 } });
    let failures = 0;
    while (failures < 3) {
      const l = router.acquire({ exclude: ['good'] });
      l.release('failure');
      failures++;
    }
    const ejected = (await scrape(port)).families;
    expect(value(ejected, 'poise_backend_state', { backend: 'bad', state: 'ejected' })).toBe(1);
    expect(value(ejected, 'poise_backend_state', { backend: 'bad', state: 'ready' })).toBe(0);
    expect(value(ejected, 'poise_backend_ejections_total', { backend: 'bad' })).toBe(1);
    expect(value(ejected, 'poise_backend_consecutive_ejections', { backend: 'bad' })).toBe(1);
    const left = value(ejected, 'poise_backend_ejection_remaining_seconds', { backend: 'bad' })!;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(0.4);
    expect(value(ejected, 'poise_backend_state', { backend: 'good', state: 'ready' })).toBe(1);
    await until(
      async () => value((await scrape(port)).families, 'poise_backend_state', { backend: 'bad', state: 'ready' }) === 1,
      'ejection over',
    );
    const later = (await scrape(port)).families;
    expect(value(later, 'poise_backend_ejection_remaining_seconds', { backend: 'bad' })).toBe(0);
    // The total survives the end of the ejection (it is a counter).
    expect(value(later, 'poise_backend_ejections_total', { backend: 'bad' })).toBe(1);
  });

  it('scraping while two worker threads hammer acquire/release: 100 scrapes all parse, every gauge stays within what the threads can hold; exact 0 after they exit', async () => {
    const balancer = new Balancer({ logger });
    cleanups.push(() => balancer.close());
    balancer.update(Array.from({ length: 4 }, (_, i) => ({ id: `h${i}`, address: `127.0.0.1:${7300 + i}` })));
    const registry = new Registry();
    collectMetrics(balancer, { registry });
    const hold = 6;
    const workers = [0, 1].map(
      () =>
        new Worker(new URL('../fixtures/worker-hammer.mjs', import.meta.url), {
          workerData: { attachment: balancer.attachment(), mode: 'spin', hold, policy: 'p2c' },
        }),
    );
    const exited = workers.map((w) => new Promise((r) => w.once('exit', r)));
    for (const w of workers) balancer.watchWorker(w);
    cleanups.push(() => Promise.all(workers.map((w) => w.terminate())).then(() => undefined));
    await Promise.all(workers.map((w) => new Promise((resolve, reject) => (w.once('error', reject), w.once('message', resolve)))));
    let picksBefore = 0;
    for (let i = 0; i < 100; i++) {
      const f = parseMetricsText(await registry.metrics());
      let held = 0;
      let picks = 0;
      for (const id of ['h0', 'h1', 'h2', 'h3']) {
        const c = value(f, 'poise_backend_connections', { backend: id })!;
        const r = value(f, 'poise_backend_requests_in_flight', { backend: id })!;
        expect(c).toBeGreaterThanOrEqual(0);
        expect(r).toBeGreaterThanOrEqual(0);
        // One gauge sums one cell per thread, each read atomically: a thread's cell is at most what that thread
        // holds at the moment of the read (its `hold` leases plus at most 16 of its hammer's).
        expect(c).toBeLessThanOrEqual(2 * (hold + 16));
        expect(r).toBeLessThanOrEqual(2 * (hold + 16));
        held += c + r;
        picks += value(f, 'poise_backend_picks_total', { backend: id })!;
      }
      // The eight gauges are read one after another, not as one snapshot, so their sum is not bounded by what is held at
      // any one moment (a lease released after its backend was read and one taken on a backend read later count twice);
      // it is bounded by one thread-moment per cell read, and the spinning threads' own held leases never go away.
      expect(held).toBeLessThanOrEqual(8 * 2 * (hold + 16));
      // The `hold` leases each thread took first are never released: every scrape sees all of them.
      expect(held).toBeGreaterThanOrEqual(2 * hold);
      // A counter never goes backwards between scrapes.
      expect(picks).toBeGreaterThanOrEqual(picksBefore);
      picksBefore = picks;
      // The next scrape samples a later moment: the threads have picked since this one.
      await until(() => [0, 1, 2, 3].reduce((n, s) => n + balancer.table.stats(s).picks, 0) > picks, 'the threads to pick again');
    }
    expect(picksBefore).toBeGreaterThan(0);
    await Promise.all(workers.map((w) => w.terminate()));
    await Promise.all(exited);
    await until(() => balancer.reclaimStats().events === 2, 'both reclaims');
    const f = parseMetricsText(await registry.metrics());
    for (const id of ['h0', 'h1', 'h2', 'h3']) {
      expect(value(f, 'poise_backend_connections', { backend: id })).toBe(0);
      expect(value(f, 'poise_backend_requests_in_flight', { backend: id })).toBe(0);
    }
    expect(value(f, 'poise_reclaims_total', {})).toBe(2);
  });

  it('/healthz is 503 with the reason until a membership is in force and the listener is up, then 200; unknown paths 404, POST 405', async () => {
    const balancer = new Balancer({ logger });
    cleanups.push(() => balancer.close());
    const registry = new Registry();
    collectMetrics(balancer, { registry });
    let proxy: TcpProxy | undefined;
    const server = new MetricsServer({
      registry,
      notReady: () =>
        !balancer.hasMembership ? 'no membership in force' : proxy?.listening !== true ? 'the proxy listener is not up' : undefined,
    });
    const { port } = await server.listen();
    cleanups.push(() => server.close());
    const health = async () => {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      return [r.status, await r.text()];
    };
    expect(await health()).toEqual([503, 'not ready: no membership in force\n']);
    balancer.update([{ id: 'a', address: '127.0.0.1:1' }]);
    expect(await health()).toEqual([503, 'not ready: the proxy listener is not up\n']);
    proxy = new TcpProxy({ router: balancer.router(), logger });
    await proxy.listen();
    expect(await health()).toEqual([200, 'ok\n']);
    await proxy.close();
    expect(await health()).toEqual([503, 'not ready: the proxy listener is not up\n']);
    expect((await fetch(`http://127.0.0.1:${port}/nope`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST' })).status).toBe(405);
  });
});

describe('metrics of a worker thread that dies', () => {
  it('reclaims: a worker terminated holding 3 connection leases counts one reclaim event and 3 leases', async () => {
    const socks = new Set<net.Socket>();
    const server = net.createServer((sock) => (socks.add(sock), sock.on('error', () => {})));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const b = new Balancer({ logger });
    b.update([{ id: 'a', address: `127.0.0.1:${(server.address() as net.AddressInfo).port}` }]);
    const registry = new Registry();
    collectMetrics(b, { registry });
    const w = new Worker(new URL('../fixtures/metrics-holder.mjs', import.meta.url), {
      workerData: { attachment: b.attachment(), hold: 3 },
    });
    const reclaimed = new Promise((r) => b.once('reclaim', r));
    b.watchWorker(w);
    await new Promise((resolve, reject) => (w.once('error', reject), w.once('message', resolve)));
    expect(value(parseMetricsText(await registry.metrics()), 'poise_backend_connections', { backend: 'a' })).toBe(3);
    await w.terminate();
    await reclaimed;
    const f = parseMetricsText(await registry.metrics());
    expect(value(f, 'poise_reclaims_total', {})).toBe(1);
    expect(value(f, 'poise_reclaimed_leases_total', {})).toBe(3);
    expect(value(f, 'poise_backend_connections', { backend: 'a' })).toBe(0);
    for (const sock of socks) sock.destroy();
    await new Promise((r) => server.close(r));
  });
});
