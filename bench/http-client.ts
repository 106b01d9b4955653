/**
 * bench/http-client: one closed-loop client thread of bench/http. It builds
 * the dispatcher of the system under test — a PoiseDispatcher over its own
 * router on the shared table, undici's BalancedPool, a Pool per backend
 * chosen at random, or one plain Pool — and keeps `concurrency` requests in
 * flight until told to stop. The shared control words say when to warm up,
 * measure and stop, and which phase of the scenario runs (a backend that
 * turns slow halfway). It reports latencies (measured phase only), errors
 * (exceptions and 5xx), and requests per backend per phase. Messages to
 * the main thread: 'ready' once built, then its {@link ClientReport}.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { BalancedPool, Pool, request, type Dispatcher } from 'undici';
import { PoiseDispatcher } from '../src/http.js';
import { createLogger, Router, type PolicyName, type RouterAttachment } from '../src/runtime.js';
import { variantOf } from './lib/http-variant.js';

/** What the main thread hands a client thread. */
export interface ClientPlan {
  system: string;
  attachment: RouterAttachment;
  origins: string[];
  concurrency: number;
  /** Int32Array words: [0] state (0 warm-up, 1 measure, 2 stop), [1] phase. */
  control: SharedArrayBuffer;
}

/** What a client thread reports. */
export interface ClientReport {
  latenciesMs: Float64Array;
  requests: number;
  errors: number;
  /** Requests per backend id, per phase of the measured run. */
  byBackend: Record<string, number>[];
  /** Requests per backend id during the warm-up (a fresh dispatcher's first requests). */
  warmup: Record<string, number>;
}

const MEASURE = 1;
const STOP = 2;

const plan = workerData as ClientPlan;
const control = new Int32Array(plan.control);
const logger = createLogger({ level: 'silent' });

function build(): { pick: () => Dispatcher; close: () => Promise<void> } {
  const pool = { connections: 64, pipelining: 1 };
  const variant = variantOf(plan.system);
  if (variant !== undefined) {
    const policy = variant.policy as PolicyName;
    const router = Router.attach(plan.attachment, { policy, latencyRatio: variant.latencyRatio, logger });
    const d = new PoiseDispatcher({ router, origin: 'http://api', pool });
    return { pick: () => d, close: () => d.close() };
  }
  if (plan.system === 'BalancedPool') {
    const d = new BalancedPool(plan.origins, pool);
    return { pick: () => d, close: () => d.close() };
  }
  const pools = plan.origins.map((o) => new Pool(o, pool));
  // 'random Pool' (one of the backends' pools, uniformly) or 'Pool' (a single backend).
  const pick = plan.system === 'random Pool' ? () => pools[Math.floor(Math.random() * pools.length)]! : () => pools[0]!;
  return { pick, close: async () => void (await Promise.all(pools.map((p) => p.close()))) };
}

const { pick, close } = build();
// Built (modules loaded, dispatcher made): the main thread starts the warm-up clock once every client says so.
parentPort!.postMessage('ready');
let latencies = new Float64Array(1 << 16);
let n = 0;
let requests = 0;
let errors = 0;
const byBackend: Record<string, number>[] = [{}, {}];
const warmup: Record<string, number> = {};

async function loop(): Promise<void> {
  while (Atomics.load(control, 0) !== STOP) {
    const measuring = Atomics.load(control, 0) === MEASURE;
    const phase = Atomics.load(control, 1);
    const t0 = performance.now();
    try {
      const res = await request('http://api/', { dispatcher: pick() });
      const backend = String(res.headers['x-backend'] ?? '?');
      await res.body.dump();
      if (!measuring) {
        warmup[backend] = (warmup[backend] ?? 0) + 1;
        continue;
      }
      if (res.statusCode >= 500) errors++;
      const tally = byBackend[phase]!;
      tally[backend] = (tally[backend] ?? 0) + 1;
    } catch {
      if (!measuring) continue;
      errors++;
    }
    if (n === latencies.length) {
      const grown = new Float64Array(n * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[n++] = performance.now() - t0;
    requests++;
  }
}

await Promise.all(Array.from({ length: plan.concurrency }, loop));
await close();
const report: ClientReport = { latenciesMs: latencies.slice(0, n), requests, errors, byBackend, warmup };
parentPort!.postMessage(report);
