/**
 * bench/http: per-request HTTP routing, the poise dispatcher (`poise-lb/http`)
 * beside undici's BalancedPool and a Pool per backend chosen at random, on 4
 * loopback Node HTTP backends (a child process of their own).
 *
 *   npm run bench:http [-- --duration 10s] [--warmup 3s] [--concurrency N]
 *                      [--threads 1,2] [--scenarios slow,turns-slow,errors,overhead]
 *                      [--systems NAME,...] [--note TEXT] [--dry-run]
 *
 * Scenarios (fast backends answer after 1 ms, a slow one after 10 ms):
 * - slow: backend b0 10× slower for the whole run.
 * - turns-slow: b0 as fast as the others for the first half of the measured
 *   run, then 10× slower; its share is reported for the second half.
 * - errors: b3 answers 503 to 5 % of its requests.
 * - overhead: one backend answering at once; poise (round-robin over that
 *   one backend) against a plain undici Pool to it: the client CPU per
 *   request is the dispatcher's overhead (target ≤ 1.15× the Pool's).
 * Systems: poise p2c:latency, poise p2c:requests, poise round-robin,
 * BalancedPool, random Pool (and Pool in `overhead`). `--systems` lists the
 * rows to run instead, in that order, and may name variants of a poise
 * system: `poise p2c:latency ratio=2 tau=10000` (the router's `latencyRatio`,
 * the balancer's `tauMs` and `initialMs` as `init=MS`), e.g.
 *   --systems "poise p2c:latency,poise p2c:latency ratio=2,BalancedPool"
 * and `fast only` is a reference row: p2c:latency over the three fast
 * backends alone (what the backends allow without the slow one). Each runs closed-loop
 * clients (`--concurrency` requests in flight in all, default 32, split over
 * the threads) in 1 and 2 worker threads (`--threads`): `--warmup` (a
 * duration, default 3s: a fresh process routes by cost alone for its first
 * 1–2 s, docs/policies.md "The tail rule"), then `--duration` measured
 * (default 10s). Every
 * client thread of a poise system attaches its own router to one shared
 * table, as a service's workers would.
 *
 * Reported per row: req/s, p50 / p99 / p99.9 latency (ms), the slow
 * backend's share of requests (and, in `slow`, of the warm-up's: how a
 * fresh dispatcher converges), errors seen by the caller (exceptions and
 * 5xx), and the client process's CPU per request (µs, every thread, from
 * process.cpuUsage; the backends run in another process). The load average
 * at the start and the end is recorded: figures taken on a busy machine do
 * not reproduce. Results: bench/results/http.json (not with --dry-run).
 */
import { fork } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { durationFlag, integerFlag, parseFlags } from '../src/cli/args.js';
import { Balancer, createLogger } from '../src/runtime.js';
import type { ClientPlan, ClientReport } from './http-client.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { variantOf } from './lib/http-variant.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseFlags(process.argv.slice(2), {
  duration: { type: 'string' },
  warmup: { type: 'string' },
  concurrency: { type: 'string' },
  threads: { type: 'string' },
  scenarios: { type: 'string' },
  systems: { type: 'string' },
  note: { type: 'string' },
  'dry-run': { type: 'boolean' },
});
if (values.help) {
  process.stdout.write(
    `${fileURLToPath(import.meta.url)}\n${(await import('node:fs'))
      .readFileSync(fileURLToPath(import.meta.url), 'utf8')
      .split('*/')[0]!
      .replace(/^\/\*\*\n/, '')
      .replace(/^ \* ?/gm, '')}\n`,
  );
  process.exit(0);
}

const DURATION = (durationFlag('--duration', values.duration, 100, 3_600_000) ?? 10_000) / 1000;
const WARMUP = (durationFlag('--warmup', values.warmup, 0, 600_000) ?? 3000) / 1000;
const CONCURRENCY = integerFlag('--concurrency', values.concurrency, 1, 4096) ?? 32;
const FAST_MS = 1;
const SLOW_MS = 10;
const SCENARIOS = ['slow', 'turns-slow', 'errors', 'overhead'] as const;
type Scenario = (typeof SCENARIOS)[number];
const BALANCERS = ['poise p2c:latency', 'poise p2c:requests', 'poise round-robin', 'BalancedPool', 'random Pool'];

