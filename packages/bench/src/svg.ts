/**
 * Minimal inline-SVG charts for the HTML report: line charts (linear or log
 * axes) and grouped bar charts. Output is well-formed XML with every text
 * escaped, and needs nothing from the network.
 */

/** One line or bar series. */
export interface Series {
  name: string;
  points: ReadonlyArray<readonly [number, number]>;
  /** Draw dashed (theory, reference lines). */
  dashed?: boolean;
  /** Overrides the palette colour. */
  color?: string;
}

/** An axis: linear or log10, with optional fixed ticks (value, label). */
export interface Axis {
  label: string;
  log?: boolean;
  min?: number;
  max?: number;
  ticks?: ReadonlyArray<readonly [number, string]>;
}

/** A colour-blind-safe palette (Okabe–Ito), cycled. */
export const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#D55E00', '#56B4E9', '#F0E442', '#000000'];

/** Escapes text for XML/HTML content and attribute values. */
export function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const W = 640;
const H = 320;
const M = { l: 56, r: 150, t: 28, b: 50 };

function scale(axis: Axis, lo: number, hi: number, from: number, to: number): (v: number) => number {
  const f = axis.log ? (v: number): number => Math.log10(Math.max(v, 1e-9)) : (v: number): number => v;
  const a = f(lo);
  const b = f(hi);
  const span = b - a || 1;
  return (v) => from + ((f(v) - a) / span) * (to - from);
}

function niceTicks(axis: Axis, lo: number, hi: number): Array<readonly [number, string]> {
  if (axis.ticks) return [...axis.ticks];
  const fmt = (v: number): string => {
    const a = Math.abs(v);
    if (a >= 1e6 && a % 1e6 === 0) return `${v / 1e6}M`;
    if (a >= 1e4 && a % 1e3 === 0) return `${v / 1e3}k`;
    return a >= 100 || Number.isInteger(v) ? v.toFixed(0) : String(Number(v.toPrecision(2)));
  };
  if (axis.log) {
    const out: Array<readonly [number, string]> = [];
    const decades = Math.log10(hi / Math.max(lo, 1e-9));
    const mantissas = decades > 2.5 ? [1] : [1, 2, 5];
    for (let e = Math.floor(Math.log10(Math.max(lo, 1e-9))); 10 ** e <= hi * 1.0001; e++) {
      for (const m of mantissas) {
        const v = m * 10 ** e;
        if (v >= lo * 0.9999 && v <= hi * 1.0001) out.push([v, fmt(v)]);
      }
    }
    return out;
  }
  const raw = (hi - lo) / 5 || 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: Array<readonly [number, string]> = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push([v, fmt(Number(v.toPrecision(12)))]);
  return out;
}

function bounds(series: readonly Series[], axis: Axis, i: 0 | 1): [number, number] {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const s of series)
    for (const p of s.points)
      if (Number.isFinite(p[i]) && (!axis.log || p[i] > 0)) {
        lo = Math.min(lo, p[i]);
        hi = Math.max(hi, p[i]);
      }
  if (!Number.isFinite(lo)) [lo, hi] = [axis.log ? 1 : 0, axis.log ? 10 : 1];
  lo = axis.min ?? lo;
  hi = axis.max ?? hi;
  if (hi <= lo) hi = axis.log ? lo * 10 : lo + 1;
  return [lo, hi];
}

function frame(
  title: string,
  x: Axis,
  y: Axis,
  xt: Array<readonly [number, string]>,
  yt: Array<readonly [number, string]>,
  sx: (v: number) => number,
  sy: (v: number) => number,
): string[] {
  const parts = [`<text x="${M.l}" y="16" class="t">${esc(title)}</text>`];
  parts.push(`<rect x="${M.l}" y="${M.t}" width="${W - M.l - M.r}" height="${H - M.t - M.b}" class="f"/>`);
  for (const [v, label] of xt) {
    const px = sx(v).toFixed(1);
    parts.push(`<line x1="${px}" x2="${px}" y1="${M.t}" y2="${H - M.b}" class="g"/>`);
    parts.push(`<text x="${px}" y="${H - M.b + 14}" text-anchor="middle">${esc(label)}</text>`);
  }
  for (const [v, label] of yt) {
    const py = sy(v).toFixed(1);
    parts.push(`<line x1="${M.l}" x2="${W - M.r}" y1="${py}" y2="${py}" class="g"/>`);
    parts.push(`<text x="${M.l - 4}" y="${py}" text-anchor="end" dominant-baseline="middle">${esc(label)}</text>`);
  }
  parts.push(`<text x="${(M.l + W - M.r) / 2}" y="${H - 8}" text-anchor="middle">${esc(x.label)}</text>`);
  parts.push(
    `<text x="12" y="${(M.t + H - M.b) / 2}" text-anchor="middle" transform="rotate(-90 12 ${(M.t + H - M.b) / 2})">${esc(y.label)}</text>`,
  );
  return parts;
}

function colorOf(i: number, color?: string): string {
  return color ?? PALETTE[i % PALETTE.length]!;
}

