/**
 * Shared benchmark plumbing: tables, result files, allocation measurement,
 * progress lines. Every benchmark prints one table and writes its figures to
 * bench/results/<name>.json together with the machine it ran on.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** bench/results/ in the source tree (also when running from dist/bench). */
export const RESULTS_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  ...(import.meta.url.includes('/dist/') ? ['..'] : []),
  'bench',
  'results',
);

/** The machine a result was measured on. */
export function machine(): Record<string, unknown> {
  return {
    node: process.version,
    platform: `${os.platform()} ${os.arch()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    // 1, 5 and 15 minute load averages when the result was written: a figure counts only from a quiet machine.
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
    date: new Date().toISOString(),
  };
}

/** Writes `{ name, machine, ...data }` to bench/results/<name>.json and returns the path. */
export function writeResults(name: string, data: Record<string, unknown>): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${name}.json`);
  writeFileSync(file, `${JSON.stringify({ name, machine: machine(), ...data }, null, 2)}\n`);
  return file;
}

/** Renders rows as an aligned text table; numbers right-aligned. */
export function formatTable(rows: readonly Record<string, unknown>[]): string {
  if (rows.length === 0) return '(no rows)';
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: unknown): string => (v === undefined || v === null ? '' : typeof v === 'number' ? fmtNumber(v) : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[], numeric: boolean[]): string =>
    vals.map((v, i) => (numeric[i] ? v.padStart(widths[i]!) : v.padEnd(widths[i]!))).join('  ');
  const numeric = cols.map((c) => rows.every((r) => r[c] === undefined || typeof r[c] === 'number'));
  return [
    line(cols, numeric),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map((r) =>
      line(
        cols.map((c) => cell(r[c])),
        numeric,
      ),
    ),
  ].join('\n');
}

function fmtNumber(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/**
 * Heap bytes allocated per call of `op` after `warmup` calls.
 *
 * Method: run `chunks` chunks of `chunkOps` calls and read
 * `process.memoryUsage().heapUsed` around each. A chunk during which a
 * garbage collection ran shows a drop (or a distorted rise), so the median
 * chunk delta is taken rather than the sum; the same median for an empty op
 * (the reading's own allocation) is subtracted. Resolution is about
 * 8 bytes / `chunkOps`, so 0 means "under 0.001 bytes per call": nothing.
 */
export function heapBytesPerOp(op: (i: number) => void, chunkOps = 10_000, chunks = 41, warmup = 50_000): number {
  for (let i = 0; i < warmup; i++) op(i);
  const measured = medianChunkDelta(op, chunkOps, chunks);
  const overhead = medianChunkDelta(noop, chunkOps, chunks);
  return Math.max(0, measured - overhead) / chunkOps;
}

function noop(): void {}

function medianChunkDelta(op: (i: number) => void, chunkOps: number, chunks: number): number {
  const deltas = new Float64Array(chunks);
  for (let c = 0; c < chunks; c++) {
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < chunkOps; i++) op(i);
    deltas[c] = process.memoryUsage().heapUsed - before;
  }
  deltas.sort();
  return deltas[chunks >> 1]!;
}

/** A progress line: rewritten in place on a TTY, one plain line otherwise. */
export function progress(message: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${message}`);
  else process.stderr.write(`${message}\n`);
}

/** Ends a progress line on a TTY. */
export function progressDone(): void {
  if (process.stderr.isTTY) process.stderr.write('\n');
}
