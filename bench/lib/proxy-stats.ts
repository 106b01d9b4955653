/**
 * The pure parts of bench/proxy: reading wrk's report, medians and spread
 * over interleaved rounds, the poise/HAProxy ratio table, and the top
 * self-time frames of a V8 `.cpuprofile`. No I/O here, so every function is
 * unit-tested (test/bench/proxy-stats.test.ts).
 */

/** One load-generator run, whichever generator produced it. */
export interface LoadResult {
  requests: number;
  seconds: number;
  reqPerSec: number;
  /** Response bytes read per second (headers included, as wrk counts them). */
  bytesPerSec: number;
  /** Latency percentiles, ms. */
  p50Ms: number;
  p99Ms: number;
  /** Socket errors: connect + read + write + timeout. */
  errors: number;
  /** Replies that were not 2xx or 3xx. */
  non2xx: number;
}

const SIZE_UNITS: Readonly<Record<string, number>> = { B: 1, KB: 2 ** 10, MB: 2 ** 20, GB: 2 ** 30, TB: 2 ** 40 };
const TIME_UNITS: Readonly<Record<string, number>> = { us: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** wrk's byte figures ("1.23GB", "512.00KB", "10B"): wrk divides by 1024. */
export function parseSize(text: string): number {
  const m = /^([\d.]+)([KMGT]?B)$/.exec(text.trim());
  if (m === null) throw new Error(`wrk size: cannot read "${text}"`);
  return Number(m[1]) * SIZE_UNITS[m[2]!]!;
}

/** wrk's durations ("612.00us", "1.20ms", "2.01s", "1.00m") in ms. */
export function parseDurationMs(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m|h)$/.exec(text.trim());
  if (m === null) throw new Error(`wrk duration: cannot read "${text}"`);
  return Number(m[1]) * TIME_UNITS[m[2]!]!;
}

/**
 * Reads the report of `wrk --latency`. Requests/s is recomputed from the
 * exact "N requests in Ts" line rather than wrk's rounded "Requests/sec".
 * Throws naming the missing line, so a changed wrk output fails loudly.
 */
export function parseWrk(output: string): LoadResult {
  const total = /(\d+) requests in ([\d.]+\w+), ([\d.]+[KMGT]?B) read/.exec(output);
  if (total === null) throw new Error('wrk output: no "N requests in T, B read" line');
  const p50 = /^\s*50%\s+(\S+)/m.exec(output);
  const p99 = /^\s*99%\s+(\S+)/m.exec(output);
  if (p50 === null || p99 === null) throw new Error('wrk output: no latency distribution (run wrk with --latency)');
  const requests = Number(total[1]);
  const seconds = parseDurationMs(total[2]!) / 1000;
  const bytes = parseSize(total[3]!);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  const errors = sock === null ? 0 : Number(sock[1]) + Number(sock[2]) + Number(sock[3]) + Number(sock[4]);
  const bad = /Non-2xx or 3xx responses: (\d+)/.exec(output);
  return {
    requests,
    seconds,
    reqPerSec: requests / seconds,
    bytesPerSec: bytes / seconds,
    p50Ms: parseDurationMs(p50[1]!),
    p99Ms: parseDurationMs(p99[1]!),
    errors,
    non2xx: bad === null ? 0 : Number(bad[1]),
  };
}

/** Median and spread of the rounds of one figure. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  /** (max − min) / median, percent; 0 for one round, NaN for a zero median. */
  spreadPct: number;
  rounds: number[];
}

/** The median (mean of the middle two for an even count) and spread of `values`; throws on an empty list. */
export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) throw new Error('summarize: no values');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  const min = sorted[0]!;
  const max = sorted[sorted.length - 1]!;
  const spreadPct = median === 0 ? (max === min ? 0 : Number.NaN) : ((max - min) / Math.abs(median)) * 100;
  return { median, min, max, spreadPct, rounds: [...values] };
}

