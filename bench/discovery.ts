/**
 * Discovery: what a Kubernetes EndpointSlice event or a DNS record change
 * costs to reach a fleet, and what the fleet costs the API server or the DNS
 * server, with and without fleet mode.
 *
 *   node dist/bench/discovery.js [--quick] [--processes 8] [--threads 2] [--events 40] [--counts 1,8,64] [--window-s 30]
 *
 * The API server is the list/watch server of the tests
 * (test/helpers/kube-api.ts: TLS, resource versions, chunked watch events),
 * in this process; Redis is a private redis-server.
 *
 * 1. Event → routing: P processes (default 8), each a Balancer with T worker
 *    routers (default 2, bench/membership-worker.js). One sample = one
 *    EndpointSlice change (a pod with a new address joins): from just before
 *    the API server writes the event until every worker thread of every
 *    process routes with the membership that contains it. `fleet`: one
 *    watcher → Redis → every process's RedisMembership; `direct`: every
 *    process watches the API server itself.
 * 2. API-server load: N processes (1, 8, 64; no worker threads) over a
 *    window (default 30 s) in which the API server "restarts" once (every
 *    connection dropped, history compacted: each watcher re-lists) and one
 *    event a second is written; requests (lists + watches) per minute and the
 *    most watches open at once.
 *
 * DNS (`dns:`, the same two measures): dnsmasq (test/helpers/dns-server.ts)
 * serving the name with a 1 s TTL (the source's floor: it asks again every
 * second); one sample = the hosts file rewritten with a new address (from
 * just before the rewrite until every worker thread routes by it: up to one
 * TTL of waiting is part of it); load = the queries the DNS server receives
 * per minute (A and AAAA each count) with one change a second.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { startDnsServer, type TestDns } from '../test/helpers/dns-server.js';
import { startKubeApi, writeKubeconfig, type TestKubeApi } from '../test/helpers/kube-api.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { ownRedis, summary } from './lib/redis.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const quick = process.argv.includes('--quick');
const PROCESSES = Number(arg('processes') ?? 8);
const THREADS = Number(arg('threads') ?? 2);
const EVENTS = Number(arg('events') ?? (quick ? 10 : 40));
const COUNTS = (arg('counts') ?? (quick ? '1,8' : '1,8,64')).split(',').map(Number);
const WINDOW_S = Number(arg('window-s') ?? (quick ? 10 : 30));
const MARKER = '10.9.';
const now = (): number => performance.timeOrigin + performance.now();

interface Msg {
  kind: string;
  marker?: string;
  t?: number;
}

/** P forked processes, and the times each reported routing by each marker. */
class Fleet {
  readonly children: ChildProcess[] = [];
  readonly #routed = new Map<string, number[]>();
  #waiters: (() => void)[] = [];

  async start(n: number, cfg: Record<string, unknown>): Promise<void> {
    const ready: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const child = fork(new URL('./discovery-process.js', import.meta.url), [JSON.stringify(cfg)], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      this.children.push(child);
      ready.push(
        new Promise((resolve, reject) => {
          child.on('message', (m: Msg) => {
            if (m.kind === 'ready') resolve();
            if (m.kind === 'routed' && m.marker !== undefined) {
              const list = this.#routed.get(m.marker) ?? [];
              list.push(m.t!);
              this.#routed.set(m.marker, list);
              for (const w of this.#waiters.splice(0)) w();
            }
          });
          child.once('exit', (code) => reject(new Error(`a discovery process exited with ${code}`)));
        }),
      );
    }
    await Promise.all(ready);
  }

  /** The last time any process reported routing by `marker`, once all `n` have. */
  async routedBy(marker: string, n: number): Promise<number> {
    for (;;) {
      const list = this.#routed.get(marker) ?? [];
      if (list.length >= n) return Math.max(...list);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.send({ kind: 'stop' });
            setTimeout(() => c.kill('SIGKILL'), 10_000).unref();
          }),
      ),
    );
  }
}

const base = [
  { ip: '10.0.0.1', ready: true, zone: 'a' },
  { ip: '10.0.0.2', ready: true, zone: 'b' },
];
let eventNo = 0;
/** The next event: the two base pods and one new pod whose address marks this event. */
function nextEvent(api: TestKubeApi, cluster: string): string {
  eventNo++;
  const ip = `${MARKER}${eventNo >> 8}.${eventNo & 255}`;
  api.setSlice('shop', 'api-0', cluster, [...base, { ip, ready: true, zone: 'a' }]);
  return `${ip}:8080`;
}

