/**
 * Resilience: slow start, retry budgets and backend-reported load, each with
 * the feature off and on, side by side.
 *
 *   node dist/bench/resilience.js [--quick] [--seconds S]
 *
 * 1. Slow start. Four simulated backends (each a server of 8 concurrent
 *    slots, 5 ms per request, queueing beyond), open-loop arrivals at 60 %
 *    of the pool's capacity; a fifth backend joins the loaded pool 10× slow
 *    (50 ms), its coldness fading linearly to 1× (5 ms) over its first S
 *    seconds. Slow start (window S,
 *    aggression 1, 10 %) against none; policies weighted and p2c:requests.
 *    Reported: client p50 / p99 / p99.9 over the cold window, and the cold
 *    backend's share of picks in each quarter of it.
 * 2. Retry budget. Three loopback ports nobody listens on; 4 worker threads
 *    call connect() (3 attempts) 50 times a second each for S seconds. No
 *    budget against the shared per-process budget (20 %, floor 1/s, 2 s
 *    window). Reported: attempts per request, retries allowed and refused.
 *    (The fleet budget across processes is measured by
 *    test/integration/retry-budget-fleet.test.ts: 8 processes × 2 threads.)
 * 3. Backend-reported load. Four simulated backends, one with half the
 *    capacity (4 slots), at 70 % of the pool's capacity; each serves an
 *    ORCA load endpoint (`endpoint-load-metrics`: its measured utilization
 *    and qps). ORCA weights (blackout 1 s) against none; policy weighted.
 *    Reported: the half backend's share after the blackout, client p99.
 *
 * Requests are timers, not sockets (except scenario 2's refused dials and
 * the load endpoints): what is measured is the routing, not the kernel.
 * Figures go to bench/results/resilience.json; run on a quiet machine.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import { createLogger } from '../src/log.js';
import { Balancer, type BalancerOptions } from '../src/runtime/balancer.js';
import type { Router, RouterAttachment } from '../src/runtime/router.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const quick = process.argv.includes('--quick');
const SECONDS = Number(arg('seconds') ?? (quick ? 2 : 20));
const SILENT = createLogger({ level: 'silent' });

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** A simulated server: `slots` requests at once, the rest queue; `serviceMs()` per request. */
class SimServer {
  busy = 0;
  done = 0;
  private readonly queue: (() => void)[] = [];
  /** Busy-slot milliseconds since the last report, for the utilization it reports. */
  private busyMs = 0;
  private lastAt = performance.now();
  private lastDone = 0;
  constructor(
    readonly slots: number,
    readonly serviceMs: () => number,
  ) {}
  serve(): Promise<void> {
    return new Promise((resolve) => {
      const run = (): void => {
        this.account();
        this.busy++;
        setTimeout(() => {
          this.account();
          this.busy--;
          this.done++;
          resolve();
          this.queue.shift()?.();
        }, this.serviceMs());
      };
      if (this.busy < this.slots) run();
      else this.queue.push(run);
    });
  }
  /** ORCA text: utilization and qps since the last report. */
  report(): string {
    this.account();
    const now = performance.now();
    const seconds = Math.max(0.001, (now - this.lastAt) / 1000);
    const utilization = this.busyMs / (seconds * 1000 * this.slots);
    const qps = (this.done - this.lastDone) / seconds;
    this.busyMs = 0;
    this.lastAt = now;
    this.lastDone = this.done;
    return `TEXT cpu_utilization=${utilization.toFixed(4)}, rps_fractional=${qps.toFixed(2)}, eps=0`;
  }
  private accountedAt = performance.now();
  private account(): void {
    const now = performance.now();
    this.busyMs += this.busy * (now - this.accountedAt);
    this.accountedAt = now;
  }
}