/** One line of the comparison: a figure measured on both sides. */
export interface Comparison {
  scenario: string;
  metric: string;
  unit: string;
  threads: number;
  /** 'higher' when more is better (req/s, MiB/s), 'lower' otherwise (p99, bytes, share). */
  better: 'higher' | 'lower';
  poise: Summary;
  /** Absent when HAProxy is not installed. */
  haproxy?: Summary;
  /** The bare Node proxy (bench/proxy-bare) on the same case: Node's own ceiling. */
  bare?: Summary;
  /** The issue's target for poise/HAProxy, e.g. `>= 0.8`, or an absolute bound. */
  target?: Target;
}

/** A target: a bound on the ratio poise/HAProxy, or on poise's own figure. */
export type Target = { kind: 'ratio'; op: '>=' | '<='; value: number } | { kind: 'absolute'; op: '>=' | '<='; value: number };

/** poise / HAProxy of the medians (NaN when either is missing or HAProxy's is 0). */
export function ratio(c: Comparison): number {
  if (c.haproxy === undefined || c.haproxy.median === 0) return Number.NaN;
  return c.poise.median / c.haproxy.median;
}

/** poise / bare Node of the medians (NaN when either is missing or bare Node's is 0). */
export function bareRatio(c: Comparison): number {
  if (c.bare === undefined || c.bare.median === 0) return Number.NaN;
  return c.poise.median / c.bare.median;
}

/** Whether `c` meets its target; undefined when there is none or it cannot be judged (no HAProxy). */
export function meets(c: Comparison): boolean | undefined {
  const t = c.target;
  if (t === undefined) return undefined;
  const v = t.kind === 'ratio' ? ratio(c) : c.poise.median;
  if (Number.isNaN(v)) return undefined;
  return t.op === '>=' ? v >= t.value : v <= t.value;
}

function targetText(t: Target | undefined): string {
  if (t === undefined) return '';
  return t.kind === 'ratio' ? `${t.op} ${t.value}×` : `${t.op} ${t.value}`;
}

/** Renders a figure with about three significant digits. */
export function fmt(v: number): string {
  if (!Number.isFinite(v)) return '—';
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString('en-US');
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function cell(s: Summary | undefined): string {
  if (s === undefined) return '—';
  return `${fmt(s.median)} ±${Number.isFinite(s.spreadPct) ? s.spreadPct.toFixed(0) : '—'}%`;
}

const times = (r: number): string => (Number.isNaN(r) ? '—' : `${r.toFixed(2)}×`);

/**
 * The rows of the printed table: medians with their spread, the ratios
 * poise/HAProxy and poise/bare Node, and the target (on poise/HAProxy) with
 * ✓ / ✗ (blank when not judged).
 */
export function ratioRows(comparisons: readonly Comparison[]): Record<string, string>[] {
  return comparisons.map((c) => {
    const ok = meets(c);
    return {
      scenario: c.scenario,
      threads: String(c.threads),
      metric: `${c.metric} (${c.unit})`,
      poise: cell(c.poise),
      haproxy: cell(c.haproxy),
      'bare node': cell(c.bare),
      'poise/haproxy': times(ratio(c)),
      'poise/bare': times(bareRatio(c)),
      target: `${targetText(c.target)}${ok === undefined ? '' : ok ? ' ✓' : ' ✗'}`,
    };
  });
}

/** A V8 CPU profile as `node --cpu-prof` writes it (the fields used here). */
export interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    hitCount?: number;
    children?: number[];
  }>;
  samples?: number[];
  startTime: number;
  endTime: number;
}

/** One row of {@link topFrames}. */
export interface Frame {
  name: string;
  /** Share of all samples spent in this frame itself (not its callees), percent. */
  selfPct: number;
}

/**
 * The `limit` frames with the most self time, merged by function and file
 * (a frame that V8 recorded under several nodes counts once). `(idle)`
 * stays in: an idle proxy thread is an answer too.
 */