function list<T extends string>(flag: string, raw: string | undefined, allowed: readonly T[], fallback: readonly T[]): T[] {
  if (raw === undefined) return [...fallback];
  const got = raw.split(',').filter((x) => x !== '');
  for (const x of got)
    if (!allowed.includes(x as T)) throw new Error(`${flag}: must list some of ${allowed.join(', ')}, got ${JSON.stringify(x)}`);
  return got as T[];
}
const scenarios = list('--scenarios', values.scenarios, SCENARIOS, SCENARIOS);
const threadCounts = list('--threads', values.threads, ['1', '2'], ['1', '2']).map(Number);
const systemList = values.systems === undefined ? undefined : values.systems.split(',').filter((x) => x !== '');

for (const s of systemList ?? []) {
  if (variantOf(s) === undefined && !['BalancedPool', 'random Pool', 'Pool'].includes(s))
    throw new Error(`--systems: ${JSON.stringify(s)} is not a system (poise POLICY [opts], fast only, BalancedPool, random Pool, Pool)`);
}

type Row = {
  scenario: Scenario;
  system: string;
  threads: number;
  'req/s': number;
  p50: number;
  p99: number;
  p999: number;
  'slow %'?: number;
  /** slow: b0's share of the warm-up's requests (a fresh process converging). */
  'warm-up slow %'?: number;
  errors: number;
  'cpu µs/req': number;
};

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------ backends

