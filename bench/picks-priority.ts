/**
 * Priority and locality picks: per-decision form vs prepared form.
 *
 * For n = 8, 64, 512, 4096 candidates spread over 3 priorities × 4
 * localities (P0 at 60 % health so 16 % of traffic spills to P1, endpoint
 * weights 1..5), measures ns/pick and heap bytes/pick of
 * `PriorityWeightedRandom`, `LocalityWeightedRandom` and their prepared
 * forms. Each timed iteration runs many picks (so tinybench's ~100 ns
 * per-call overhead is amortised); ns/pick = mean iteration time / picks.
 *
 * Heap bytes/pick: `heapBytesPerOp` (bench/lib/harness.ts) — median
 * `process.memoryUsage().heapUsed` delta over chunks of picks after warm-up,
 * minus the same for an empty op; 0 means under ~0.01 byte per pick.
 *
 * Usage: node dist/bench/picks-priority.js [--quick]
 * Writes bench/results/picks-priority.json.
 */
import { Bench } from 'tinybench';
import { Backend, Localized, LocalityWeightedRandom, Prioritized, PriorityWeightedRandom } from '../src/index.js';
import { formatTable, heapBytesPerOp, progress, progressDone, writeResults } from './lib/harness.js';

const quick = process.argv.includes('--quick');
const SIZES = [8, 64, 512, 4096];
const PRIORITIES = 3;
const LOCALITIES = 4;

function snapshot(n: number): Localized<Prioritized<Backend>>[] {
  return Array.from({ length: n }, (_, i) => {
    const priority = i % PRIORITIES;
    const slot = Math.floor(i / PRIORITIES);
    const down = priority === 0 && slot % 5 < 2; // P0 at 60 % health
    const backend = new Backend(`b${i}`, { weight: 1 + (i % 5), status: down ? 'unavailable' : 'ready' });
    return new Localized(new Prioritized(backend, priority), `zone-${slot % LOCALITIES}`, 1 + (slot % LOCALITIES));
  });
}

interface Row extends Record<string, unknown> {
  policy: string;
  n: number;
  form: string;
  'ns/pick': number;
  'bytes/pick': number;
  'x faster': number | undefined;
}

type Picker = { pick(c: readonly Localized<Prioritized<Backend>>[]): number };

async function measure(name: string, form: string, n: number, policy: Picker): Promise<Row> {
  const c = snapshot(n);
  const perDecision = form === 'per-decision';
  const ops = perDecision ? Math.max(16, Math.floor(400_000 / n)) : 20_000;
  let sink = 0;
  const iteration = (): void => {
    for (let i = 0; i < ops; i++) sink ^= policy.pick(c);
  };
  for (let i = 0; i < 5; i++) iteration(); // warm-up: JIT and scratch high-water
  progress(`${name} ${form} n=${n}: timing`);
  const bench = new Bench({ time: quick ? 100 : 600, iterations: quick ? 5 : 20 });
  bench.add(`${name}/${form}/${n}`, iteration);
  await bench.run();
  const result = bench.tasks[0]!.result;
  if (result.state !== 'completed') throw new Error(`${name} ${form} n=${n}: ${result.state}`);
  const nsPerPick = (result.latency.mean * 1e6) / ops;
  progress(`${name} ${form} n=${n}: allocation`);
  const chunkOps = perDecision ? Math.max(100, Math.floor(1_000_000 / n)) : 10_000;
  const bytes = heapBytesPerOp(
    () => {
      sink ^= policy.pick(c);
    },
    chunkOps,
    quick ? 11 : 41,
    chunkOps * 2,
  );
  if (sink < 0) console.log(sink);
  return { policy: name, n, form, 'ns/pick': nsPerPick, 'bytes/pick': bytes, 'x faster': undefined };
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (const n of SIZES) {
    const pd = await measure('priority', 'per-decision', n, new PriorityWeightedRandom({ seed: 1 }));
    const pp = await measure('priority', 'prepared', n, new PriorityWeightedRandom({ seed: 1, prepared: true }));
    pp['x faster'] = pd['ns/pick'] / pp['ns/pick'];
    const ld = await measure('locality', 'per-decision', n, new LocalityWeightedRandom({ seed: 1 }));
    const lp = await measure('locality', 'prepared', n, new LocalityWeightedRandom({ seed: 1, prepared: true }));
    lp['x faster'] = ld['ns/pick'] / lp['ns/pick'];
    rows.push(pd, pp, ld, lp);
  }
  progressDone();
  console.log(formatTable(rows));
  const file = writeResults('picks-priority', {
    quick,
    method: {
      time: 'tinybench mean iteration latency / picks per iteration',
      heap: 'heapBytesPerOp: median process.memoryUsage().heapUsed delta per chunk, minus an empty op',
      snapshot: `${PRIORITIES} priorities x ${LOCALITIES} localities, P0 at 60 % health, weights 1..5`,
    },
    rows,
  });
  console.log(`wrote ${file}`);
}

await main();