export function topFrames(profile: CpuProfile, limit = 15): Frame[] {
  const hits = new Map<string, number>();
  let total = 0;
  for (const n of profile.nodes) {
    const h = n.hitCount ?? 0;
    if (h === 0) continue;
    const f = n.callFrame;
    const file =
      f.url === '' ? '' : ` ${f.url.replace(/^.*\/(node_modules|src|dist)\//, '$1/').replace(/^node:/, 'node:')}:${f.lineNumber + 1}`;
    const key = `${f.functionName === '' ? '(anonymous)' : f.functionName}${file}`;
    hits.set(key, (hits.get(key) ?? 0) + h);
    total += h;
  }
  if (total === 0) return [];
  return [...hits.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([name, h]) => ({ name, selfPct: (h / total) * 100 }));
}

/** Where a profile's self time went; see {@link attribute}. */
export type Category = 'poise' | 'net/stream' | 'node other' | 'dependencies' | 'gc' | 'program' | 'idle';

/** The category of a frame that has a script of its own (`url` not empty). */
function categoryOfUrl(url: string): Category {
  if (/\/node_modules\//.test(url)) return 'dependencies';
  if (/\/(dist\/)?src\//.test(url)) return 'poise';
  if (/^node:(net|stream|internal\/(streams\/|stream_base_commons|net|tcp_wrap|dns|socketaddress))/.test(url)) return 'net/stream';
  return 'node other';
}

/** One profile's self time by category, and poise's own share by source folder. */
export interface Attribution {
  /** All samples. */
  samples: number;
  /** Percent of the samples that were not `(idle)`, per category (`idle` is of all samples). */
  pct: Record<Category, number>;
  /** Percent of the non-idle samples in poise's code, per folder (`net`, `runtime`, `policy`, ...). */
  poiseByFolder: Record<string, number>;
}

/**
 * Attributes every sample's self time. A frame with a script is poise's
 * (`src/`), a dependency's (`node_modules/`), Node's net/stream internals
 * (`node:net`, `node:internal/streams/*`, `stream_base_commons`, ...) or the
 * rest of Node (`node:events`, timers, task queues, ...). A native frame
 * (empty url: a C++ binding such as `writeBuffer`, or a V8 builtin such as
 * `now`) counts for the nearest caller with a script: `writeBuffer` under
 * `stream_base_commons` is net/stream work, `now` under `proxy-connection`
 * is poise's. `(garbage collector)`, `(program)` (native time V8 cannot put
 * under a JS frame: libuv, epoll returns, the runtime) and `(idle)` are
 * their own. Percentages are of the busy (non-idle) samples.
 */
export function attribute(profile: CpuProfile): Attribution {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const counts: Record<Category, number> = { poise: 0, 'net/stream': 0, 'node other': 0, dependencies: 0, gc: 0, program: 0, idle: 0 };
  const folders: Record<string, number> = {};
  let samples = 0;
  for (const n of profile.nodes) {
    const h = n.hitCount ?? 0;
    if (h === 0) continue;
    samples += h;
    const name = n.callFrame.functionName;
    let cat: Category;
    let url = n.callFrame.url;
    if (name === '(idle)') cat = 'idle';
    else if (name === '(garbage collector)') cat = 'gc';
    else if (name === '(program)' || name === '(root)') cat = 'program';
    else {
      for (let id = n.id; url === '' && parent.has(id); ) {
        id = parent.get(id)!;
        url = byId.get(id)!.callFrame.url;
      }
      cat = url === '' ? 'program' : categoryOfUrl(url);
    }
    counts[cat] += h;
    if (cat === 'poise') {
      const folder = /\/src\/([^/]+)\//.exec(url)?.[1] ?? /\/src\/([^/]+)$/.exec(url)?.[1] ?? '(root)';
      folders[folder] = (folders[folder] ?? 0) + h;
    }
  }
  const busy = samples - counts.idle;
  const of = (h: number, total: number): number => (total === 0 ? 0 : (h / total) * 100);
  const pct = Object.fromEntries(
    (Object.keys(counts) as Category[]).map((k) => [k, k === 'idle' ? of(counts[k], samples) : of(counts[k], busy)]),
  ) as Record<Category, number>;
  return { samples, pct, poiseByFolder: Object.fromEntries(Object.entries(folders).map(([k, h]) => [k, of(h, busy)])) };
}
