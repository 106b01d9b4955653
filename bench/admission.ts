/**
 * Admission under sustained overload: three bands over two worker threads,
 * band holdback ceilings against a single static ceiling (the default
 * holdback replaces: every band admitted up to a full pool, the queues still
 * served most important first).
 *
 *   node dist/bench/admission.js [--quick] [--seconds S] [--rounds N] [--min-ceiling X]
 *     [--max-inflight N] [--service MS] [--tick MS] [--per-tick TOP,MID,LOW]
 *
 * The pool (defaults): 4 backends × maxInflight 100 = capacity 400 request
 * leases, each held 200 ms (≈ 2,000 admissions/s at saturation 1). Every
 * 20 ms each worker offers 1 top-band request, 20 middle and 20 low (open
 * loop; pool-wide ≈ 100 + 2,000 + 2,000 per second: 2.05× capacity, the top
 * band alone 5 %). Queue limit 256 per band and worker, timeout 1 s. Rounds
 * alternate holdback (minCeiling 0.92: ceilings 1 / 0.96 / 0.92) and the
 * static ceiling (1 / 1 / 1, queues still served most important first).
 * Reported per band: p50/p99 queue wait of the admitted requests (the fast
 * path counts as its few microseconds), admitted per second while arrivals
 * were offered, rejections by reason. Every worker checks admitted +
 * rejected = offered per band and ends with no open lease, or the run fails.
 * Target: top band p99 under holdback ≤ 0.1 × static, total admitted
 * throughput within 5 %.
 *
 * Two measurements come first, in this thread: the wake-up latency across
 * threads (a worker releases the pool's only unit; how long until this
 * thread's queued request is admitted — woken by the release's notify, with
 * the poll fallback at its default 20 ms and at 1 s to show the timer plays
 * no part), and the release path's cost (acquireHandle + releaseHandle
 * without a gate, with an idle gate attached, and with an unconditional
 * Atomics.add + Atomics.notify per release — what the wake-up costs a
 * release only while gates wait; and heap bytes per pair).
 *
 * Then fairness across workers: 10 rounds (3 with --quick) in which two
 * workers offer identical load of one band into a pool at twice its
 * capacity; per round, each worker's share of the admissions and its
 * QueueTimeouts. Target: every round within ±10 % of an even split.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { AdmissionGate, Balancer, createLogger, type Router } from '../src/runtime.js';
import type { BandReport, LoadPlan, LoadReport } from './admission-worker.js';
import { formatTable, heapBytesPerOp, progress, progressDone, writeResults } from './lib/harness.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const quick = process.argv.includes('--quick');
const SECONDS = Number(arg('seconds') ?? (quick ? 2 : 5));
const ROUNDS = Number(arg('rounds') ?? (quick ? 1 : 3));
const MIN_CEILING = Number(arg('min-ceiling') ?? 0.92);
const BANDS = [3, 2, 1];
/** Per backend (4 backends): capacity 4 × this. */
const MAX_INFLIGHT = Number(arg('max-inflight') ?? 100);
/** Arrivals per 10 ms tick and worker, per band (most important first). */
const PER_TICK = (arg('per-tick') ?? '1,20,20').split(',').map(Number);
const TICK_MS = Number(arg('tick') ?? 20);
const SERVICE_MS = Number(arg('service') ?? 200);
const WORKER = new URL('./admission-worker.js', import.meta.url);
const HOLDER = new URL('./admission-holder.js', import.meta.url);
const SILENT = createLogger({ level: 'silent' });