/** A fresh API server with the service `cluster`, and `n` processes following it, each routing by a first event. */
async function run(
  mode: 'fleet' | 'direct',
  cluster: string,
  n: number,
  threads: number,
  url: string,
): Promise<{ api: TestKubeApi; cluster: string; fleet: Fleet }> {
  const api = await startKubeApi();
  nextEvent(api, cluster);
  const fleet = new Fleet();
  await fleet.start(n, {
    mode,
    url,
    cluster,
    kind: 'k8s',
    kubeconfig: writeKubeconfig(api),
    dnsServer: '',
    target: `shop/${cluster}:http`,
    threads,
    markerPrefix: MARKER,
  });
  // The first membership in every process (in fleet mode, the one the elected watcher publishes).
  await fleet.routedBy(nextEvent(api, cluster), n);
  return { api, cluster, fleet };
}

async function eventToRouting(mode: 'fleet' | 'direct', url: string): Promise<Record<string, unknown>> {
  progress(`event → routing, ${mode}: starting ${PROCESSES} processes x ${THREADS} worker threads`);
  const { api, cluster, fleet } = await run(mode, `lat-${mode}`, PROCESSES, THREADS, url);
  const stats = await sampleRouting(`event → routing, ${mode}`, fleet, () => nextEvent(api, cluster));
  await fleet.stop();
  const watches = api.counts.watches;
  await api.stop();
  return { mode, ...stats, apiWatches: watches };
}

/** EVENTS samples: from just before each change until every worker thread of every process routes by it. */
async function sampleRouting(label: string, fleet: Fleet, change: () => string | Promise<string>): Promise<Record<string, number>> {
  const ms: number[] = [];
  for (let i = 0; i < EVENTS; i++) {
    progress(`${label}: change ${i + 1}/${EVENTS}`);
    const t0 = now();
    const marker = await change();
    ms.push((await fleet.routedBy(marker, PROCESSES)) - t0);
  }
  const s = summary(ms);
  return { processes: PROCESSES, threads: THREADS, events: EVENTS, p50Ms: round(s.p50), p99Ms: round(s.p99), maxMs: round(s.max) };
}

async function apiLoad(mode: 'fleet' | 'direct', n: number, url: string): Promise<Record<string, unknown>> {
  progress(`API load, ${mode}, ${n} processes: starting`);
  const { api, cluster, fleet } = await run(mode, `load-${mode}-${n}`, n, 0, url);
  const before = { ...api.counts };
  let maxWatches = api.openWatches;
  const start = now();
  const port = api.port;
  for (let s = 0; s < WINDOW_S; s++) {
    progress(`API load, ${mode}, ${n} processes: ${s + 1}/${WINDOW_S} s`);
    if (s === Math.floor(WINDOW_S / 3)) {
      // An API server restart: every connection dropped, a change while it is down, the history compacted past
      // what the watchers saw (a resumed watch gets 410 Gone: each watcher re-lists).
      await api.stopListening();
      nextEvent(api, cluster);
      api.compact();
      await api.listen(port);
    }
    nextEvent(api, cluster);
    await new Promise((r) => setTimeout(r, 1000));
    maxWatches = Math.max(maxWatches, api.openWatches);
  }
  const minutes = (now() - start) / 60_000;
  const lists = api.counts.lists - before.lists;
  const watches = api.counts.watches - before.watches;
  await fleet.stop();
  await api.stop();
  return {
    mode,
    processes: n,
    'lists/min': round(lists / minutes),
    'watches/min': round(watches / minutes),
    'requests/min': round((lists + watches) / minutes),
    'max open watches': maxWatches,
  };
}