function legend(names: readonly string[], colors: ReadonlyArray<string | undefined> = []): string[] {
  return names.map((name, i) => {
    const y = M.t + 8 + i * 16;
    return `<rect x="${W - M.r + 10}" y="${y - 6}" width="12" height="4" fill="${colorOf(i, colors[i])}"/><text x="${W - M.r + 26}" y="${y}" dominant-baseline="middle">${esc(name)}</text>`;
  });
}

function svg(parts: string[]): string {
  return `<svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img">${parts.join('')}</svg>`;
}

/** A line chart; `marks` draws labelled vertical lines (scenario events). */
export function lineChart(opts: {
  title: string;
  x: Axis;
  y: Axis;
  series: readonly Series[];
  marks?: ReadonlyArray<{ x: number; label: string }>;
  step?: boolean;
}): string {
  const [x0, x1] = bounds(opts.series, opts.x, 0);
  const [y0, y1] = bounds(opts.series, opts.y, 1);
  const sx = scale(opts.x, x0, x1, M.l, W - M.r);
  const sy = scale(opts.y, y0, y1, H - M.b, M.t);
  const parts = frame(opts.title, opts.x, opts.y, niceTicks(opts.x, x0, x1), niceTicks(opts.y, y0, y1), sx, sy);
  (opts.marks ?? []).forEach((m, k) => {
    const px = sx(m.x).toFixed(1);
    // labels stack downwards so that close events stay readable
    parts.push(
      `<line x1="${px}" x2="${px}" y1="${M.t}" y2="${H - M.b}" class="m"/><text x="${(sx(m.x) + 3).toFixed(1)}" y="${M.t + 12 + k * 13}" class="ml">${esc(m.label)}</text>`,
    );
  });
  opts.series.forEach((s, i) => {
    const pts = s.points.filter(
      (p) => Number.isFinite(p[0]) && Number.isFinite(p[1]) && (!opts.x.log || p[0] > 0) && (!opts.y.log || p[1] > 0),
    );
    if (pts.length === 0) return;
    const xy = pts.map((p) => [sx(Math.min(Math.max(p[0], x0), x1)), sy(Math.min(Math.max(p[1], y0), y1))] as const);
    let d = `M${xy[0]![0].toFixed(1)},${xy[0]![1].toFixed(1)}`;
    for (let k = 1; k < xy.length; k++) {
      if (opts.step) d += `H${xy[k]![0].toFixed(1)}`;
      d += `L${xy[k]![0].toFixed(1)},${xy[k]![1].toFixed(1)}`;
    }
    parts.push(
      `<path d="${d}" fill="none" stroke="${colorOf(i, s.color)}" stroke-width="1.8"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`,
    );
  });
  parts.push(
    ...legend(
      opts.series.map((s) => s.name),
      opts.series.map((s) => s.color),
    ),
  );
  return svg(parts);
}

/** A grouped bar chart: one group per category, one bar per series (values[series][category]). */
export function barChart(opts: {
  title: string;
  xLabel?: string;
  categories: readonly string[];
  series: ReadonlyArray<{ name: string; values: readonly number[] }>;
  y: Axis;
  format?: (v: number) => string;
}): string {
  let hi = opts.y.max ?? 0;
  for (const s of opts.series) for (const v of s.values) if (Number.isFinite(v)) hi = Math.max(hi, v);
  if (hi <= 0) hi = 1;
  hi *= 1.08; // headroom above the tallest bar
  const y0 = opts.y.min ?? 0;
  const sy = scale(opts.y, y0, hi, H - M.b, M.t);
  const n = Math.max(1, opts.categories.length);
  const groupW = (W - M.l - M.r) / n;
  const barW = (groupW * 0.8) / Math.max(1, opts.series.length);
  const xTicks: Array<readonly [number, string]> = [];
  const parts = frame(opts.title, { label: opts.xLabel ?? '' }, opts.y, xTicks, niceTicks(opts.y, y0, hi), (v) => v, sy);
  opts.categories.forEach((c, ci) => {
    // a category may carry a second line after "\n" (a role under an id)
    const [first, second] = c.split('\n');
    const x = (M.l + groupW * (ci + 0.5)).toFixed(1);
    const sub = second === undefined ? '' : `<tspan x="${x}" dy="12">${esc(second)}</tspan>`;
    parts.push(`<text x="${x}" y="${H - M.b + 14}" text-anchor="middle">${esc(first ?? '')}${sub}</text>`);
  });
  opts.series.forEach((s, si) => {
    s.values.forEach((v, ci) => {
      if (!Number.isFinite(v)) return;
      const x = M.l + groupW * ci + groupW * 0.1 + barW * si;
      const top = sy(v);
      const label = opts.format ? opts.format(v) : String(v);
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${Math.max(1, barW - 1).toFixed(1)}" height="${Math.max(0, H - M.b - top).toFixed(1)}" fill="${PALETTE[si % PALETTE.length]}"><title>${esc(`${s.name} · ${opts.categories[ci] ?? ''}: ${label}`)}</title></rect>`,
      );
    });
  });
  parts.push(...legend(opts.series.map((s) => s.name)));
  return svg(parts);
}
