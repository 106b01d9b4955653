/**
 * bench:tail's `cold` scenario (issue 39, the cold start): does a process's
 * first second route as well as its tenth?
 *
 * 4 loopback HTTP backends in a child process of their own (bench:http's,
 * bench/http-backend.ts), b0 10× slower (10 ms against 1 ms). Each run forks
 * a fresh client process per system (bench/tail-cold-client.ts: the
 * dispatcher and a closed-loop client on its main thread, `concurrency`
 * requests in flight from the first one), poise `p2c:latency` and undici's
 * `BalancedPool` in turn, and counts the requests started in the first
 * `durationMs` (6.5 s) from the first request: the slow backend's share in
 * each 250 ms of the first `shareMs` (5 s), and the p50 / p99 / p99.9 of them
 * all. Targets (issue 39): ≤ 0.2 % on the slow backend in every 250 ms after
 * the first second; p99 ≤ 0.5× BalancedPool's.
 *
 * Tables: one row per system and run; the p99 ratio and the targets per run;
 * the slow share per 250 ms of each system's median run (by p99).
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ColdPlan, ColdReport } from './tail-cold-client.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN_MS = 250;
const FAST_MS = 1;
const SLOW_MS = 10;
const SYSTEMS: ColdPlan['system'][] = ['poise p2c:latency', 'BalancedPool'];
const POISE = SYSTEMS[0]!;

/** How the cold scenario runs. */
export interface ColdOptions {
  /** Fresh processes per system (each `durationMs` long). */
  runs: number;
  /** The window counted from the first request, ms (the p99's; default 6,500). */
  durationMs?: number;
  /** The window of the per-250 ms slow shares, ms (default 5,000; at most `durationMs`). */
  shareMs?: number;
  /** Requests in flight from the first (default 32). */
  concurrency?: number;
  /** Called before each fresh process with a line saying which. */
  progress?: (line: string) => void;
}

/** A titled table of rows. */
export interface TailTable {
  title: string;
  rows: Record<string, unknown>[];
}

/** What a scenario returns to bench:tail: its tables, and what it adds to the results file. */
export interface TailScenarioOutput {
  tables: TailTable[];
  results: Record<string, unknown>;
}

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;
const pct = (slow: number, total: number): number => round((100 * slow) / Math.max(1, total), 2);
const sum = (xs: readonly number[], from: number, to: number): number => xs.slice(from, to).reduce((a, b) => a + b, 0);

function percentile(sorted: Float64Array, q: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** bench:http's 4 backends in a child process, b0 slow; their ports and the process. */
async function startBackends(): Promise<{ ports: number[]; stop: () => void }> {
  const backend = fork(path.join(HERE, 'http-backend.js'), ['4'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const ports = await new Promise<number[]>((resolve) => backend.once('message', (m: { ports: number[] }) => resolve(m.ports)));
  await new Promise<void>((resolve) => {
    backend.once('message', () => resolve());
    backend.send({ delaysMs: [SLOW_MS, FAST_MS, FAST_MS, FAST_MS], errorRates: [0, 0, 0, 0] });
  });
  return { ports, stop: () => backend.disconnect() };
}

/** One fresh client process of `system`; its report. */
function coldRun(plan: ColdPlan): Promise<ColdReport> {
  const child = fork(path.join(HERE, 'tail-cold-client.js'), [JSON.stringify(plan)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m: ColdReport) => resolve(m));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`tail-cold-client (${plan.system}) exited with ${code} before reporting`)));
  });
}

/** One system's run: its row, its p99 and its slow share per bin of the share window. */
function summarise(system: string, run: number, r: ColdReport, shareBins: number) {
  const sorted = Float64Array.from(r.latenciesMs).sort();
  const firstLate = 1000 / BIN_MS;
  const shares = r.total.slice(0, shareBins).map((n, b) => pct(r.slow[b]!, n));
  const p99 = round(percentile(sorted, 0.99));
  const row = {
    system,
    run,
    requests: sorted.length,
    p50: round(percentile(sorted, 0.5)),
    p99,
    'p99.9': round(percentile(sorted, 0.999)),
    'slow % 0–1 s': pct(sum(r.slow, 0, firstLate), sum(r.total, 0, firstLate)),
    'slow % worst 250 ms in 1–5 s': Math.max(...shares.slice(firstLate)),
    'slow % 1–5 s': pct(sum(r.slow, firstLate, shareBins), sum(r.total, firstLate, shareBins)),
    errors: r.errors,
  };
  return { row, p99, shares };
}

/** Runs the cold scenario: `runs` fresh client processes per system against one set of backends. */
export async function runCold(options: ColdOptions): Promise<TailScenarioOutput> {
  const durationMs = options.durationMs ?? 6500;
  const shareMs = Math.min(options.shareMs ?? 5000, durationMs);
  const concurrency = options.concurrency ?? 32;
  const shareBins = Math.ceil(shareMs / BIN_MS);
  const { ports, stop } = await startBackends();
  const rows: Record<string, unknown>[] = [];
  const targets: Record<string, unknown>[] = [];
  const bySystem = new Map<string, { p99: number; shares: number[] }[]>();
  try {
    for (let run = 1; run <= options.runs; run++) {
      const p99s = new Map<string, number>();
      for (const [i, system] of SYSTEMS.entries()) {
        options.progress?.(
          `cold: ${system}, run ${run} of ${options.runs} (${(run - 1) * SYSTEMS.length + i + 1}/${options.runs * SYSTEMS.length})`,
        );
        const r = await coldRun({ system, ports, durationMs, binMs: BIN_MS, concurrency });
        const s = summarise(system, run, r, shareBins);
        rows.push(s.row);
        p99s.set(system, s.p99);
        bySystem.set(system, [...(bySystem.get(system) ?? []), { p99: s.p99, shares: s.shares }]);
        if (system === POISE) {
          targets.push({ run, 'worst 250 ms in 1–5 s ≤ 0.2 %': s.row['slow % worst 250 ms in 1–5 s'] <= 0.2 ? 'yes' : 'no' });
        }
      }
      const ratio = round(p99s.get(POISE)! / p99s.get('BalancedPool')!);
      Object.assign(targets[targets.length - 1]!, { 'p99 poise / BalancedPool': ratio, '≤ 0.5': ratio <= 0.5 ? 'yes' : 'no' });
    }
  } finally {
    stop();
  }
  // The slow share per 250 ms of each system's median run (by p99): one row per bin, one column per system.
  const medians = [...bySystem].map(
    ([system, runs]) => [system, [...runs].sort((a, b) => a.p99 - b.p99)[Math.floor(runs.length / 2)]!.shares] as const,
  );
  const perBin: Record<string, unknown>[] = [];
  for (let b = 0; b < shareBins; b++) {
    const row: Record<string, unknown> = { 'from (s)': (b * BIN_MS) / 1000 };
    for (const [system, shares] of medians) row[`${system}: slow %`] = shares[b];
    perBin.push(row);
  }
  return {
    tables: [
      { title: `cold: ${concurrency} in flight from the first request, ${durationMs / 1000} s per fresh process (latencies ms)`, rows },
      { title: 'cold: targets per run', rows: targets },
      { title: 'cold: the slow share per 250 ms (median run by p99)', rows: perBin },
    ],
    results: {
      config: { runs: options.runs, durationMs, shareMs, binMs: BIN_MS, concurrency, fastMs: FAST_MS, slowMs: SLOW_MS },
      rows,
      targets,
      perBin: Object.fromEntries([...bySystem].map(([s, runs]) => [s, runs.map((r) => r.shares)])),
    },
  };
}
