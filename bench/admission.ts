/**
 * Admission under sustained overload: three bands over two worker threads,
 * priority holdback ceilings against a single static ceiling (the default
 * holdback replaces: every band admitted up to a full pool, the queues still
 * served most important first).
 *
 *   node dist/bench/admission.js [--quick] [--seconds S] [--rounds N] [--min-ceiling X]
 *
 * The pool: 4 backends × maxInflight 25 = capacity 100 request leases, each
 * held 50 ms (≈ 2,000 admissions/s at saturation 1). Each worker offers, every
 * 10 ms, 1 top-band request, 10 middle and 10 low (pool-wide ≈ 200 + 2,000 +
 * 2,000 per second: 2.1× capacity, the top band alone 10 %). Queue limit 256
 * per band and worker, timeout 1 s. Rounds alternate holdback / static.
 * Reported per band: p50/p99 queue wait (admitted requests; the fast path
 * counts as its few microseconds), admitted per second, rejections by reason.
 * Target: top band p99 under holdback ≤ 0.1 × static, total admitted
 * throughput within 5 %.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { Balancer, createLogger } from '../src/runtime.js';
import type { BandReport, LoadPlan, LoadReport } from './admission-worker.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const quick = process.argv.includes('--quick');
const SECONDS = Number(arg('seconds') ?? (quick ? 2 : 5));
const ROUNDS = Number(arg('rounds') ?? (quick ? 1 : 3));
const MIN_CEILING = Number(arg('min-ceiling') ?? 0.9);
const PRIORITIES = [3, 2, 1];
const WORKER = new URL('./admission-worker.js', import.meta.url);

type Mode = 'holdback' | 'static';

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function round(mode: Mode): Promise<LoadReport[]> {
  const b = new Balancer({ capacity: 16, maxThreads: 8, logger: createLogger({ level: 'silent' }) });
  b.update(Array.from({ length: 4 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}`, maxInflight: 25 })));
  const plan: LoadPlan = {
    attachment: b.attachment(),
    priorities: PRIORITIES,
    ...(mode === 'holdback' ? { minCeiling: MIN_CEILING } : { ceilings: [1, 1, 1] }),
    perTick: [1, 10, 10],
    tickMs: 10,
    durationMs: SECONDS * 1000,
    serviceMs: 50,
    timeoutMs: 1000,
    maxQueue: 256,
  };
  const pair = [0, 1].map(() => new Worker(WORKER, { workerData: plan }));
  for (const w of pair) b.watchWorker(w);
  await Promise.all(pair.map((w) => new Promise((r) => w.once('message', r))));
  const reports = pair.map(
    (w) =>
      new Promise<LoadReport>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      }),
  );
  for (const w of pair) w.postMessage('start');
  const out = await Promise.all(reports);
  await Promise.all(pair.map((w) => w.terminate()));
  b.close();
  return out;
}

interface Acc {
  offered: number;
  admitted: number;
  rejected: Record<string, number>;
  waits: number[];
}

const acc: Record<Mode, Acc[]> = {
  holdback: PRIORITIES.map(() => ({ offered: 0, admitted: 0, rejected: {}, waits: [] })),
  static: PRIORITIES.map(() => ({ offered: 0, admitted: 0, rejected: {}, waits: [] })),
};
const elapsed: Record<Mode, number> = { holdback: 0, static: 0 };

function add(mode: Mode, reports: LoadReport[]): void {
  let longest = 0;
  for (const r of reports) {
    if (r.openLeases !== 0) throw new Error(`a worker ended with ${r.openLeases} open leases`);
    longest = Math.max(longest, r.elapsedMs);
    r.bands.forEach((band: BandReport, i) => {
      const a = acc[mode][i]!;
      const rejected = Object.values(band.rejected).reduce((x, y) => x + y, 0);
      if (band.admitted + rejected !== band.offered) throw new Error(`band ${band.priority}: admitted + rejected != offered`);
      a.offered += band.offered;
      a.admitted += band.admitted;
      for (const [k, v] of Object.entries(band.rejected)) a.rejected[k] = (a.rejected[k] ?? 0) + v;
      for (const w of band.waits) a.waits.push(w);
    });
  }
  // Arrivals stop at SECONDS; admissions counted over the offered window.
  elapsed[mode] += SECONDS * 1000;
  void longest;
}

for (let r = 0; r < ROUNDS; r++) {
  for (const mode of (r % 2 === 0 ? ['holdback', 'static'] : ['static', 'holdback']) as Mode[]) {
    progress(`round ${r + 1}/${ROUNDS} ${mode}`);
    add(mode, await round(mode));
  }
}
progressDone();

function summary(mode: Mode): Record<string, unknown>[] {
  return acc[mode].map((a, i) => {
    const sorted = a.waits.slice().sort((x, y) => x - y);
    return {
      mode,
      band: PRIORITIES[i],
      offered: a.offered,
      admitted: a.admitted,
      admittedPerSec: Math.round((a.admitted / elapsed[mode]) * 1000),
      waitP50Ms: Number(quantile(sorted, 0.5).toFixed(3)),
      waitP99Ms: Number(quantile(sorted, 0.99).toFixed(3)),
      QueueFull: a.rejected['QueueFull'] ?? 0,
      QueueTimeout: a.rejected['QueueTimeout'] ?? 0,
      other: Object.entries(a.rejected)
        .filter(([k]) => k !== 'QueueFull' && k !== 'QueueTimeout')
        .reduce((x, [, v]) => x + v, 0),
    };
  });
}

const rows = [...summary('holdback'), ...summary('static')];
const total = (mode: Mode): number => acc[mode].reduce((x, a) => x + a.admitted, 0) / elapsed[mode];
const topP99 = (mode: Mode): number => rows.find((x) => x['mode'] === mode && x['band'] === PRIORITIES[0])!['waitP99Ms'] as number;
const ratios = {
  topBandP99HoldbackOverStatic: Number((topP99('holdback') / topP99('static')).toFixed(4)),
  admittedThroughputHoldbackOverStatic: Number((total('holdback') / total('static')).toFixed(4)),
};
const targets = {
  topBandP99AtMostTenthOfStatic: ratios.topBandP99HoldbackOverStatic <= 0.1,
  throughputWithin5Percent: Math.abs(ratios.admittedThroughputHoldbackOverStatic - 1) <= 0.05,
};
console.log(formatTable(rows));
console.log(ratios, targets);
const file = writeResults('admission', {
  loadAverage: os.loadavg(),
  config: {
    seconds: SECONDS,
    rounds: ROUNDS,
    workers: 2,
    priorities: PRIORITIES,
    holdbackMinCeiling: MIN_CEILING,
    staticCeilings: [1, 1, 1],
    capacity: 100,
    serviceMs: 50,
    perTickPerWorker: [1, 10, 10],
    tickMs: 10,
    timeoutMs: 1000,
    maxQueuePerBand: 256,
  },
  bands: rows,
  ratios,
  targets,
});
console.log(`wrote ${file}`);
