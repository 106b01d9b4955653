/**
 * bench:tail — the tail at scale (issue 39), one run, systems side by side.
 *
 *   npm run bench:tail [-- --scenarios cold] [--runs 3] [--duration 6.5s]
 *                      [--concurrency 32] [--note TEXT] [--dry-run]
 *
 * Scenarios:
 * - cold: 4 loopback HTTP backends (a child process of their own, bench:http's
 *   backends), b0 10× slower (10 ms against 1 ms). Each run forks a fresh
 *   client process per system (bench/tail-cold.ts: the dispatcher and a
 *   closed-loop client on its main thread, `--concurrency` requests in flight
 *   from the first one), poise p2c:latency and undici's BalancedPool in turn,
 *   and counts the requests started in the first `--duration` (default 6.5 s)
 *   from the first request: the slow backend's share in each 250 ms and the
 *   p99 of them all. Targets (issue 39): ≤ 0.2 % on the slow backend in
 *   every 250 ms after the first second; p99 ≤ 0.5× BalancedPool's.
 *
 * Printed: one row per system and run (p50, p99, p99.9, the slow share in
 * 0–1 s, the worst 250 ms after 1 s and over 1 s to the end, errors), the
 * ratios per run, and the slow share per 250 ms (the median run of each
 * system). The load average at the start and the end is recorded: figures
 * taken on a busy machine do not reproduce. Results: bench/results/tail.json
 * (not with --dry-run).
 */
import { fork } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { durationFlag, integerFlag, parseFlags } from '../src/cli/args.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import type { ColdPlan, ColdReport } from './tail-cold.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseFlags(process.argv.slice(2), {
  scenarios: { type: 'string' },
  runs: { type: 'string' },
  duration: { type: 'string' },
  concurrency: { type: 'string' },
  note: { type: 'string' },
  'dry-run': { type: 'boolean' },
});
const SCENARIOS = ['cold'] as const;
const scenarios = (values.scenarios ?? SCENARIOS.join(',')).split(',').filter((x) => x !== '');
for (const s of scenarios)
  if (!(SCENARIOS as readonly string[]).includes(s))
    throw new Error(`--scenarios: must list some of ${SCENARIOS.join(', ')}, got ${JSON.stringify(s)}`);
const RUNS = integerFlag('--runs', values.runs, 1, 100) ?? 3;
const DURATION_MS = durationFlag('--duration', values.duration, 1500, 600_000) ?? 6500;
const CONCURRENCY = integerFlag('--concurrency', values.concurrency, 1, 4096) ?? 32;
const BIN_MS = 250;
const FAST_MS = 1;
const SLOW_MS = 10;
const SYSTEMS: ColdPlan['system'][] = ['poise p2c:latency', 'BalancedPool'];

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;
const pct = (slow: number, total: number): number => round((100 * slow) / Math.max(1, total), 2);
function percentile(sorted: Float64Array, q: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

// ------------------------------------------------------------------ backends

const backend = fork(path.join(HERE, 'http-backend.js'), ['4'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
const ports = await new Promise<number[]>((resolve) => backend.once('message', (m: { ports: number[] }) => resolve(m.ports)));
await new Promise<void>((resolve) => {
  backend.once('message', () => resolve());
  backend.send({ delaysMs: [SLOW_MS, FAST_MS, FAST_MS, FAST_MS], errorRates: [0, 0, 0, 0] });
});

/** One fresh client process of `system`; its report. */
function coldRun(system: ColdPlan['system']): Promise<ColdReport> {
  const plan: ColdPlan = { system, ports, durationMs: DURATION_MS, binMs: BIN_MS, concurrency: CONCURRENCY };
  const child = fork(path.join(HERE, 'tail-cold.js'), [JSON.stringify(plan)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m: ColdReport) => resolve(m));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`tail-cold (${system}) exited with ${code} before reporting`)));
  });
}

