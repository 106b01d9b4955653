/**
 * One client process of bench/fleet-tail.ts (forked with IPC): a Balancer
 * over the fleet's backends (with `health.probe` for the `probe` system,
 * `health.orca` from response headers for ORCA-weighted round robin) and
 * `threads` load generators — this thread and `threads − 1` worker threads
 * (the same file), each a PoiseDispatcher over its own Router on the shared
 * table. Each generator is open-loop: Poisson arrivals at its share of
 * `rate` for `durationMs`, whatever the latencies (a closed loop would hide
 * the tail by slowing down with it).
 *
 *   fork('dist/bench/fleet-tail-client.js', [JSON.stringify(config)])
 *   → { latencies: number[] (ms), errors }   when every generator is done
 */
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import { Rng } from '../src/core/rng.js';
import { PoiseDispatcher } from '../src/http.js';
import { Balancer, Router, type RouterAttachment, createLogger } from '../src/runtime.js';

/** What the orchestrator hands a client. */
export interface ClientConfig {
  ports: number[];
  policy: string;
  health: Record<string, unknown>;
  /** Requests per second of this process (all its threads). */
  rate: number;
  durationMs: number;
  threads: number;
}

interface Generated {
  latencies: number[];
  errors: number;
}

/** Poisson arrivals at `rate`/s for `durationMs` through `router`; resolves with every latency (ms). */
async function generate(router: Router, rate: number, durationMs: number): Promise<Generated> {
  const dispatcher = new PoiseDispatcher({ router, origin: 'http://fleet' });
  const rng = new Rng();
  const latencies: number[] = [];
  let errors = 0;
  const pending = new Set<Promise<void>>();
  const t0 = performance.now();
  let next = t0;
  const fire = (): void => {
    const start = performance.now();
    const p = request('http://fleet/x', { dispatcher })
      .then(async (res) => {
        await res.body.dump();
        if (res.statusCode === 200) latencies.push(performance.now() - start);
        else errors++;
      })
      .catch(() => {
        errors++;
      })
      .finally(() => pending.delete(p));
    pending.add(p);
  };
  while (performance.now() - t0 < durationMs) {
    const now = performance.now();
    // Every arrival due by now goes out; then sleep a millisecond (open loop: lateness does not thin the arrivals).
    while (next <= now) {
      fire();
      next += -Math.log(1 - rng.float()) * (1000 / rate);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(pending);
  await dispatcher.close();
  return { latencies, errors };
}

if (isMainThread) {
  const c = JSON.parse(process.argv[2] ?? '{}') as ClientConfig;
  const balancer = new Balancer({ logger: createLogger({ level: 'silent' }), health: c.health });
  balancer.update(c.ports.map((port, i) => ({ id: `b${i}`, address: `127.0.0.1:${port}` })));
  const perThread = c.rate / c.threads;
  const workers = Array.from(
    { length: c.threads - 1 },
    () =>
      new Worker(new URL(import.meta.url), {
        workerData: { attachment: balancer.attachment(), policy: c.policy, rate: perThread, durationMs: c.durationMs },
      }),
  );
  const fromWorkers = workers.map(
    (w) => new Promise<Generated>((resolve, reject) => (w.once('message', resolve), w.once('error', reject))),
  );
  const own = await generate(balancer.router({ policy: c.policy as never }), perThread, c.durationMs);
  const all = [own, ...(await Promise.all(fromWorkers))];
  await Promise.all(workers.map((w) => w.terminate()));
  balancer.close();
  process.send!({ latencies: all.flatMap((g) => g.latencies), errors: all.reduce((a, g) => a + g.errors, 0) });
  process.disconnect();
} else {
  const d = workerData as { attachment: RouterAttachment; policy: string; rate: number; durationMs: number };
  const router = Router.attach(d.attachment, { policy: d.policy as never, logger: createLogger({ level: 'silent' }) });
  parentPort!.postMessage(await generate(router, d.rate, d.durationMs));
  router.close();
}
