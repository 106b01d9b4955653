/**
 * The self-contained HTML report of a run: the table, per-backend request
 * share per policy, the latency CDF per policy, in-flight over time on the
 * tracked (slow) backend, and the balls-into-bins results. Inline SVG and
 * inline CSS only — no script, no font, no network access. The document is
 * well-formed XML (every element closed) so it can be checked mechanically.
 */
import type { BallsResult } from './balls.js';
import { bestOf, isBest, recommend, shownColumns, type BenchResult, type PolicyResult } from './results.js';
import { PALETTE, barChart, esc, lineChart } from './svg.js';

const CSS = `body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222;padding:0 16px}
h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 9px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}.best{font-weight:700;background:#e8f4ea}
svg{display:block;margin:12px 0;font-size:11px}svg .t{font-size:13px;font-weight:600}svg .f{fill:none;stroke:#999}
svg .g{stroke:#eee}svg .m{stroke:#c00;stroke-dasharray:4 3}svg .ml{fill:#c00}.note{color:#555}code{background:#f4f4f4;padding:0 3px}`;

function table(results: readonly PolicyResult[]): string {
  const best = bestOf(results);
  const columns = shownColumns(results);
  const head = `<tr><th>policy</th>${columns.map((c) => `<th>${esc(c.header)}</th>`).join('')}</tr>`;
  const rows = results.map((r) => {
    const cells = columns.map((c) => {
      const v = c.value(r);
      if (v === null || Number.isNaN(v)) return '<td>–</td>';
      const mark = isBest(c, v, best.get(c.key) ?? null);
      return `<td${mark ? ' class="best"' : ''}>${esc(c.text?.(r) ?? c.format(v))}${mark ? ' ★' : ''}</td>`;
    });
    return `<tr><td>${esc(r.policy)}${r.interrupted ? ' (cut short)' : ''}</td>${cells.join('')}</tr>`;
  });
  return `<table><thead>${head}</thead><tbody>${rows.join('')}</tbody></table>`;
}

/** At most `max` points, evenly picked (long runs sample in-flight 20 times a second). */
function decimate(points: ReadonlyArray<readonly [number, number]>, max = 1000): ReadonlyArray<readonly [number, number]> {
  if (points.length <= max) return points;
  const step = points.length / max;
  return Array.from({ length: max }, (_, i) => points[Math.floor(i * step)]!);
}

/** y value for the CDF chart: −log10(1 − q), so p50, p90, p99, p99.9 are evenly spaced. */
function nines(q: number): number {
  return -Math.log10(Math.max(1e-5, 1 - q));
}

const NINES_TICKS: ReadonlyArray<readonly [number, string]> = [
  [nines(0), '0'],
  [nines(0.5), 'p50'],
  [nines(0.9), 'p90'],
  [nines(0.99), 'p99'],
  [nines(0.999), 'p99.9'],
  [nines(0.9999), 'p99.99'],
];

function loadCharts(r: BenchResult): string {
  const ps = r.policies;
  if (ps.length === 0) return '<p>No policy finished a measured window.</p>';
  const ids = [...new Set(ps.flatMap((p) => p.perBackend.map((b) => b.id)))];
  const roleOf = new Map(ps.flatMap((p) => p.perBackend.map((b) => [b.id, b.role] as const)));
  const share = barChart({
    title: 'Share of requests per backend, per policy',
    xLabel: 'backend (role)',
    categories: ids.map((id) => (roleOf.get(id) === 'normal' ? id : `${id}\n${roleOf.get(id)}`)),
    series: ps.map((p) => ({ name: p.policy, values: ids.map((id) => (p.perBackend.find((b) => b.id === id)?.share ?? 0) * 100) })),
    y: { label: '% of requests' },
    format: (v) => `${v.toFixed(1)} %`,
  });
  const cdf = lineChart({
    title: 'Latency CDF per policy (y spaced by nines)',
    x: { label: 'latency, ms (log scale)', log: true },
    y: { label: 'fraction of requests at or below', min: 0, max: 4, ticks: NINES_TICKS },
    series: ps.map((p) => ({ name: p.policy, points: [[p.cdf[0]?.[0] ?? 1, 0], ...p.cdf.map(([x, q]) => [x, nines(q)] as const)] })),
    step: true,
  });
  const tracked = r.config.tracked;
  const inflight =
    tracked === null
      ? ''
      : lineChart({
          title: `In-flight requests on ${tracked} over time (server-side count)`,
          x: { label: 'seconds into the measured window', min: 0 },
          y: { label: 'in-flight', min: 0 },
          series: ps.map((p) => ({ name: p.policy, points: decimate(p.trackedInflight) })),
          marks: (ps[0]?.events ?? []).map((e) => ({ x: e.at, label: e.label })),
        });
  return share + cdf + inflight;
}

