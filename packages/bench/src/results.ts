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

/**
 * The columns worth printing for `results`: a column with no value in any
 * row (the backup share outside the failover scenario) says nothing, so it
 * is left out of the table and the report.
 */
export function shownColumns(results: readonly PolicyResult[]): Column[] {
  return COLUMNS.filter((c) =>
    results.some((r) => {
      const v = c.value(r);
      return v !== null && !Number.isNaN(v);
    }),
  );
}

/** The one table, as text; the best figure in each column is marked with `*`; columns empty in every row are left out. */
export function formatTable(results: readonly PolicyResult[]): string {
  const best = bestOf(results);
  const columns = shownColumns(results);
  const header = ['policy', ...columns.map((c) => c.header)];
  const rows = results.map((r) => [
    r.interrupted ? `${r.policy} (cut)` : r.policy,
    ...columns.map((c) => {
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

/**
 * The rule behind the run's recommendation, in three steps over the
 * policies that ran to the end (all of them when every one was cut):
 *
 * 1. Keep those within `THROUGHPUT_WITHIN` of the best throughput and within
 *    `ERRORS_WITHIN` (a fraction of requests) of the lowest error rate: under
 *    one closed-loop load a policy that completes fewer requests, or fails
 *    more of them, is not a candidate whatever its tail.
 * 2. Of those, recommend the lowest p99 (the tail is what a balancer
 *    changes most: the median barely moves between policies).
 * 3. A runner-up whose p99 is within `TIE_WITHIN` of the winner's is named
 *    as tied: on a shared or loaded machine a gap that small is noise.
 *
 * Candidates kept by step 1 are never empty: when no policy passes both
 * bounds (one has the throughput, another the errors), step 2 runs over all.
 *
 * 4. When the winner is `least-loaded` and the run has the stale-loads
 *    table, the recommendation says what that table shows: it wins here
 *    because every worker reads the same current counters in one process;
 *    with loads as stale as its last row it herds, so across processes (which
 *    share no counters) the best `p2c` candidate of this run is named.
 */
export const RECOMMEND_RULE = { THROUGHPUT_WITHIN: 0.1, ERRORS_WITHIN: 0.005, TIE_WITHIN: 0.1 } as const;

/** The recommendation of a run (printed after the table, kept in the JSON). */
export interface Recommendation {
  policy: string;
  /** A policy whose p99 is within {@link RECOMMEND_RULE}.TIE_WITHIN of the winner's, or null. */
  tiedWith: string | null;
  /** Why, from the run's own figures: one sentence. */
  why: string;
  /** Step 4's caveat (least-loaded and stale loads), or null. */
  caveat: string | null;
}

const errorRate = (r: PolicyResult): number => (r.requests > 0 ? r.errors / r.requests : r.errors > 0 ? 1 : 0);

/** The recommendation by {@link RECOMMEND_RULE} over `results` (and the run's balls tables); null when nothing was measured. */
export function recommend(results: readonly PolicyResult[], balls: BallsResult | null = null): Recommendation | null {
  const complete = results.filter((r) => !r.interrupted);
  const pool = complete.length > 0 ? complete : results;
  if (pool.length === 0) return null;
  const { THROUGHPUT_WITHIN, ERRORS_WITHIN, TIE_WITHIN } = RECOMMEND_RULE;
  const topThroughput = Math.max(...pool.map((r) => r.throughput));
  const leastErrors = Math.min(...pool.map(errorRate));
  const kept = pool.filter((r) => r.throughput >= topThroughput * (1 - THROUGHPUT_WITHIN) && errorRate(r) <= leastErrors + ERRORS_WITHIN);
  const candidates = kept.length > 0 ? kept : pool;
  // Stable: among equal p99s the earlier policy (the table's order) wins.
  const ranked = candidates.slice().sort((a, b) => a.latencyMs.p99 - b.latencyMs.p99);
  const winner = ranked[0]!;
  const second = ranked[1];
  const tied = second !== undefined && second.latencyMs.p99 <= winner.latencyMs.p99 * (1 + TIE_WITHIN) ? second : undefined;
  const left = pool.filter((r) => !candidates.includes(r)).map((r) => r.policy);
  const pctOf = (v: number): string => `${(v * 100).toFixed(1)}%`;
  const bounds =
    `within ${THROUGHPUT_WITHIN * 100}% of the best throughput (${topThroughput.toFixed(0)} req/s) and ` +
    `${(ERRORS_WITHIN * 100).toFixed(1)} points of the lowest error rate (${(leastErrors * 100).toFixed(2)}%)`;
  let why =
    candidates.length === 1
      ? `the only policy ${bounds}, p99 ${ms(winner.latencyMs.p99)} ms`
      : `the lowest p99 (${ms(winner.latencyMs.p99)} ms) of the ${candidates.length === pool.length ? 'policies' : `${candidates.length} policies`} ${bounds}`;
  if (kept.length === 0)
    why = `the lowest p99 (${ms(winner.latencyMs.p99)} ms): no policy had both the best throughput and the fewest errors`;
  if (winner.slowShare !== null) why += `; it sent the slow backend ${pctOf(winner.slowShare)} of its requests`;
  if (left.length > 0 && kept.length > 0) why += `; not candidates (throughput or errors): ${left.join(', ')}`;
  if (tied !== undefined) why += `. ${tied.policy}'s p99 (${ms(tied.latencyMs.p99)} ms) is within ${TIE_WITHIN * 100}%: a tie on this run`;
  return { policy: winner.policy, tiedWith: tied?.policy ?? null, why, caveat: staleCaveat(winner, pool, balls) };
}

/** Step 4 of {@link RECOMMEND_RULE}: least-loaded's herding on stale loads, from the run's own stale-loads table. */
function staleCaveat(winner: PolicyResult, pool: readonly PolicyResult[], balls: BallsResult | null): string | null {
  const last = balls?.stale.rows.at(-1);
  if (winner.policy !== 'least-loaded' || last === undefined) return null;
  const p2c = pool.filter((r) => r.policy.startsWith('p2c')).sort((a, b) => a.latencyMs.p99 - b.latencyMs.p99)[0];
  return (
    `least-loaded wins here because every worker reads the same current counters in one process; with loads refreshed every ${last.b} picks ` +
    `it herds (max load ${last.leastLoaded.toFixed(1)} against ${last.twoChoice.toFixed(1)} for two choices, stale-loads table)` +
    (p2c === undefined ? '' : `: across processes, which share no counters, use ${p2c.policy} (p99 ${ms(p2c.latencyMs.p99)} ms here)`)
  );
}

/** The recommendation as the report's last lines. */
export function formatRecommendation(rec: Recommendation | null): string {
  if (rec === null) return 'Recommendation: none (nothing measured).';
  return (
    `Recommendation: ${rec.policy}${rec.tiedWith === null ? '' : ` (or ${rec.tiedWith})`} — ${rec.why}.\n` +
    (rec.caveat === null ? '' : `But ${rec.caveat}.\n`) +
    '(rule: RECOMMEND_RULE in packages/bench/src/results.ts; a loaded machine moves the tails, so compare runs, not one figure)'
  );
}
