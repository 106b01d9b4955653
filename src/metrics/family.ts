/**
 * A metric family declared as data: its name (without the prefix), help
 * text, kind, label names and the reader that pushes its series from one
 * scrape's view. The tables under ./families/ are lists of these;
 * collectMetrics registers each table in order ({@link registerTable}), so
 * the order of a table is the order of the exposition.
 * @internal
 */
import type { Registry } from 'prom-client';
import { snapshotHistogram, snapshotMetric, type Push, type PushHistogram } from './snapshot-metrics.js';

/** A gauge or a counter: `read` pushes one value per series. @internal */
export interface SeriesFamily<T> {
  readonly name: string;
  readonly help: string;
  readonly kind: 'gauge' | 'counter';
  /** The label names of every series, in the order they print. */
  readonly labels: readonly string[];
  readonly read: (push: Push, from: T) => void;
}

/** A histogram: `read` pushes bucket counts (not cumulative, the last `+Inf`) and a sum per series. @internal */
export interface HistogramFamily<T> {
  readonly name: string;
  readonly help: string;
  readonly kind: 'histogram';
  /** The label names of every series (`le` is added to the buckets). */
  readonly labels: readonly string[];
  /** Bucket upper bounds in seconds; `+Inf` follows. */
  readonly bounds: readonly number[];
  readonly read: (push: PushHistogram, from: T) => void;
}

/** One metric family of a table. @internal */
export type Family<T> = SeriesFamily<T> | HistogramFamily<T>;

/**
 * Registers every family of `table` on `registry` under `prefix`, in table
 * order, and appends the full names to `names`. `from` gives the scrape's
 * view when the registry reads a family (each `get`).
 * @internal
 */
export function registerTable<T>(registry: Registry, prefix: string, names: string[], table: readonly Family<T>[], from: () => T): void {
  for (const f of table) {
    const m =
      f.kind === 'histogram'
        ? snapshotHistogram(prefix + f.name, f.help, f.bounds, (push) => f.read(push, from()))
        : snapshotMetric(prefix + f.name, f.help, f.kind, (push) => f.read(push, from()));
    registry.registerMetric(m);
    names.push(m.name);
  }
}