/** A fresh dnsmasq serving `<cluster>.test` (1 s TTL), and `n` processes following `dns:<cluster>.test:8080`, each routing by a first change. */
async function runDns(
  mode: 'fleet' | 'direct',
  cluster: string,
  n: number,
  threads: number,
  url: string,
): Promise<{ dns: TestDns; next: () => Promise<string>; fleet: Fleet }> {
  const name = `${cluster}.test`;
  const dns = await startDnsServer({ hosts: { [name]: ['10.0.0.1', '10.0.0.2'] }, ttl: 1 });
  let no = 0;
  /** The next change: the two base addresses and one new one that marks it; resolves once dnsmasq answers it. */
  const next = async (): Promise<string> => {
    no++;
    const ip = `${MARKER}${no >> 8}.${no & 255}`;
    await dns.setHosts({ [name]: ['10.0.0.1', '10.0.0.2', ip] });
    return `${ip}:8080`;
  };
  await next();
  const fleet = new Fleet();
  await fleet.start(n, {
    mode,
    url,
    cluster,
    kind: 'dns',
    kubeconfig: '',
    dnsServer: dns.server,
    target: `dns:${name}:8080`,
    threads,
    markerPrefix: MARKER,
  });
  await fleet.routedBy(await next(), n);
  return { dns, next, fleet };
}

async function dnsToRouting(mode: 'fleet' | 'direct', url: string): Promise<Record<string, unknown>> {
  progress(`DNS change → routing, ${mode}: starting ${PROCESSES} processes x ${THREADS} worker threads`);
  const { dns, next, fleet } = await runDns(mode, `dlat-${mode}`, PROCESSES, THREADS, url);
  const stats = await sampleRouting(`DNS change → routing, ${mode}`, fleet, next);
  await fleet.stop();
  await dns.stop();
  return { source: 'dns', mode, ...stats };
}

async function dnsLoad(mode: 'fleet' | 'direct', n: number, url: string): Promise<Record<string, unknown>> {
  progress(`DNS load, ${mode}, ${n} processes: starting`);
  const { dns, next, fleet } = await runDns(mode, `dload-${mode}-${n}`, n, 0, url);
  const before = dns.queries;
  const start = now();
  for (let s = 0; s < WINDOW_S; s++) {
    progress(`DNS load, ${mode}, ${n} processes: ${s + 1}/${WINDOW_S} s`);
    await next();
    await new Promise((r) => setTimeout(r, 1000));
  }
  const minutes = (now() - start) / 60_000;
  const queries = dns.queries - before;
  await fleet.stop();
  await dns.stop();
  return { source: 'dns', mode, processes: n, 'queries/min': round(queries / minutes) };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

async function main(): Promise<void> {
  const redis = await ownRedis();
  const load = [loadavg()[0]];
  const latency: Record<string, unknown>[] = [];
  for (const mode of ['fleet', 'direct'] as const) latency.push(await eventToRouting(mode, redis.url));
  const queries: Record<string, unknown>[] = [];
  for (const n of COUNTS) for (const mode of ['fleet', 'direct'] as const) queries.push(await apiLoad(mode, n, redis.url));
  const dnsLatency: Record<string, unknown>[] = [];
  for (const mode of ['fleet', 'direct'] as const) dnsLatency.push(await dnsToRouting(mode, redis.url));
  const dnsQueries: Record<string, unknown>[] = [];
  for (const n of COUNTS) for (const mode of ['fleet', 'direct'] as const) dnsQueries.push(await dnsLoad(mode, n, redis.url));
  load.push(loadavg()[0]);
  progressDone();
  console.log(`\nEndpointSlice event → every worker thread of ${PROCESSES} processes routing by it (ms)\n`);
  console.log(formatTable(latency));
  console.log(`\nAPI-server queries per minute (${WINDOW_S} s window with one API-server restart, one event a second)\n`);
  console.log(formatTable(queries));
  console.log(`\nDNS record change → every worker thread of ${PROCESSES} processes routing by it (ms; 1 s TTL)\n`);
  console.log(formatTable(dnsLatency));
  console.log(`\nDNS queries per minute (${WINDOW_S} s window, one change a second, 1 s TTL)\n`);
  console.log(formatTable(dnsQueries));
  console.log(`\nload average (1 min) at start / end: ${load.map((l) => l?.toFixed(2)).join(' / ')}`);
  const file = writeResults('discovery', { quick, latency, queries, dnsLatency, dnsQueries, loadavg1m: load, windowS: WINDOW_S });
  console.log(`results: ${file}`);
  redis.child.kill('SIGKILL');
  process.exit(0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
