/**
 * bench/tail-cold-client: one fresh client process of bench:tail's `cold`
 * scenario (bench/tail-cold.ts forks one per system and run), so its code is
 * as cold as a restarted service's: the dispatcher of the system under test (a PoiseDispatcher over a Balancer's
 * router on this main thread, or undici's BalancedPool) and the closed-loop
 * client beside it, `concurrency` requests in flight from the first one on.
 * It counts the requests started in the first `durationMs` from the first
 * request: per `binMs`, how many went to the slow backend (b0), and every
 * latency. Argument: a JSON {@link ColdPlan}; reports a {@link ColdReport}
 * over IPC, then exits.
 */
import { BalancedPool, type Dispatcher, request } from 'undici';
import { PoiseDispatcher } from '../src/http.js';
import { Balancer, createLogger } from '../src/runtime.js';

/** What the cold scenario hands a cold process. */
export interface ColdPlan {
  system: 'poise p2c:latency' | 'BalancedPool';
  ports: number[];
  durationMs: number;
  binMs: number;
  concurrency: number;
}

/** What a cold process reports. */
export interface ColdReport {
  /** Requests started in each bin, and those of them that went to b0. */
  total: number[];
  slow: number[];
  /** Latencies (ms) of every request started in the measured window. */
  latenciesMs: number[];
  errors: number;
}

const plan = JSON.parse(process.argv[2]!) as ColdPlan;
const pool = { connections: 64, pipelining: 1 };
let dispatcher: Dispatcher;
let balancer: Balancer | undefined;
if (plan.system === 'BalancedPool') {
  dispatcher = new BalancedPool(
    plan.ports.map((p) => `http://127.0.0.1:${p}`),
    pool,
  );
} else {
  balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
  balancer.update(plan.ports.map((p, i) => ({ id: `b${i}`, address: `127.0.0.1:${p}` })));
  dispatcher = new PoiseDispatcher({ router: balancer.router({ policy: 'p2c:latency' }), origin: 'http://api', pool });
}
const bins = Math.ceil(plan.durationMs / plan.binMs);
const total = new Array<number>(bins).fill(0);
const slow = new Array<number>(bins).fill(0);
const latenciesMs: number[] = [];
let errors = 0;
const url = 'http://api/';
const t0 = performance.now();

async function loop(): Promise<void> {
  for (;;) {
    const start = performance.now();
    if (start - t0 >= plan.durationMs) return;
    const bin = Math.floor((start - t0) / plan.binMs);
    try {
      const res = await request(url, { dispatcher });
      const backend = String(res.headers['x-backend'] ?? '?');
      await res.body.dump();
      if (res.statusCode >= 500) errors++;
      total[bin]!++;
      if (backend === 'b0') slow[bin]!++;
    } catch {
      errors++;
    }
    latenciesMs.push(performance.now() - start);
  }
}

await Promise.all(Array.from({ length: plan.concurrency }, loop));
const report: ColdReport = { total, slow, latenciesMs, errors };
process.send!(report, () => {
  void dispatcher.close().finally(() => {
    balancer?.close();
    process.exit(0);
  });
});