type Mode = 'holdback' | 'static';

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function round(mode: Mode): Promise<LoadReport[]> {
  const b = new Balancer({ capacity: 16, maxThreads: 8, logger: createLogger({ level: 'silent' }) });
  b.update(Array.from({ length: 4 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}`, maxInflight: MAX_INFLIGHT })));
  const plan: LoadPlan = {
    attachment: b.attachment(),
    bands: BANDS,
    ...(mode === 'holdback' ? { minCeiling: MIN_CEILING } : { ceilings: [1, 1, 1] }),
    perTick: PER_TICK,
    tickMs: TICK_MS,
    durationMs: SECONDS * 1000,
    serviceMs: SERVICE_MS,
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
  inWindow: number;
  rejected: Record<string, number>;
  waits: number[];
}

const acc: Record<Mode, Acc[]> = {
  holdback: BANDS.map(() => ({ offered: 0, admitted: 0, inWindow: 0, rejected: {}, waits: [] })),
  static: BANDS.map(() => ({ offered: 0, admitted: 0, inWindow: 0, rejected: {}, waits: [] })),
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
      if (band.admitted + rejected !== band.offered) throw new Error(`band ${band.band}: admitted + rejected != offered`);
      a.offered += band.offered;
      a.admitted += band.admitted;
      a.inWindow += band.admittedInWindow;
      for (const [k, v] of Object.entries(band.rejected)) a.rejected[k] = (a.rejected[k] ?? 0) + v;
      for (const w of band.waits) a.waits.push(w);
    });
  }
  // Throughput counts the admissions made while arrivals were offered (not the drain after).
  elapsed[mode] += SECONDS * 1000;
  void longest;
}

/** Wake-up latency across threads: p50 / p99 / max of `samples` hand-overs, ms. */
async function wakeUp(
  pollMs: number,
  samples: number,
): Promise<{ pollMs: number; samples: number; p50Ms: number; p99Ms: number; maxMs: number }> {
  const b = new Balancer({ capacity: 4, maxThreads: 4, logger: SILENT });
  b.update([{ id: 'a', address: '127.0.0.1:7000', maxInflight: 1 }]);
  const router = b.router({ policy: 'round-robin', leaseKind: 'request' });
  const gate = new AdmissionGate(router, { bands: [1], minCeiling: 0, pollMs });
  const w = new Worker(HOLDER, { workerData: { attachment: b.attachment() } });
  b.watchWorker(w);
  const reply = (): Promise<{ held: number; at: number }> => new Promise((resolve) => w.once('message', resolve));
  const send = (msg: object): Promise<{ held: number; at: number }> => {
    const answer = reply();
    w.postMessage(msg);
    return answer;
  };
  const lat: number[] = [];
  for (let i = 0; i < samples; i++) {
    await send({ hold: 1 });
    const admitted = router.acquireAsync().then((lease) => ({ lease, at: performance.timeOrigin + performance.now() }));
    // Let the request queue and the poll timer run a little before the release.
    await new Promise((r) => setTimeout(r, 3));
    const released = await send({ release: 1 });
    const got = await admitted;
    lat.push(got.at - released.at);
    got.lease.release('success');
  }
  gate.close();
  await w.terminate();
  b.close();
  lat.sort((x, y) => x - y);
  return {
    pollMs,
    samples,
    p50Ms: Number(quantile(lat, 0.5).toFixed(3)),
    p99Ms: Number(quantile(lat, 0.99).toFixed(3)),
    maxMs: Number(lat[lat.length - 1]!.toFixed(3)),
  };
}

/** ns per acquireHandle + releaseHandle pair: the three variants interleaved, 9 runs each, medians. */
function releasePath(): Record<string, number> {
  const ops = quick ? 200_000 : 1_000_000;
  const word = new Int32Array(new SharedArrayBuffer(4));
  const once = (router: Router, extra: boolean): number => {
    const t0 = performance.now();
    for (let i = 0; i < ops; i++) {
      const h = router.acquireHandle();
      router.releaseHandle(h, 'success');
      if (extra) {
        // What a waitAsync wake-up adds to every release: bump the word, wake its waiters.
        Atomics.add(word, 0, 1);
        Atomics.notify(word, 0);
      }
    }
    return ((performance.now() - t0) * 1e6) / ops;
  };
  const make = (): { b: Balancer; router: Router } => {
    const b = new Balancer({ capacity: 8, logger: SILENT });
    b.update(Array.from({ length: 4 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}`, maxInflight: 1000 })));
    return { b, router: b.router({ policy: 'p2c:requests', leaseKind: 'request' }) };
  };
  const plain = make();
  const gated = make();
  new AdmissionGate(gated.router, { bands: [1, 0], minCeiling: 0.5 });
  const runs: number[][] = [[], [], []];
  for (let r = 0; r < 9; r++) {
    runs[0]!.push(once(plain.router, false));
    runs[1]!.push(once(gated.router, false));
    runs[2]!.push(once(plain.router, true));
  }
  const median = (xs: number[]): number => Number(xs.sort((x, y) => x - y)[Math.floor(xs.length / 2)]!.toFixed(1));
  const pair = (router: Router) => (): void => {
    router.releaseHandle(router.acquireHandle(), 'success');
  };
  const heap = { noGateHeapBytesPerPair: heapBytesPerOp(pair(plain.router)), idleGateHeapBytesPerPair: heapBytesPerOp(pair(gated.router)) };
  plain.b.close();
  gated.b.close();
  return {
    noGateNsPerPair: median(runs[0]!),
    idleGateNsPerPair: median(runs[1]!),
    noGatePlusAddNotifyNsPerPair: median(runs[2]!),
    ...heap,
  };
}