/** Open-loop arrivals every `tickMs` (`perTick` each) for `ms`; each routed by `router` and served by its backend's SimServer. */
async function drive(
  router: Router,
  servers: Map<string, SimServer>,
  perTick: number,
  tickMs: number,
  ms: number,
  onPick?: (id: string, at: number) => void,
): Promise<number[]> {
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  const start = performance.now();
  while (performance.now() - start < ms) {
    for (let k = 0; k < perTick; k++) {
      const t0 = performance.now();
      const lease = router.acquire();
      onPick?.(lease.id, t0 - start);
      pending.push(
        servers
          .get(lease.id)!
          .serve()
          .then(() => {
            const latency = performance.now() - t0;
            lease.release('success', { latencyMs: latency });
            latencies.push(latency);
          }),
      );
    }
    await new Promise((r) => setTimeout(r, tickMs));
  }
  await Promise.all(pending);
  return latencies.sort((a, b) => a - b);
}

// --- 1. slow start ---------------------------------------------------------------

async function slowStart(policy: 'weighted' | 'p2c:requests', on: boolean): Promise<Record<string, unknown>> {
  const windowMs = SECONDS * 1000;
  const opts: BalancerOptions = {
    capacity: 8,
    logger: SILENT,
    ...(on ? { slowStart: { windowMs, aggression: 1, minWeightPercent: 10 } } : {}),
  };
  const b = new Balancer(opts);
  const warm = ['w0', 'w1', 'w2', 'w3'].map((id, i) => ({ id, address: `127.0.0.1:${7100 + i}` }));
  b.update(warm);
  const servers = new Map<string, SimServer>(warm.map((w) => [w.id, new SimServer(8, () => 5)]));
  const router = b.router({ policy, logger: SILENT });
  // 4 × 8 slots / 5 ms = 6.4 requests/ms; 60 %: ~3.8/ms → 19 per 5 ms tick (the cold one adds capacity once warm).
  await drive(router, servers, 19, 5, 500);
  let joinedAt = 0;
  // Coldness that fades (JIT, caches, pools warming): 10× (50 ms) at the join, linearly down to 1× (5 ms) at the window's end.
  servers.set('cold', new SimServer(8, () => 5 * (1 + 9 * Math.max(0, 1 - (performance.now() - joinedAt) / windowMs))));
  joinedAt = performance.now();
  b.update([...warm, { id: 'cold', address: '127.0.0.1:7199' }]);
  const quarters = [0, 0, 0, 0];
  const totals = [0, 0, 0, 0];
  const latencies = await drive(router, servers, 19, 5, windowMs, (id, at) => {
    const q = Math.min(3, Math.floor((at / windowMs) * 4));
    totals[q]!++;
    if (id === 'cold') quarters[q]!++;
  });
  router.close();
  b.close();
  return {
    scenario: 'slow start',
    policy,
    slowStart: on ? 'on' : 'off',
    p50ms: quantile(latencies, 0.5),
    p99ms: quantile(latencies, 0.99),
    p999ms: quantile(latencies, 0.999),
    coldShareByQuarter: quarters.map((n, i) => Math.round((n / Math.max(1, totals[i]!)) * 1000) / 1000).join(' / '),
  };
}

// --- 2. retry budget -------------------------------------------------------------

const RETRY_WORKER = `
import { parentPort, workerData } from 'node:worker_threads';
const { Router } = await import(workerData.router);
const { connect } = await import(workerData.connect);
const { createLogger } = await import(workerData.log);
const router = Router.attach(workerData.attachment, { policy: 'round-robin', logger: createLogger({ level: 'silent' }), ejection: { consecutiveFailures: 1000000 } });
const end = Date.now() + workerData.ms;
let requests = 0;
while (Date.now() < end) {
  requests++;
  await connect(router, { attempts: 3 }).then(({ socket }) => socket.destroy(), () => {});
  await new Promise((r) => setTimeout(r, workerData.everyMs));
}
router.flushPicks();
router.close();
parentPort.postMessage({ requests });
`;