const backend = fork(path.join(HERE, 'http-backend.js'), ['4'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
const ports = await new Promise<number[]>((resolve) => backend.once('message', (m: { ports: number[] }) => resolve(m.ports)));
const configure = (delaysMs: number[], errorRates: number[]): Promise<void> =>
  new Promise((resolve) => {
    backend.once('message', () => resolve());
    backend.send({ delaysMs, errorRates });
  });

// ------------------------------------------------------------------ one case

async function runCase(scenario: Scenario, system: string, threads: number): Promise<Row> {
  const servers = scenario === 'overhead' ? 1 : 4;
  const fast = scenario === 'overhead' ? 0 : FAST_MS;
  const delays = Array.from({ length: 4 }, (_, i) => (scenario === 'slow' && i === 0 ? SLOW_MS : fast));
  const errorRates = [0, 0, 0, scenario === 'errors' ? 0.05 : 0];
  await configure(delays, errorRates);
  // 'fast only': the three fast backends alone (b1..b3), the reference of what they allow.
  const used = system === 'fast only' ? ports.slice(1, servers) : ports.slice(0, servers);
  const first = system === 'fast only' ? 1 : 0;
  const origins = used.map((p) => `http://127.0.0.1:${p}`);
  const variant = variantOf(system);
  const balancer = new Balancer({ logger: createLogger({ level: 'silent' }), tauMs: variant?.tauMs, initialMs: variant?.initialMs });
  balancer.update(used.map((p, i) => ({ id: `b${i + first}`, address: `127.0.0.1:${p}` })));
  const control = new SharedArrayBuffer(8);
  const words = new Int32Array(control);
  const workers = Array.from({ length: threads }, (_, t) => {
    const share = Math.floor(CONCURRENCY / threads) + (t < CONCURRENCY % threads ? 1 : 0);
    const plan: ClientPlan = { system, attachment: balancer.attachment(), origins, concurrency: share, control };
    const w = new Worker(path.join(HERE, 'http-client.js'), { workerData: plan });
    balancer.watchWorker(w);
    return w;
  });
  const ready: Promise<unknown>[] = [];
  const reports = workers.map((w) => {
    ready.push(new Promise((resolve) => w.once('message', resolve)));
    return new Promise<ClientReport>((resolve, reject) => {
      w.on('message', (m: ClientReport | 'ready') => {
        if (m !== 'ready') resolve(m);
      });
      w.once('error', reject);
    });
  });
  await Promise.all(ready);
  await sleep(WARMUP * 1000);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  Atomics.store(words, 0, 1);
  if (scenario === 'turns-slow') {
    await sleep((DURATION * 1000) / 2);
    await configure([SLOW_MS, fast, fast, fast], errorRates);
    Atomics.store(words, 1, 1);
    await sleep((DURATION * 1000) / 2);
  } else {
    await sleep(DURATION * 1000);
  }
  Atomics.store(words, 0, 2);
  const seconds = (performance.now() - t0) / 1000;
  const done = await Promise.all(reports);
  const cpu = process.cpuUsage(cpu0);
  await Promise.all(workers.map((w) => w.terminate()));
  balancer.close();

  const requests = done.reduce((s, r) => s + r.requests, 0);
  const all = new Float64Array(done.reduce((s, r) => s + r.latenciesMs.length, 0));
  let k = 0;
  for (const r of done) {
    all.set(r.latenciesMs, k);
    k += r.latenciesMs.length;
  }
  all.sort();
  const phase = scenario === 'turns-slow' ? 1 : 0;
  // The slow backend's (b0) share, in %, of the requests one tally of each client counted.
  const slowShare = (tally: (r: ClientReport) => Record<string, number>): number => {
    let slow = 0;
    let total = 0;
    for (const r of done) {
      const t = tally(r);
      slow += t['b0'] ?? 0;
      for (const n of Object.values(t)) total += n;
    }
    return round((100 * slow) / Math.max(1, total), 1);
  };
  const row: Row = {
    scenario,
    system,
    threads,
    'req/s': Math.round(requests / seconds),
    p50: round(percentile(all, 0.5)),
    p99: round(percentile(all, 0.99)),
    p999: round(percentile(all, 0.999)),
    errors: done.reduce((s, r) => s + r.errors, 0),
    'cpu µs/req': round(((cpu.user + cpu.system) / Math.max(1, requests)) * 1, 1),
  };
  if (scenario === 'slow' || scenario === 'turns-slow') row['slow %'] = slowShare((r) => r.byBackend[phase]!);
  if (scenario === 'slow') row['warm-up slow %'] = slowShare((r) => r.warmup);
  return row;
}

// ------------------------------------------------------------------ the run

const loadStart = os.loadavg();
const rows: Row[] = [];
const cases: [Scenario, string, number][] = [];
for (const scenario of scenarios) {
  const systems = scenario === 'overhead' ? ['poise round-robin', 'Pool'] : (systemList ?? BALANCERS);
  for (const system of systems) {
    if (scenario === 'overhead' ? systemList !== undefined && !systemList.includes(system) : system === 'Pool') continue;
    for (const threads of threadCounts) cases.push([scenario, system, threads]);
  }
}
for (const [i, [scenario, system, threads]] of cases.entries()) {
  progress(`[${i + 1}/${cases.length}] ${scenario}: ${system}, ${threads} thread${threads > 1 ? 's' : ''} (${WARMUP} s + ${DURATION} s)`);
  rows.push(await runCase(scenario, system, threads));
}
progressDone();
const loadEnd = os.loadavg();
backend.disconnect();

process.stdout.write(`${formatTable(rows)}\n`);
const ratios: Record<string, unknown>[] = [];
const latencySystems = [
  ...new Set(rows.filter((r) => r.scenario === 'slow' && r.system.startsWith('poise p2c:latency')).map((r) => r.system)),
];
for (const threads of threadCounts) {
  const at = (scenario: Scenario, system: string): Row | undefined =>
    rows.find((r) => r.scenario === scenario && r.system === system && r.threads === threads);
  const balanced = at('slow', 'BalancedPool');
  const overhead = at('overhead', 'poise round-robin');
  const plain = at('overhead', 'Pool');
  for (const system of latencySystems.length > 0 ? latencySystems : ['poise p2c:latency']) {
    const poise = at('slow', system);
    ratios.push({
      threads,
      system,
      'slow: p99 poise/BalancedPool (≤ 0.5)': poise && balanced ? round(poise.p99 / balanced.p99) : undefined,
      'slow: req/s poise/BalancedPool (≥ 1.0)': poise && balanced ? round(poise['req/s'] / balanced['req/s']) : undefined,
      'slow: poise slow % (≤ 5)': poise?.['slow %'],
      'overhead: cpu poise/Pool (≤ 1.15)': overhead && plain ? round(overhead['cpu µs/req'] / plain['cpu µs/req']) : undefined,
    });
  }
}
process.stdout.write(`\n${formatTable(ratios)}\n`);
process.stdout.write(
  `load average ${loadStart.map((x) => x.toFixed(2)).join(' ')} at the start, ${loadEnd.map((x) => x.toFixed(2)).join(' ')} at the end\n`,
);
if (values['dry-run'] === true) {
  process.stdout.write('--dry-run: nothing written\n');
} else {
  const file = writeResults('http', {
    config: {
      durationS: DURATION,
      warmupS: WARMUP,
      concurrency: CONCURRENCY,
      fastMs: FAST_MS,
      slowMs: SLOW_MS,
      scenarios,
      threads: threadCounts,
    },
    loadAverage: { start: loadStart, end: loadEnd },
    note: values.note,
    rows,
    ratios,
  });
  process.stdout.write(`wrote ${file}\n`);
}
