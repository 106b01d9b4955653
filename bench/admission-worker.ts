/**
 * One load generator of bench/admission.ts (and of the overload test):
 * attaches a Router and an AdmissionGate in this worker thread, waits for
 * `'start'`, then offers `perTick[i]` requests of band `bands[i]` every
 * `tickMs` for `durationMs` (open loop: arrivals do not wait for answers).
 * An admitted request holds its lease for `serviceMs`, then releases it.
 * When every request has been admitted or rejected and every lease is back,
 * it posts one {@link LoadReport}.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { AdmissionGate, type AdmissionStats } from '../src/admission/admission.js';
import { isPoiseError } from '../src/core/errors.js';
import { createLogger } from '../src/log.js';
import { Router, type RouterAttachment } from '../src/runtime/router.js';

/** What the worker is told. */
export interface LoadPlan {
  attachment: RouterAttachment;
  /** The gate's bands (ranks, larger = more important). */
  bands: number[];
  /** Holdback (`minCeiling`) or explicit ceilings (a static ceiling: all equal). */
  minCeiling?: number;
  ceilings?: number[];
  perTick: number[];
  tickMs: number;
  durationMs: number;
  serviceMs: number;
  timeoutMs: number;
  maxQueue: number;
}

/** Per band, what happened to the requests it offered. */
export interface BandReport {
  band: number;
  offered: number;
  admitted: number;
  /** Admitted while arrivals were still being offered (the throughput window). */
  admittedInWindow: number;
  rejected: Record<string, number>;
  /** Queue wait of every admitted request, ms. */
  waits: number[];
}

/** The worker's answer. */
export interface LoadReport {
  bands: BandReport[];
  stats: AdmissionStats;
  openLeases: number;
  elapsedMs: number;
}

const plan = workerData as LoadPlan;
const router = Router.attach(plan.attachment, { policy: 'p2c:requests', leaseKind: 'request', logger: createLogger({ level: 'silent' }) });
const gate = new AdmissionGate(
  router,
  plan.ceilings === undefined
    ? { bands: plan.bands, minCeiling: plan.minCeiling ?? 0, timeoutMs: plan.timeoutMs, maxQueue: plan.maxQueue }
    : { bands: plan.bands, ceilings: plan.ceilings, timeoutMs: plan.timeoutMs, maxQueue: plan.maxQueue },
);
const bands: BandReport[] = plan.bands.map((band) => ({
  band,
  offered: 0,
  admitted: 0,
  admittedInWindow: 0,
  rejected: {},
  waits: [],
}));
let pending = 0;
let started = 0;
let finish: () => void = () => {};
const done = new Promise<void>((resolve) => {
  finish = resolve;
});
let ticking = true;

function settle(): void {
  pending--;
  if (pending === 0 && !ticking) finish();
}

function offer(band: BandReport): void {
  band.offered++;
  pending++;
  const t0 = performance.now();
  router.acquireAsync({ band: band.band }).then(
    (lease) => {
      band.admitted++;
      if (ticking) band.admittedInWindow++;
      band.waits.push(performance.now() - t0);
      setTimeout(() => {
        lease.release('success');
        settle();
      }, plan.serviceMs);
    },
    (err: unknown) => {
      const code = isPoiseError(err) ? err.code : 'other';
      band.rejected[code] = (band.rejected[code] ?? 0) + 1;
      settle();
    },
  );
}

parentPort!.once('message', () => {
  started = performance.now();
  const timer = setInterval(() => {
    if (performance.now() - started >= plan.durationMs) {
      clearInterval(timer);
      ticking = false;
      if (pending === 0) finish();
      return;
    }
    for (let i = 0; i < bands.length; i++) for (let k = 0; k < plan.perTick[i]!; k++) offer(bands[i]!);
  }, plan.tickMs);
  void done.then(() => {
    const report: LoadReport = {
      bands,
      stats: gate.admissionStats(),
      openLeases: router.openLeases,
      elapsedMs: performance.now() - started,
    };
    gate.close();
    parentPort!.postMessage(report);
  });
});
parentPort!.postMessage('ready');
