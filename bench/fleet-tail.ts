/**
 * Fleet tail latency: the `probe` policy against the load-aware and blind
 * rules when many client processes share a fleet of backends (issue 43;
 * Prequal, NSDI '24; prequal-rs's 20-server comparison).
 *
 *   node dist/bench/fleet-tail.js [--quick] [--backends 20] [--hosts 4] [--clients 8] [--threads 2]
 *                                 [--loads 0.5,0.7,0.9] [--duration-ms 10000] [--concurrency 2] [--service-ms 20]
 *                                 [--scenarios antagonist,heterogeneous,staleness] [--seed 1]
 *
 * Loopback; the backends live in `hosts` child processes (bench/fleet-tail-backend.ts: independent
 * event loops), each backend a queue with `concurrency` slots and exponential service times (mean
 * `service-ms`), behind poise-lb/probe-server. `clients` child processes (bench/fleet-tail-client.ts)
 * × `threads` threads send open-loop Poisson traffic at `load` × the fleet's nominal capacity.
 *
 * Scenarios:
 * - antagonist: at random times (exponential gaps, mean 2 s) 2 random backends run 5× slower for 2 s;
 * - heterogeneous: a quarter of the backends (5 of 20) run at half speed throughout;
 * - staleness: the antagonist with `probe` only, its age limit at 0, 10, 50, 200 ms.
 * Systems: probe, p2c:latency, p2c:requests, round-robin, ORCA-weighted round robin (`health.orca`
 * from the responses' `endpoint-load-metrics`). Figures: p50 / p99 / p99.9 latency (ms), the largest
 * backend's p99 of requests in flight (sampled every 5 ms), probe traffic as % of requests.
 *
 * `--quick` (under a minute on 2 loaded cores): 10 backends on 2 hosts, 2 clients, load 0.7, 1.5 s runs,
 * the antagonist with every system and staleness at 50 ms. The figures count only from a
 * quiet machine (docs/benchmarks.md).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Rng } from '../src/core/rng.js';
import type { ClientConfig } from './fleet-tail-client.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? def : process.argv[i + 1]!;
}
const quick = process.argv.includes('--quick');
const BACKENDS = Number(arg('backends', quick ? '10' : '20'));
const HOSTS = Number(arg('hosts', quick ? '2' : '4'));
const CLIENTS = Number(arg('clients', quick ? '2' : '8'));
const THREADS = Number(arg('threads', '2'));
const LOADS = arg('loads', quick ? '0.7' : '0.5,0.7,0.9')
  .split(',')
  .map(Number);
const DURATION_MS = Number(arg('duration-ms', quick ? '1500' : '10000'));
const CONCURRENCY = Number(arg('concurrency', '2'));
const SERVICE_MS = Number(arg('service-ms', '20'));
const SCENARIOS = arg('scenarios', 'antagonist,heterogeneous,staleness').split(',');
const STALENESS_AGES = quick ? [50] : [0, 10, 50, 200];
const rng = new Rng(BigInt(arg('seed', '1')));

interface System {
  name: string;
  policy: string;
  health: Record<string, unknown>;
}

const SYSTEMS: System[] = [
  { name: 'probe', policy: 'probe', health: { probe: {} } },
  { name: 'p2c:latency', policy: 'p2c:latency', health: {} },
  { name: 'p2c:requests', policy: 'p2c:requests', health: {} },
  { name: 'round-robin', policy: 'round-robin', health: {} },
  {
    name: 'orca-wrr',
    policy: 'round-robin',
    health: { orca: { source: 'responses', intervalMs: 250, blackoutMs: 1000, expiryMs: 3000 } },
  },
];

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

/** Forks a child and resolves with its first message. */
function start<T>(file: string, config: unknown): { child: ChildProcess; first: Promise<T> } {
  const child = fork(here(file), [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const first = new Promise<T>((resolve, reject) => {
    child.once('message', (m) => resolve(m as T));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
  });
  return { child, first };
}

/** Sends `m` to `child` and resolves with its answer. */
function ask<T>(child: ChildProcess, m: unknown): Promise<T> {
  return new Promise((resolve) => {
    child.once('message', (r) => resolve(r as T));
    child.send(m as never);
  });
}

const perHost = Math.ceil(BACKENDS / HOSTS);
const hosts = await Promise.all(
  Array.from({ length: HOSTS }, (_, h) =>
    start<{ ports: number[] }>('./fleet-tail-backend.js', {
      servers: Math.min(perHost, BACKENDS - h * perHost),
      concurrency: CONCURRENCY,
      serviceMs: SERVICE_MS,
    }),
  ),
);
const hostPorts = await Promise.all(hosts.map((h) => h.first));
const ports = hostPorts.flatMap((h) => h.ports);

/** Sets every backend's slowdown (`factors` in backend order). */
async function slow(factors: number[]): Promise<void> {
  let k = 0;
  await Promise.all(
    hosts.map((h, i) => {
      const n = hostPorts[i]!.ports.length;
      const slice = factors.slice(k, k + n);
      k += n;
      return ask(h.child, { kind: 'slow', factors: slice });
    }),
  );
}

/** The antagonist: until `until`, at exponential gaps (mean 2 s), 2 random backends 5× slower for 2 s. */
async function antagonist(until: number): Promise<void> {
  const slowUntil = new Array<number>(BACKENDS).fill(0);
  let nextEvent = Date.now() + -Math.log(1 - rng.float()) * 2000;
  while (Date.now() < until) {
    const now = Date.now();
    if (now >= nextEvent) {
      for (let k = 0; k < 2; k++) slowUntil[rng.below(BACKENDS)] = now + 2000;
      nextEvent = now + -Math.log(1 - rng.float()) * 2000;
    }
    await slow(slowUntil.map((t) => (t > now ? 5 : 1)));
    await new Promise((r) => setTimeout(r, 50));
  }
  await slow(new Array<number>(BACKENDS).fill(1));
}

function percentile(sorted: Float64Array, q: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** One run: every client at its share of `load` × capacity, the scenario's slowdowns, the figures. */
async function run(scenario: string, load: number, system: System): Promise<Record<string, unknown>> {
  const halfSpeed = scenario === 'heterogeneous' ? Math.floor(BACKENDS / 4) : 0;
  const factors = Array.from({ length: BACKENDS }, (_, i) => (i < halfSpeed ? 2 : 1));
  const capacity = factors.reduce((a, f) => a + (CONCURRENCY * 1000) / (SERVICE_MS * f), 0);
  await slow(factors);
  await Promise.all(hosts.map((h) => ask(h.child, { kind: 'stats' })));
  const config: ClientConfig = {
    ports,
    policy: system.policy,
    health: system.health,
    rate: (load * capacity) / CLIENTS,
    durationMs: DURATION_MS,
    threads: THREADS,
  };
  const clients = Array.from({ length: CLIENTS }, () => start<{ latencies: number[]; errors: number }>('./fleet-tail-client.js', config));
  const slowing = scenario === 'heterogeneous' ? Promise.resolve() : antagonist(Date.now() + DURATION_MS);
  const results = await Promise.all(clients.map((c) => c.first));
  await slowing;
  const stats = await Promise.all(
    hosts.map((h) => ask<{ probes: number; requests: number; inflightP99: number[] }>(h.child, { kind: 'stats' })),
  );
  const latencies = Float64Array.from(results.flatMap((r) => r.latencies)).sort();
  const probes = stats.reduce((a, s) => a + s.probes, 0);
  const requests = stats.reduce((a, s) => a + s.requests, 0);
  return {
    scenario,
    load,
    system: system.name,
    requests: latencies.length,
    errors: results.reduce((a, r) => a + r.errors, 0),
    'p50 ms': percentile(latencies, 0.5),
    'p99 ms': percentile(latencies, 0.99),
    'p99.9 ms': percentile(latencies, 0.999),
    'in-flight p99 (worst backend)': Math.max(...stats.flatMap((s) => s.inflightP99)),
    'probe %': requests === 0 ? 0 : (100 * probes) / requests,
  };
}

const rows: Record<string, unknown>[] = [];
for (const scenario of SCENARIOS) {
  for (const load of LOADS) {
    const systems =
      scenario === 'staleness'
        ? STALENESS_AGES.map((age) => ({ name: `probe age ${age} ms`, policy: 'probe', health: { probe: { maxAgeMs: age } } }))
        : quick && scenario !== 'antagonist'
          ? []
          : SYSTEMS;
    for (const system of systems) {
      progress(`fleet-tail: ${scenario}, load ${load}, ${system.name}`);
      rows.push(await run(scenario, load, system));
    }
  }
}
progressDone();
console.log(formatTable(rows));
const file = writeResults(quick ? 'fleet-tail-quick' : 'fleet-tail', {
  config: { BACKENDS, HOSTS, CLIENTS, THREADS, LOADS, DURATION_MS, CONCURRENCY, SERVICE_MS, SCENARIOS, quick },
  rows,
});
console.log(`results: ${file}`);
for (const h of hosts) h.child.disconnect();