progress('release path');
const release = releasePath();
progress('wake-up across threads');
const wake = [await wakeUp(20, quick ? 50 : 200), await wakeUp(1000, quick ? 50 : 200)];

/** One fairness round: two workers, identical single-band load at 2× capacity; each worker's share of admissions. */
async function fairnessRound(): Promise<{ shares: number[]; timeouts: number[]; admitted: number[] }> {
  const b = new Balancer({ capacity: 16, maxThreads: 8, logger: SILENT });
  b.update(Array.from({ length: 4 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}`, maxInflight: 25 })));
  const plan: LoadPlan = {
    attachment: b.attachment(),
    bands: [1],
    ceilings: [1],
    // 100 leases of 50 ms: 2,000 admissions/s; each worker offers 2,000/s.
    perTick: [10],
    tickMs: 5,
    durationMs: (quick ? 1 : 2) * 1000,
    serviceMs: 50,
    timeoutMs: 500,
    maxQueue: 100_000,
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
  const admitted = out.map((r) => r.bands[0]!.admitted);
  const all = admitted[0]! + admitted[1]!;
  return {
    admitted,
    shares: admitted.map((a) => Number((a / all).toFixed(4))),
    timeouts: out.map((r) => r.bands[0]!.rejected['QueueTimeout'] ?? 0),
  };
}
const fairness: {
  round: number;
  shareWorker0: number;
  shareWorker1: number;
  admitted0: number;
  admitted1: number;
  timeouts0: number;
  timeouts1: number;
}[] = [];
for (let r = 0; r < (quick ? 3 : 10); r++) {
  progress(`fairness round ${r + 1}`);
  const f = await fairnessRound();
  fairness.push({
    round: r + 1,
    shareWorker0: f.shares[0]!,
    shareWorker1: f.shares[1]!,
    admitted0: f.admitted[0]!,
    admitted1: f.admitted[1]!,
    timeouts0: f.timeouts[0]!,
    timeouts1: f.timeouts[1]!,
  });
}
const worstShareDeviation = Math.max(...fairness.map((f) => Math.abs(f.shareWorker0 - 0.5) / 0.5));

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
      band: BANDS[i],
      offered: a.offered,
      admitted: a.admitted,
      admittedPerSec: Math.round((a.inWindow / elapsed[mode]) * 1000),
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
const total = (mode: Mode): number => acc[mode].reduce((x, a) => x + a.inWindow, 0) / elapsed[mode];
const topP99 = (mode: Mode): number => rows.find((x) => x['mode'] === mode && x['band'] === BANDS[0])!['waitP99Ms'] as number;
const ratios = {
  topBandP99HoldbackOverStatic: Number((topP99('holdback') / topP99('static')).toFixed(4)),
  admittedThroughputHoldbackOverStatic: Number((total('holdback') / total('static')).toFixed(4)),
};
const targets = {
  topBandP99AtMostTenthOfStatic: ratios.topBandP99HoldbackOverStatic <= 0.1,
  throughputWithin5Percent: Math.abs(ratios.admittedThroughputHoldbackOverStatic - 1) <= 0.05,
  everyFairnessRoundWithin10PercentOfEven: worstShareDeviation <= 0.1,
};
console.log(formatTable(rows));
console.log(ratios, targets);
console.log('release path', release);
console.log(formatTable(wake));
console.log(formatTable(fairness));
console.log({ worstShareDeviationFromEven: Number(worstShareDeviation.toFixed(4)) });
const file = writeResults('admission', {
  loadAverage: os.loadavg(),
  config: {
    seconds: SECONDS,
    rounds: ROUNDS,
    workers: 2,
    bands: BANDS,
    holdbackMinCeiling: MIN_CEILING,
    staticCeilings: [1, 1, 1],
    capacity: 4 * MAX_INFLIGHT,
    serviceMs: SERVICE_MS,
    perTickPerWorker: PER_TICK,
    tickMs: TICK_MS,
    timeoutMs: 1000,
    maxQueuePerBand: 256,
  },
  bands: rows,
  releasePath: release,
  wakeUpAcrossThreads: wake,
  fairness: { rounds: fairness, worstShareDeviationFromEven: worstShareDeviation, offeredPerWorkerPerSec: 2000, capacityPerSec: 2000 },
  ratios,
  targets,
});
console.log(`wrote ${file}`);