type ColdRow = {
  scenario: 'cold';
  system: string;
  run: number;
  requests: number;
  p50: number;
  p99: number;
  p999: number;
  'slow % 0–1 s': number;
  'slow % worst 250 ms after 1 s': number;
  'slow % 1 s–end': number;
  errors: number;
};

// ------------------------------------------------------------------ the run

const loadStart = os.loadavg();
const rows: ColdRow[] = [];
const binsBySystem = new Map<string, { p99: number; shares: number[] }[]>();
const ratios: Record<string, unknown>[] = [];
const firstLate = 1000 / BIN_MS;
if (scenarios.includes('cold')) {
  for (let run = 1; run <= RUNS; run++) {
    const p99s = new Map<string, number>();
    for (const [i, system] of SYSTEMS.entries()) {
      progress(`[${(run - 1) * SYSTEMS.length + i + 1}/${RUNS * SYSTEMS.length}] cold: ${system}, run ${run} (${DURATION_MS / 1000} s)`);
      const r = await coldRun(system);
      const sorted = Float64Array.from(r.latenciesMs).sort();
      const shares = r.total.map((n, b) => pct(r.slow[b]!, n));
      const sum = (xs: number[], from: number, to: number): number => xs.slice(from, to).reduce((a, b) => a + b, 0);
      const p99 = round(percentile(sorted, 0.99));
      p99s.set(system, p99);
      rows.push({
        scenario: 'cold',
        system,
        run,
        requests: sorted.length,
        p50: round(percentile(sorted, 0.5)),
        p99,
        p999: round(percentile(sorted, 0.999)),
        'slow % 0–1 s': pct(sum(r.slow, 0, firstLate), sum(r.total, 0, firstLate)),
        'slow % worst 250 ms after 1 s': Math.max(...shares.slice(firstLate)),
        'slow % 1 s–end': pct(sum(r.slow, firstLate, r.total.length), sum(r.total, firstLate, r.total.length)),
        errors: r.errors,
      });
      const runs = binsBySystem.get(system) ?? [];
      runs.push({ p99, shares });
      binsBySystem.set(system, runs);
    }
    const poise = p99s.get('poise p2c:latency')!;
    const balanced = p99s.get('BalancedPool')!;
    ratios.push({ scenario: 'cold', run, 'p99 poise/BalancedPool (≤ 0.5)': round(poise / balanced) });
  }
}
progressDone();
const loadEnd = os.loadavg();
backend.disconnect();

process.stdout.write(`${formatTable(rows)}\n\n${formatTable(ratios)}\n`);
// The slow share per 250 ms of each system's median run (by p99): one row per bin, one column per system.
const medians = [...binsBySystem].map(
  ([system, runs]) => [system, [...runs].sort((a, b) => a.p99 - b.p99)[Math.floor(runs.length / 2)]!.shares] as const,
);
const perBin: Record<string, unknown>[] = [];
for (let b = 0; b < (medians[0]?.[1].length ?? 0); b++) {
  const row: Record<string, unknown> = { 'from (s)': (b * BIN_MS) / 1000 };
  for (const [system, shares] of medians) row[`${system}: slow % (median run)`] = shares[b];
  perBin.push(row);
}
if (perBin.length > 0) process.stdout.write(`\n${formatTable(perBin)}\n`);
process.stdout.write(
  `load average ${loadStart.map((x) => x.toFixed(2)).join(' ')} at the start, ${loadEnd.map((x) => x.toFixed(2)).join(' ')} at the end\n`,
);
if (values['dry-run'] === true) {
  process.stdout.write('--dry-run: nothing written\n');
} else {
  const file = writeResults('tail', {
    config: { scenarios, runs: RUNS, durationMs: DURATION_MS, binMs: BIN_MS, concurrency: CONCURRENCY, fastMs: FAST_MS, slowMs: SLOW_MS },
    loadAverage: { start: loadStart, end: loadEnd },
    note: values.note,
    rows,
    ratios,
    perBin: Object.fromEntries([...binsBySystem].map(([s, runs]) => [s, runs.map((r) => r.shares)])),
  });
  process.stdout.write(`wrote ${file}\n`);
}
