/**
 * bench:tail's fan-out scenario (issue 39, "The Tail at Scale"): 100
 * loopback HTTP backends in 4 child processes (independent event loops),
 * every request stalled 1 s with probability 1 % whichever backend takes
 * it — the request is slow, not the backend, so no choice of backend avoids
 * it. A closed-loop client (`concurrency` in flight) through a
 * PoiseDispatcher (p2c:latency), three ways: without hedging, hedged after a
 * fixed delay, hedged after the adaptive delay (each backend's p95 of
 * latency to headers from the LoadTable). Each way warms up first (the
 * adaptive delay needs samples), then measures.
 *
 * Reported per way: client p50 / p95 / p99 / p99.9 and the extra requests
 * (hedges sent / requests). Targets: hedged p99.9 ≤ 2× the un-hedged p95,
 * extra ≤ 5 %.
 *
 *   npm run bench:tail-fanout [-- --quick] [--duration 5s] [--concurrency 32] [--delay 10ms]
 */
import { durationFlag, integerFlag, parseFlags } from '../src/cli/args.js';
import { type HedgeOptions, PoiseDispatcher } from '../src/http.js';
import { Balancer, createLogger } from '../src/runtime.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { closedLoop, forkBackends, isMain, percentile, round } from './lib/tail-kit.js';

/** How the fan-out scenario runs. */
export interface FanoutOptions {
  /** Measured time per way, ms. */
  durationMs: number;
  /** Warm-up per way, ms. */
  warmupMs: number;
  concurrency: number;
  /** The fixed hedge delay, ms. */
  fixedDelayMs: number;
  /** Backends (in 4 processes), and how long each answers normally. */
  backends?: number;
  baseDelayMs?: number;
}

/** One way's figures. */
export interface FanoutRow extends Record<string, unknown> {
  scenario: 'fan-out';
  system: string;
  requests: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  p999Ms: number;
  extraPct: number;
  failed: number;
}

const PROCESSES = 4;

/** Runs the three ways; one row each (the un-hedged first). */
export async function runFanout(o: FanoutOptions): Promise<FanoutRow[]> {
  const n = o.backends ?? 100;
  const group = await forkBackends(PROCESSES, Math.ceil(n / PROCESSES), {
    delaysMs: new Array<number>(n).fill(o.baseDelayMs ?? 1),
    errorRates: new Array<number>(n).fill(0),
    stallRate: 0.01,
    stallMs: 1000,
  });
  const ways: Array<[string, HedgeOptions | undefined]> = [
    ['no hedging', undefined],
    [`hedge after ${o.fixedDelayMs} ms`, { delayMs: o.fixedDelayMs }],
    ['hedge after the p95 (adaptive)', {}],
  ];
  const rows: FanoutRow[] = [];
  try {
    // One unmeasured pass first: the backends' processes and this one's code warm, so the first way is not the cold one.
    ways.unshift(['(warm-up)', undefined]);
    for (const [system, hedge] of ways) {
      progress(`fan-out: ${system}`);
      const balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
      balancer.update(group.ports.map((p, i) => ({ id: `b${i}`, address: `127.0.0.1:${p}` })));
      const dispatcher = new PoiseDispatcher({
        router: balancer.router({ policy: 'p2c:latency' }),
        origin: 'http://api',
        pool: { connections: 16, pipelining: 1 },
        hedge,
      });
      await closedLoop(dispatcher, 'http://api/', o.concurrency, o.warmupMs);
      const before = dispatcher.hedges.sent;
      const r = await closedLoop(dispatcher, 'http://api/', o.concurrency, o.durationMs);
      const extra = dispatcher.hedges.sent - before;
      if (system !== '(warm-up)')
        rows.push({
          scenario: 'fan-out',
          system,
          requests: r.requests,
          p50Ms: round(percentile(r.latenciesMs, 0.5)),
          p95Ms: round(percentile(r.latenciesMs, 0.95)),
          p99Ms: round(percentile(r.latenciesMs, 0.99)),
          p999Ms: round(percentile(r.latenciesMs, 0.999)),
          extraPct: round((100 * extra) / Math.max(1, r.requests)),
          failed: r.failed,
        });
      await dispatcher.close();
      balancer.close();
    }
  } finally {
    group.close();
    progressDone();
  }
  return rows;
}

/** The targets, against the un-hedged row's p95: hedged p99.9 ≤ 2×, extra ≤ 5 %. */
export function fanoutVerdicts(rows: readonly FanoutRow[]): Array<Record<string, unknown>> {
  const base = rows[0]!;
  return rows.slice(1).map((r) => ({
    system: r.system,
    'p99.9 / unhedged p95': round(r.p999Ms / base.p95Ms),
    'target ≤ 2': r.p999Ms <= 2 * base.p95Ms,
    'extra %': r.extraPct,
    'target ≤ 5 %': r.extraPct <= 5,
  }));
}

if (isMain(import.meta.url)) {
  const { values } = parseFlags(process.argv.slice(2), {
    quick: { type: 'boolean' },
    duration: { type: 'string' },
    concurrency: { type: 'string' },
    delay: { type: 'string' },
    'dry-run': { type: 'boolean' },
  });
  const quick = values.quick === true;
  const opts: FanoutOptions = {
    durationMs: durationFlag('--duration', values.duration, 500, 600_000) ?? (quick ? 3000 : 10_000),
    warmupMs: quick ? 1000 : 3000,
    concurrency: integerFlag('--concurrency', values.concurrency, 1, 4096) ?? 32,
    fixedDelayMs: durationFlag('--delay', values.delay, 0, 60_000) ?? 10,
  };
  const rows = await runFanout(opts);
  console.log(formatTable(rows));
  console.log(formatTable(fanoutVerdicts(rows)));
  if (values['dry-run'] !== true && !quick) console.log(writeResults('tail-fanout', { options: opts, rows }));
}
