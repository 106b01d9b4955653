/**
 * Plain-text tables for operators (`poise members show`, `poise top`):
 * columns padded to their widest cell, two spaces apart, numbers right-aligned.
 */
import type { BackendSpec } from '../core/spec.js';

/** A table cell: text, or a number (right-aligned). */
export type Cell = string | number;

/** Formats `rows` under `headers`; every line ends without trailing spaces, the text with a newline. */
export function formatTable(headers: readonly string[], rows: readonly (readonly Cell[])[]): string {
  const widths = headers.map((h, c) => Math.max(h.length, ...rows.map((r) => String(r[c] ?? '').length)));
  const right = headers.map((_h, c) => rows.length > 0 && rows.every((r) => typeof r[c] === 'number'));
  const line = (cells: readonly Cell[]): string =>
    cells
      .map((cell, c) => {
        const text = String(cell);
        return right[c] ? text.padStart(widths[c]!) : text.padEnd(widths[c]!);
      })
      .join('  ')
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join('\n')}\n`;
}

/** The membership table of `members show` / `members watch`: a summary line, then one row per backend. */
export function membershipTable(m: {
  cluster?: string;
  version: number;
  lineage?: string | null | undefined;
  backends: readonly BackendSpec[];
}): string {
  const head = `${m.cluster === undefined ? '' : `cluster ${m.cluster}  `}version ${m.version}  lineage ${m.lineage ?? '-'}  backends ${m.backends.length}`;
  const rows = m.backends.map((b) => [
    b.id,
    b.status ?? 'ready',
    b.weight ?? 1,
    b.priority ?? 0,
    b.locality === undefined || b.locality === '' ? '-' : b.locality,
    b.address,
  ]);
  return `${head}\n${formatTable(['BACKEND', 'STATUS', 'WEIGHT', 'PRIORITY', 'LOCALITY', 'ADDRESS'], rows)}`;
}