function ballsSection(b: BallsResult): string {
  const rows = b.mEqualsN.map((row) => {
    const range = (xs: number[]): string => (Math.min(...xs) === Math.max(...xs) ? String(xs[0]) : `${Math.min(...xs)}–${Math.max(...xs)}`);
    return `<tr><td>${row.n}</td><td>${row.trials}</td><td>${range(row.oneChoice)}</td><td>${row.oneChoiceTheory.toFixed(2)}</td><td>${range(row.twoChoice)}</td><td>${row.twoChoiceTheory.toFixed(2)} + O(1)</td></tr>`;
  });
  const t1 = `<table><thead><tr><th>n = m</th><th>trials</th><th>one choice (Random)</th><th>Γ⁻¹(n) − 3/2</th><th>two choices (PowerOfTwo)</th><th>ln ln n / ln 2</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
  const mean = (xs: number[]): number => xs.reduce((a, x) => a + x, 0) / xs.length;
  const c1 = lineChart({
    title: 'Maximum load, m = n balls: measured (mean of trials) and theory',
    x: { label: 'n (log scale)', log: true },
    y: { label: 'max load', min: 0 },
    series: [
      { name: 'one choice', points: b.mEqualsN.map((r) => [r.n, mean(r.oneChoice)] as const), color: PALETTE[0] },
      { name: 'Γ⁻¹(n) − 3/2', points: b.mEqualsN.map((r) => [r.n, r.oneChoiceTheory] as const), dashed: true, color: PALETTE[0] },
      { name: 'two choices', points: b.mEqualsN.map((r) => [r.n, mean(r.twoChoice)] as const), color: PALETTE[1] },
      { name: 'ln ln n / ln 2', points: b.mEqualsN.map((r) => [r.n, r.twoChoiceTheory] as const), dashed: true, color: PALETTE[1] },
    ],
  });
  const s = b.stale;
  const c2 = lineChart({
    title: `Stale loads: ${s.selectors} selectors, ${s.n} bins, ${s.m} balls, views refreshed every b picks`,
    x: { label: 'b, picks between refreshes (log scale)', log: true },
    y: { label: 'max load (mean of trials)', min: 0 },
    series: [
      { name: 'least-loaded', points: s.rows.map((r) => [r.b, r.leastLoaded] as const) },
      { name: 'two choices', points: s.rows.map((r) => [r.b, r.twoChoice] as const) },
      { name: 'one choice', points: s.rows.map((r) => [r.b, r.oneChoice] as const) },
    ],
  });
  return `<h2>Balls into bins</h2><p class="note">The library's own <code>Random</code> and <code>PowerOfTwo</code> (load = balls already in the bin), seeded.</p>${t1}${c1}
<p class="note">Each selector sees the loads as they were at its last refresh. "Least loaded of all" sends every pick until the next refresh to the bins that looked lightest — it herds, and its maximum load grows with b; two choices compares two random bins and degrades gracefully.</p>${c2}`;
}

/** The run's recommendation (results.ts, `recommend`), as a paragraph. */
function recommendation(r: BenchResult): string {
  const rec = recommend(r.policies, r.balls);
  if (rec === null) return '';
  return `<p><strong>Recommendation: ${esc(rec.policy)}${rec.tiedWith === null ? '' : ` (or ${esc(rec.tiedWith)})`}</strong> — ${esc(rec.why)}.${rec.caveat === null ? '' : ` But ${esc(rec.caveat)}.`}</p>`;
}

/** The whole report as one HTML document. */
export function renderReport(r: BenchResult): string {
  const c = r.config;
  const intro = `<p>${esc(c.description)}.</p><p class="note">${c.workers} worker threads × ${c.concurrency} concurrent requests per worker (closed loop, ${esc(c.connection)} connections), ${c.durationS} s per policy after ${c.warmupS} s warm-up; membership: ${esc(c.membership)}; seed: ${c.seed === null ? 'OS' : c.seed}. Node ${esc(r.machine.node)} on ${esc(r.machine.platform)}, ${r.machine.cpus} × ${esc(r.machine.cpuModel)}; started ${esc(r.startedAt)}.${r.interrupted ? ' <strong>Interrupted (Ctrl-C): partial results.</strong>' : ''}</p>`;
  const load =
    c.scenario === 'balls'
      ? ''
      : `<h2>Policies under the same load</h2>${table(r.policies)}<p class="note">★ best in column. Latency is measured by the client from acquire to reply. "in-flight max/mean": time-mean of the busiest backend's in-flight count over the time-mean of the average backend's (1 = even).</p>${recommendation(r)}${loadCharts(r)}`;
  const balls = r.balls === null ? '' : ballsSection(r.balls);
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><title>poise bench — ${esc(c.scenario)}</title><style>${CSS}</style></head>
<body><h1>poise bench — ${esc(c.scenario)}</h1>${intro}${load}${balls}</body></html>
`;
}
