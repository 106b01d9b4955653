/**
 * The data model of one `poise bench` run: what the table prints, the HTML
 * report draws and `--json` writes (the same object).
 */
import type { BallsResult } from './balls.js';
import type { BackendRole } from './scenarios.js';

/** One backend's part of one policy's run. */
export interface BackendShare {
  id: string;
  role: BackendRole;
  requests: number;
  errors: number;
  /** requests / all requests of the policy, in [0, 1]. */
  share: number;
}

/** Everything measured for one policy. */
export interface PolicyResult {
  policy: string;
  /** True when Ctrl-C cut this policy's run short. */
  interrupted: boolean;
  /** Seconds of measured load (after warm-up). */
  seconds: number;
  /** Completed requests (success or error reply) in the measured window. */
  requests: number;
  /** Error replies, transport errors and refused acquires. */
  errors: number;
  /** requests / seconds. */
  throughput: number;
  latencyMs: { p50: number; p99: number; p999: number; mean: number; max: number };
  /** Share of requests on the backends with role `slow`; null when the scenario has none. */
  slowShare: number | null;
  /**
   * Server-side in-flight requests, sampled every {@link SAMPLE_MS}: the
   * time-mean of the busiest backend's count, the time-mean of the average
   * backend's count, and their ratio (1 = perfectly even).
   */
  inflight: { max: number; mean: number; maxOverMean: number };
  perBackend: BackendShare[];
  /** Latency CDF points (ms, cumulative fraction). */
  cdf: Array<[number, number]>;
  /** In-flight over time (s since the measured window began, count) of the tracked backend. */
  trackedInflight: Array<[number, number]>;
  /** Scenario events as they happened (s since the measured window began). */
  events: Array<{ at: number; label: string }>;
  /**
   * Share of requests the `backup` backends answered (their own counts)
   * before and after the first scenario event; null without backups or event.
   */
  backupShare: { before: number; after: number } | null;
  /** Active-check up → down transitions during the policy's run; null when the scenario runs no checks. */
  checksMarkedDown: number | null;
}

/** Sampling period of the in-flight series, ms. */
export const SAMPLE_MS = 50;

/** A whole run. */
export interface BenchResult {
  tool: 'poise bench';
  version: string;
  machine: { node: string; platform: string; cpus: number; cpuModel: string };
  startedAt: string;
  config: {
    scenario: string;
    description: string;
    workers: number;
    backends: number;
    concurrency: number;
    durationS: number;
    warmupS: number;
    connection: string;
    seed: number | null;
    membership: string;
    /** The backend whose in-flight series is plotted (the slow one when there is one). */
    tracked: string | null;
  };
  policies: PolicyResult[];
  balls: BallsResult | null;
  interrupted: boolean;
}

/** A table column: how to read it from a result and which direction is better. */
export interface Column {
  key: string;
  header: string;
  value: (r: PolicyResult) => number | null;
  /** `none`: a figure to read, not to rank (nothing is marked best). */
  better: 'higher' | 'lower' | 'none';
  format: (v: number) => string;
  /** The cell text when it shows more than the compared value (default: `format(value)`). */
  text?: (r: PolicyResult) => string;
}

const ms = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const pct = (v: number): string => `${(v * 100).toFixed(1)}%`;

/** The columns of the one table, in order. */
export const COLUMNS: readonly Column[] = [
  { key: 'throughput', header: 'req/s', value: (r) => r.throughput, better: 'higher', format: (v) => v.toFixed(0) },
  { key: 'p50', header: 'p50 ms', value: (r) => r.latencyMs.p50, better: 'lower', format: ms },
  { key: 'p99', header: 'p99 ms', value: (r) => r.latencyMs.p99, better: 'lower', format: ms },
  { key: 'p999', header: 'p99.9 ms', value: (r) => r.latencyMs.p999, better: 'lower', format: ms },
  { key: 'slowShare', header: 'slow share', value: (r) => r.slowShare, better: 'lower', format: pct },
  {
    key: 'backupAfter',
    header: 'backup share before→after',
    value: (r) => r.backupShare?.after ?? null,
    better: 'none',
    format: pct,
    text: (r) => `${pct(r.backupShare?.before ?? 0)}→${pct(r.backupShare?.after ?? 0)}`,
  },
  { key: 'inflight', header: 'in-flight max/mean', value: (r) => r.inflight.maxOverMean, better: 'lower', format: (v) => v.toFixed(2) },
  {
    key: 'errors',
    header: 'errors',
    value: (r) => (r.requests > 0 ? r.errors / r.requests : r.errors > 0 ? 1 : 0),
    better: 'lower',
    format: (v) => `${(v * 100).toFixed(2)}%`,
    text: (r) => `${r.errors} (${((r.requests > 0 ? r.errors / r.requests : 0) * 100).toFixed(2)}%)`,
  },
];

/**
 * For each column, the best value among the results (null when no result has
 * one). A run cut short by Ctrl-C competes only when every run was cut.
 */
export function bestOf(results: readonly PolicyResult[]): Map<string, number | null> {
  const best = new Map<string, number | null>();
  const complete = results.filter((r) => !r.interrupted);
  const pool = complete.length > 0 ? complete : results;
  for (const c of COLUMNS) {
    let b: number | null = null;
    if (c.better === 'none') {
      best.set(c.key, null);
      continue;
    }
    for (const r of pool) {
      const v = c.value(r);
      if (v === null || Number.isNaN(v)) continue;
      if (b === null || (c.better === 'higher' ? v > b : v < b)) b = v;
    }
    best.set(c.key, b);
  }
  return best;
}

/** True when `v`, as printed, equals the best as printed (ties share the mark). */
export function isBest(c: Column, v: number | null, best: number | null): boolean {
  return v !== null && best !== null && !Number.isNaN(v) && c.format(v) === c.format(best);
}

/** The one table, as text; the best figure in each column is marked with `*`. */
export function formatTable(results: readonly PolicyResult[]): string {
  const best = bestOf(results);
  const header = ['policy', ...COLUMNS.map((c) => c.header)];
  const rows = results.map((r) => [
    r.interrupted ? `${r.policy} (cut)` : r.policy,
    ...COLUMNS.map((c) => {
      const v = c.value(r);
      if (v === null || Number.isNaN(v)) return '–';
      return `${c.text?.(r) ?? c.format(v)}${isBest(c, v, best.get(c.key) ?? null) ? '*' : ' '}`;
    }),
  ]);
  const widths = header.map((h, i) => Math.max(h.length + (i === 0 ? 0 : 1), ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  return [
    line(header.map((h, i) => (i === 0 ? h : `${h} `))),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line),
    '* best in column',
  ].join('\n');
}
