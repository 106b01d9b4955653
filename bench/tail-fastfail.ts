/**
 * bench:tail's fast-fail scenario (issue 39): 20 loopback HTTP backends in
 * a child process, 2 of them (b0, b1) answering every request 503 at once
 * (tens of µs on loopback), the others 200 after `--delay` (1 ms). A
 * closed-loop client (`concurrency` in flight) through each system in turn,
 * a fresh one each, measured from its first request (how fast the defence
 * acts is the point): poise p2c:latency, p2c:requests and round-robin (a
 * PoiseDispatcher over a fresh Balancer with failure-percentage outlier
 * detection on, a 1 s interval, beside consecutive-failure ejection), and
 * undici's BalancedPool. Reported: the share of requests that failed (a
 * 503 reaches the caller: the dispatcher does not retry responses), and
 * the failures avoided against a rotation without any defence (2 of 20:
 * 10 % of requests fail). Target: ≥ 85 % avoided for p2c:latency.
 *
 *   npm run bench:tail-fastfail [-- --quick] [--duration 5s] [--concurrency 32]
 */
import { durationFlag, integerFlag, parseFlags } from '../src/cli/args.js';
import { BalancedPool, type Dispatcher } from 'undici';
import { PoiseDispatcher } from '../src/http.js';
import { Balancer, createLogger, type PolicyName } from '../src/runtime.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { closedLoop, forkBackends, isMain, percentile, round } from './lib/tail-kit.js';

/** How the fast-fail scenario runs. */
export interface FastFailOptions {
  durationMs: number;
  /** Unmeasured time before measuring, ms (0: measured from the first request). */
  warmupMs: number;
  concurrency: number;
  /** The healthy backends' answer time, ms. */
  delayMs: number;
}

/** One system's figures. */
export interface FastFailRow extends Record<string, unknown> {
  scenario: 'fast-fail';
  system: string;
  requests: number;
  failedPct: number;
  /** Failures avoided against a rotation without defence (10 % failed), percent. */
  avoidedPct: number;
  p50Ms: number;
  p99Ms: number;
}

const BACKENDS = 20;
const FAILING = 2;
const POLICIES: readonly PolicyName[] = ['p2c:latency', 'p2c:requests', 'round-robin'];

/** Runs every system; one row each (round-robin's share is the reference). */
export async function runFastFail(o: FastFailOptions): Promise<FastFailRow[]> {
  const group = await forkBackends(1, BACKENDS, {
    delaysMs: Array.from({ length: BACKENDS }, (_, i) => (i < FAILING ? 0 : o.delayMs)),
    errorRates: Array.from({ length: BACKENDS }, (_, i) => (i < FAILING ? 1 : 0)),
  });
  const origins = group.ports.map((p) => `http://127.0.0.1:${p}`);
  const pool = { connections: 16, pipelining: 1 };
  const rows: FastFailRow[] = [];
  try {
    for (const system of [...POLICIES, 'BalancedPool']) {
      progress(`fast-fail: ${system}`);
      let dispatcher: Dispatcher;
      let url = 'http://api/';
      let balancer: Balancer | undefined;
      if (system === 'BalancedPool') {
        dispatcher = new BalancedPool(origins, pool);
        url = `${origins[0]}/`;
      } else {
        balancer = new Balancer({ logger: createLogger({ level: 'silent' }), health: { outlier: { intervalMs: 1000 } } });
        balancer.update(group.ports.map((p, i) => ({ id: `b${i}`, address: `127.0.0.1:${p}` })));
        dispatcher = new PoiseDispatcher({ router: balancer.router({ policy: system as PolicyName }), origin: 'http://api', pool });
      }
      if (o.warmupMs > 0) await closedLoop(dispatcher, url, o.concurrency, o.warmupMs);
      const r = await closedLoop(dispatcher, url, o.concurrency, o.durationMs);
      rows.push({
        scenario: 'fast-fail',
        system: system === 'BalancedPool' ? system : `poise ${system}`,
        requests: r.requests,
        failedPct: round((100 * r.failed) / Math.max(1, r.requests), 3),
        p50Ms: round(percentile(r.latenciesMs, 0.5)),
        p99Ms: round(percentile(r.latenciesMs, 0.99)),
        avoidedPct: 0,
      });
      await dispatcher.close();
      balancer?.close();
    }
  } finally {
    group.close();
    progressDone();
  }
  const rotation = (100 * FAILING) / BACKENDS;
  for (const r of rows) r.avoidedPct = round(100 * (1 - r.failedPct / rotation), 1);
  return rows;
}

if (isMain(import.meta.url)) {
  const { values } = parseFlags(process.argv.slice(2), {
    quick: { type: 'boolean' },
    duration: { type: 'string' },
    concurrency: { type: 'string' },
    'dry-run': { type: 'boolean' },
  });
  const quick = values.quick === true;
  const opts: FastFailOptions = {
    durationMs: durationFlag('--duration', values.duration, 500, 600_000) ?? (quick ? 2000 : 5000),
    warmupMs: 0,
    concurrency: integerFlag('--concurrency', values.concurrency, 1, 4096) ?? 32,
    delayMs: 1,
  };
  const rows = await runFastFail(opts);
  console.log(formatTable(rows));
  const p2c = rows.find((r) => r.system === 'poise p2c:latency')!;
  console.log(`p2c:latency avoided ${p2c.avoidedPct} % of a defenceless rotation's failures (target ≥ 85 %)`);
  if (values['dry-run'] !== true && !quick) console.log(writeResults('tail-fastfail', { options: opts, rows }));
}
