/**
 * bench:tail — the tail at scale (issue 39): one run, systems side by side.
 *
 *   npm run bench:tail [-- --scenarios cold,fanout,fast-fail] [--quick] [--runs N]
 *                      [--duration 6.5s] [--concurrency 32] [--note TEXT] [--dry-run]
 *
 * `--quick`: one run of each scenario (`cold`: two fresh 6.5 s processes,
 * about 15 s) to check it runs; figures count from a quiet machine's full
 * run only. `--runs` overrides either. The load average at the start and
 * the end is printed and recorded: figures taken on a busy machine do not
 * reproduce. Results: bench/results/tail.json (not with --dry-run).
 *
 * Scenarios, one module each (its header says what it measures):
 * - cold (bench/tail-cold.ts): a fresh client process per run, 4 backends,
 *   one 10× slower; the slow share per 250 ms of the first 5 s and the p99
 *   over the first 6.5 s, poise p2c:latency against undici's BalancedPool.
 * - fanout (bench/tail-fanout.ts): 100 backends, each request stalled 1 s
 *   with probability 1 %: p50…p99.9 and extra requests without hedging, with
 *   a fixed and with the adaptive delay (also `npm run bench:tail-fanout`).
 * - fast-fail (bench/tail-fastfail.ts): 20 backends, 2 answering 503 at once:
 *   the share of requests that failed per policy (also `npm run bench:tail-fastfail`).
 *
 * Plugging in a scenario module: it exports an async function that runs its
 * scenario and returns its table rows — an array of records (one table,
 * titled with the scenario's name) or a {@link TailScenarioOutput} (titled
 * tables, and what it adds to the results file). It starts and stops its
 * own backends. Add one import and one entry to {@link SCENARIOS} below,
 * adapting {@link TailFlags} to the function's own options in the entry,
 * e.g. `fanout: (f) => runFanout({ quick: f.quick })`. The scenario's name
 * is then accepted by `--scenarios` and run by default.
 */
import os from 'node:os';
import { durationFlag, integerFlag, parseFlags } from '../src/cli/args.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { runCold, type TailScenarioOutput } from './tail-cold.js';
import { fanoutVerdicts, runFanout } from './tail-fanout.js';
import { runFastFail } from './tail-fastfail.js';

/** The flags every scenario entry may read. */
export interface TailFlags {
  /** `--quick`: the shortest run that still exercises the scenario. */
  quick: boolean;
  /** `--runs`, when given. */
  runs: number | undefined;
  /** `--duration` (ms), when given. */
  durationMs: number | undefined;
  /** `--concurrency`, when given. */
  concurrency: number | undefined;
  /** A progress line (harness.ts `progress`). */
  progress: (line: string) => void;
}

/** A scenario's entry: runs it with the flags; its rows, or titled tables and results. */
type Scenario = (flags: TailFlags) => Promise<Record<string, unknown>[] | TailScenarioOutput>;

/** Every scenario, in the order they run. One import and one entry per scenario module (file comment). */
const SCENARIOS: Record<string, Scenario> = {
  cold: (f) => runCold({ runs: f.runs ?? (f.quick ? 1 : 3), durationMs: f.durationMs, concurrency: f.concurrency, progress: f.progress }),
  fanout: async (f) => {
    f.progress('fan-out: 100 backends, 1 % of requests stalled 1 s; no hedge, a fixed 10 ms delay, the adaptive delay');
    const rows = await runFanout({
      durationMs: f.durationMs ?? (f.quick ? 3000 : 10_000),
      warmupMs: f.quick ? 1000 : 3000,
      concurrency: f.concurrency ?? 32,
      fixedDelayMs: 10,
    });
    return {
      tables: [
        { title: 'fan-out', rows },
        { title: 'fan-out targets', rows: fanoutVerdicts(rows) },
      ],
      results: { rows },
    };
  },
  'fast-fail': (f) => {
    f.progress('fast-fail: 20 backends, 2 answering 503 at once');
    return runFastFail({ durationMs: f.durationMs ?? (f.quick ? 2000 : 5000), warmupMs: 0, concurrency: f.concurrency ?? 32, delayMs: 1 });
  },
};

const { values } = parseFlags(process.argv.slice(2), {
  scenarios: { type: 'string' },
  quick: { type: 'boolean' },
  runs: { type: 'string' },
  duration: { type: 'string' },
  concurrency: { type: 'string' },
  note: { type: 'string' },
  'dry-run': { type: 'boolean' },
});
const names = Object.keys(SCENARIOS);
const chosen = (values.scenarios ?? names.join(',')).split(',').filter((x) => x !== '');
for (const s of chosen)
  if (!names.includes(s)) throw new Error(`--scenarios: must list some of ${names.join(', ')}, got ${JSON.stringify(s)}`);
const flags: TailFlags = {
  quick: values.quick === true,
  runs: integerFlag('--runs', values.runs, 1, 100),
  durationMs: durationFlag('--duration', values.duration, 1500, 600_000),
  concurrency: integerFlag('--concurrency', values.concurrency, 1, 4096),
  progress,
};

const loadStart = os.loadavg();
const results: Record<string, unknown> = {};
for (const name of chosen) {
  const out = await SCENARIOS[name]!(flags);
  const { tables, results: data } = Array.isArray(out) ? { tables: [{ title: name, rows: out }], results: { rows: out } } : out;
  progressDone();
  for (const t of tables) process.stdout.write(`\n${t.title}\n${formatTable(t.rows)}\n`);
  results[name] = data;
}
const loadEnd = os.loadavg();
const load = (xs: number[]): string => xs.map((x) => x.toFixed(2)).join(' ');
process.stdout.write(`\nload average ${load(loadStart)} at the start, ${load(loadEnd)} at the end\n`);
if (values['dry-run'] === true) {
  process.stdout.write('--dry-run: nothing written\n');
} else {
  const file = writeResults('tail', {
    quick: flags.quick,
    loadAverage: { start: loadStart, end: loadEnd },
    note: values.note,
    scenarios: results,
  });
  process.stdout.write(`wrote ${file}\n`);
}
