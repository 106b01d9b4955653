/**
 * Weighted rotation benchmark: RoundRobin's earliest-deadline-first rotation
 * (O(log n), a binary heap in typed arrays) against nginx's smooth weighted
 * round robin (SmoothWeightedRoundRobin, O(n): every pick scans every
 * member), with plain RoundRobin over equal weights (a cursor, O(1)) as the
 * floor, at n = 8, 256 and 4096.
 *
 * Method: tinybench; each timed iteration runs max(16, min(1000, 64,000 / n))
 * picks for the scan and 1,000 for the others, and the figure is the median
 * iteration time divided by the picks in it; heap bytes per pick after
 * warm-up by `heapBytesPerOp`. Weights are uniform in [1, 10] (seeded).
 *
 * Run on a quiet machine: `npm run bench:rotation` (or `node
 * dist/bench/rotation.js [--quick]` after `npm run build`). Writes
 * bench/results/rotation.json.
 */
import { Bench } from 'tinybench';
import { Backend } from '../src/core/candidate.js';
import { Rng } from '../src/core/rng.js';
import { RoundRobin } from '../src/policy/round-robin.js';
import { SmoothWeightedRoundRobin } from '../src/policy/smooth-weighted.js';
import { formatTable, heapBytesPerOp, progress, progressDone, writeResults } from './lib/harness.js';

const QUICK = process.argv.includes('--quick');
const SIZES = [8, 256, 4096];

type Op = () => number;

interface Row {
  policy: string;
  n: number;
  'ns/pick': number;
  'vs n=8': number;
  'bytes/pick': number;
}

let sink = 0;

/** Each subject's own closure, so every pick call site stays monomorphic. */
function subjects(weighted: readonly Backend[], equal: readonly Backend[]): { name: string; op: Op; per: number }[] {
  const n = weighted.length;
  const edf = new RoundRobin();
  const swrr = new SmoothWeightedRoundRobin();
  const cursor = new RoundRobin();
  return [
    { name: 'RoundRobin, weighted (EDF heap)', op: () => edf.pick(weighted), per: 1000 },
    {
      name: 'SmoothWeightedRoundRobin (nginx scan)',
      op: () => swrr.pick(weighted),
      per: Math.max(16, Math.min(1000, Math.floor(64_000 / n))),
    },
    { name: 'RoundRobin, equal weights (cursor)', op: () => cursor.pick(equal), per: 1000 },
  ];
}

async function measure(n: number, record: boolean): Promise<Row[]> {
  const rng = new Rng(n);
  const weighted = Array.from({ length: n }, (_, i) => new Backend(`backend-${i}`, { weight: 1 + rng.below(10) }));
  const equal = Array.from({ length: n }, (_, i) => new Backend(`backend-${i}`));
  const entries = subjects(weighted, equal);
  const bench = new Bench(QUICK || !record ? { time: 40, warmupTime: 10 } : { time: 400, warmupTime: 100 });
  for (const e of entries) {
    e.op(); // prepares outside the timed region
    const { op, per } = e;
    bench.add(e.name, () => {
      for (let k = 0; k < per; k++) sink = (sink + op()) & 0x3fffffff;
    });
  }
  progress(
    `rotation: timing ${entries.length} tasks at n = ${n}${record ? '' : ' (calibration pass, discarded)'}${QUICK ? ' (quick)' : ''}`,
  );
  await bench.run();
  if (!record) return [];
  const rows: Row[] = [];
  for (const e of entries) {
    const r = bench.tasks.find((t) => t.name === e.name)!.result;
    if (r.state !== 'completed') throw new Error(`task ${e.name} at n = ${n}: ${r.state}`);
    const chunk = Math.max(50, Math.min(10_000, e.per * 10));
    const bytes = heapBytesPerOp(
      () => {
        sink = (sink + e.op()) & 0x3fffffff;
      },
      QUICK ? Math.max(20, chunk >> 2) : chunk,
      QUICK ? 11 : 41,
      QUICK ? chunk : chunk * 5,
    );
    rows.push({ policy: e.name, n, 'ns/pick': (r.latency.p50 * 1e6) / e.per, 'vs n=8': 0, 'bytes/pick': bytes });
  }
  return rows;
}

async function main(): Promise<void> {
  await measure(8, false); // calibration pass (see bench/picks.ts)
  const rows: Row[] = [];
  for (const n of SIZES) rows.push(...(await measure(n, true)));
  for (const row of rows) row['vs n=8'] = row['ns/pick'] / rows.find((r) => r.policy === row.policy && r.n === 8)!['ns/pick'];
  progressDone();
  const ordered = [...new Set(rows.map((r) => r.policy))].flatMap((p) => rows.filter((r) => r.policy === p));
  console.log(formatTable(ordered as unknown as Record<string, unknown>[]));
  const file = writeResults('rotation', {
    quick: QUICK,
    sizes: SIZES,
    method: 'tinybench median iteration time / picks per iteration; heapBytesPerOp after warm-up; weights uniform in [1, 10], seeded',
    rows: ordered,
    sink,
  });
  console.log(`\nwrote ${file}`);
}

await main();