async function retryBudget(on: boolean): Promise<Record<string, unknown>> {
  const b = new Balancer({
    capacity: 8,
    logger: SILENT,
    ...(on ? { retryBudget: { ratio: 0.2, minRetriesPerSecond: 1, ttlMs: 2000 } } : {}),
  });
  // Ports in a range nobody listens on here (a refused dial each).
  const ports = await Promise.all([0, 1, 2].map(() => freePort()));
  b.update(ports.map((p, i) => ({ id: `r${i}`, address: `127.0.0.1:${p}` })));
  const here = new URL('.', import.meta.url);
  const workerData = {
    attachment: b.attachment() as RouterAttachment,
    router: new URL('../src/runtime/router.js', here).href,
    connect: new URL('../src/outbound/connect.js', here).href,
    log: new URL('../src/log.js', here).href,
    ms: SECONDS * 1000,
    everyMs: 20,
  };
  const results = await Promise.all(
    Array.from({ length: 4 }, () => {
      const w = new Worker(new URL(`data:text/javascript,${encodeURIComponent(RETRY_WORKER)}`), { workerData });
      return new Promise<{ requests: number }>((resolve, reject) => {
        w.once('message', (m: { requests: number }) => void w.terminate().then(() => resolve(m)));
        w.once('error', reject);
      });
    }),
  );
  const requests = results.reduce((s, r) => s + r.requests, 0);
  let attempts = 0;
  for (const e of b.slotEntries()) attempts += b.table.stats(e.slot).picks;
  const stats = b.retryBudgetStats();
  b.close();
  return {
    scenario: 'retry budget',
    budget: on ? '20 %, floor 1/s, 2 s' : 'none',
    requests,
    attemptsPerRequest: Math.round((attempts / requests) * 1000) / 1000,
    retriesAllowed: stats.allowed,
    retriesRefused: stats.refused,
  };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

// --- 3. backend-reported load ----------------------------------------------------

async function reported(on: boolean): Promise<Record<string, unknown>> {
  const sims = new Map<string, SimServer>([
    ['full0', new SimServer(8, () => 5)],
    ['full1', new SimServer(8, () => 5)],
    ['full2', new SimServer(8, () => 5)],
    ['half', new SimServer(4, () => 5)],
  ]);
  const endpoints: Server[] = [];
  const backends: { id: string; address: string }[] = [];
  for (const [id, sim] of sims) {
    const s = createServer((_req, res) => {
      res.setHeader('endpoint-load-metrics', sim.report());
      res.end();
    });
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    endpoints.push(s);
    backends.push({ id, address: `127.0.0.1:${(s.address() as AddressInfo).port}` });
  }
  const b = new Balancer({
    capacity: 8,
    logger: SILENT,
    ...(on ? { health: { orca: { blackoutMs: 1000, intervalMs: 250, path: '/load' } } } : {}),
  });
  b.update(backends);
  const router = b.router({ policy: 'weighted', logger: SILENT });
  // 28 slots / 5 ms = 5.6/ms; 70 %: ~3.9/ms → 20 per 5 ms tick.
  await drive(router, sims, 20, 5, 1500);
  let half = 0;
  let total = 0;
  const latencies = await drive(router, sims, 20, 5, SECONDS * 1000, (id) => {
    total++;
    if (id === 'half') half++;
  });
  router.close();
  b.close();
  for (const s of endpoints) s.close();
  return {
    scenario: 'backend-reported load',
    orca: on ? 'on' : 'off',
    halfShare: Math.round((half / total) * 1000) / 1000,
    capacityShare: Math.round((4 / 28) * 1000) / 1000,
    p50ms: quantile(latencies, 0.5),
    p99ms: quantile(latencies, 0.99),
  };
}

const rows: Record<string, unknown>[] = [];
for (const policy of ['weighted', 'p2c:requests'] as const) {
  for (const on of [false, true]) {
    progress(`slow start ${policy} ${on ? 'on' : 'off'}`);
    rows.push(await slowStart(policy, on));
  }
}
const retryRows: Record<string, unknown>[] = [];
for (const on of [false, true]) {
  progress(`retry budget ${on ? 'on' : 'off'}`);
  retryRows.push(await retryBudget(on));
}
const loadRows: Record<string, unknown>[] = [];
for (const on of [false, true]) {
  progress(`backend-reported load ${on ? 'on' : 'off'}`);
  loadRows.push(await reported(on));
}
progressDone();
console.log(formatTable(rows));
console.log();
console.log(formatTable(retryRows));
console.log();
console.log(formatTable(loadRows));
if (!quick)
  console.log(
    `\nwritten: ${writeResults('resilience', { seconds: SECONDS, slowStart: rows, retryBudget: retryRows, reportedLoad: loadRows })}`,
  );
