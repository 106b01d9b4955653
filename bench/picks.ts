/**
 * Pick benchmark for the single-tier policies.
 *
 * For every policy at n = 8, 64, 512 and 4096: nanoseconds per pick and heap
 * bytes allocated per pick after warm-up, side by side with an inline
 * baseline measured in the same run — two random indices from the same kind
 * of Rng and two Int32Array reads, nothing else — and each policy's ratio to
 * it. Candidates read their load from an Int32Array, as the runtime's do.
 *
 * Method: tinybench; each timed iteration runs many picks (1,000 for O(1)
 * policies, fewer for the O(n) ones at large n) so the harness's own ~100 ns
 * per call is amortised; the figure is the median iteration time divided by
 * the picks in it. Heap bytes per pick: `heapBytesPerOp` (median
 * `process.memoryUsage().heapUsed` delta over chunks, minus an empty op).
 *
 * Policy level (issue 40): the public `PowerOfTwo` and `Random` over
 * `Backend` objects with equal weights, at n = 8, 512 and 4096, each cell in a
 * fresh thread (bench/picks-thread.ts), beside the inline two-choice
 * baseline; with `--baseline PATH/dist/src/index.js` the same cells of that
 * build too, interleaved in one run (baseline, this build, baseline, ...).
 * Targets: PowerOfTwo ≤ 2× the inline baseline; Random ≤ 1.15× the baseline
 * build's Random (without a baseline build: ≤ the inline baseline).
 *
 * Run: `npm run bench:picks` (or `node dist/bench/picks.js [--quick]
 * [--baseline PATH] [--policy-level] [--check]` after `npm run build`); `--check` exits
 * non-zero when a target is missed. Writes bench/results/picks.json.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Bench } from 'tinybench';
import type { Candidate } from '../src/core/candidate.js';
import { DEFAULT_HASH_SEED, hash53, murmur3Key, seed32Of, toHashSeed } from '../src/core/hash.js';
import { Rng } from '../src/core/rng.js';
import { LeastLoaded } from '../src/policy/least-loaded.js';
import { Maglev } from '../src/policy/maglev.js';
import { PowerOfTwo } from '../src/policy/power-of-two.js';
import { Random } from '../src/policy/random.js';
import { Rendezvous } from '../src/policy/rendezvous.js';
import { RingHash } from '../src/policy/ring-hash.js';
import { RoundRobin } from '../src/policy/round-robin.js';
import { SmoothWeightedRoundRobin } from '../src/policy/smooth-weighted.js';
import type { PickContext } from '../src/policy/types.js';
import { WeightedRandom } from '../src/policy/weighted-random.js';
import { formatTable, heapBytesPerOp, progress, progressDone, writeResults } from './lib/harness.js';
import { Targets } from './lib/targets.js';

const QUICK = process.argv.includes('--quick');
const SIZES = [8, 64, 512, 4096];
/** 16-character keys (16 UTF-16 units), the size the keyed targets name. */
const KEYS = Array.from({ length: 4096 }, (_, i) => `session-${String(i).padStart(8, '0')}`);

/** A candidate whose load is one Int32Array read, like the runtime's LoadTable-backed candidates. */
class CounterBackend implements Candidate {
  constructor(
    readonly id: string,
    readonly weight: number,
    private readonly loads: Int32Array,
    private readonly slot: number,
  ) {}
  isEligible(): boolean {
    return true;
  }
  load(): number {
    return this.loads[this.slot]!;
  }
}

/** One pick (index) of the subject, given a running counter; written per subject so each call site stays monomorphic. */
type Op = (i: number) => number;

interface Subject {
  name: string;
  /** O(n) per pick by nature: fewer picks per iteration at large n. */
  scan: boolean;
  make: (slice: readonly CounterBackend[]) => Op;
}

// Each factory holds its own function literal: a shared `policy.pick(...)` call site would see eight
// classes, go megamorphic and stop inlining, which no real caller (one policy per router) suffers.
const SUBJECTS: Subject[] = [
  {
    name: 'PowerOfTwo',
    scan: false,
    make: (slice) => {
      const p = new PowerOfTwo();
      return () => p.pick(slice);
    },
  },
  {
    name: 'Random',
    scan: false,
    make: (slice) => {
      const p = new Random();
      return () => p.pick(slice);
    },
  },
  {
    name: 'WeightedRandom',
    scan: false,
    make: (slice) => {
      const p = new WeightedRandom();
      return () => p.pick(slice);
    },
  },
  {
    name: 'RoundRobin',
    scan: false,
    make: (slice) => {
      const p = new RoundRobin();
      return () => p.pick(slice);
    },
  },
  {
    name: 'Maglev',
    scan: false,
    make: (slice) => {
      const p = new Maglev();
      const ctx: PickContext = { key: '' };
      return (i) => {
        ctx.key = KEYS[i & 4095]!;
        return p.pick(slice, ctx);
      };
    },
  },
  {
    name: 'RingHash',
    scan: false,
    make: (slice) => {
      const p = new RingHash();
      const ctx: PickContext = { key: '' };
      return (i) => {
        ctx.key = KEYS[i & 4095]!;
        return p.pick(slice, ctx);
      };
    },
  },
  {
    name: 'Maglev (bounded, c = 1.25)',
    scan: false,
    make: (slice) => {
      const total = totalOf(slice);
      const p = new Maglev({ balanceFactor: 1.25, totalLoad: () => total });
      const ctx: PickContext = { key: '' };
      return (i) => {
        ctx.key = KEYS[i & 4095]!;
        return p.pick(slice, ctx);
      };
    },
  },
  {
    name: 'RingHash (bounded, c = 1.25)',
    scan: false,
    make: (slice) => {
      const total = totalOf(slice);
      const p = new RingHash({ balanceFactor: 1.25, totalLoad: () => total });
      const ctx: PickContext = { key: '' };
      return (i) => {
        ctx.key = KEYS[i & 4095]!;
        return p.pick(slice, ctx);
      };
    },
  },
  {
    name: 'SmoothWeightedRoundRobin',
    scan: true,
    make: (slice) => {
      const p = new SmoothWeightedRoundRobin();
      return () => p.pick(slice);
    },
  },
  {
    name: 'LeastLoaded',
    scan: true,
    make: (slice) => {
      const p = new LeastLoaded();
      return () => p.pick(slice);
    },
  },
  {
    name: 'Rendezvous',
    scan: true,
    make: (slice) => {
      const p = new Rendezvous();
      const ctx: PickContext = { key: '' };
      return (i) => {
        ctx.key = KEYS[i & 4095]!;
        return p.pick(slice, ctx);
      };
    },
  },
];

/**
 * The loads' sum, fixed for the run (loads do not move here): stands in for
 * `LoadTable.totalOutstanding()`, the O(rows) read the runtime passes.
 */
function totalOf(slice: readonly CounterBackend[]): number {
  let t = 0;
  for (const c of slice) t += c.load();
  return t;
}

/** Context row: the 53-bit FNV hash of a 16-character key (Rendezvous's key hash; Maglev's until this release). */
function keyHashOp(): Op {
  const seed = toHashSeed(DEFAULT_HASH_SEED);
  return (i) => hash53(KEYS[i & 4095]!, seed) & 1;
}

/** Context row: the 32-bit MurmurHash3 of a 16-character key, part of every Maglev and ring-hash pick. */
function murmurOp(): Op {
  const seed = seed32Of(toHashSeed(DEFAULT_HASH_SEED));
  return (i) => murmur3Key(KEYS[i & 4095]!, seed) & 1;
}

let sink = 0;

function picksPerIteration(scan: boolean, n: number): number {
  return scan ? Math.max(16, Math.min(1000, Math.floor(64_000 / n))) : 1000;
}

interface Row {
  policy: string;
  n: number;
  'ns/pick': number;
  'x baseline': number;
  'vs n=8': number;
  'bytes/pick': number;
}

const BASELINE = 'baseline (2 draws + 2 reads)';
const KEY_HASH = '(key hash53 alone)';
const KEY_MURMUR = '(key murmur3 alone)';

/** Times and measures every subject at one n; returns rows (none for the calibration pass). */
async function measure(n: number, record: boolean): Promise<Row[]> {
  const seedRng = new Rng(n);
  const loads = new Int32Array(n);
  for (let i = 0; i < n; i++) loads[i] = seedRng.below(16);
  const slice = Array.from({ length: n }, (_, i) => new CounterBackend(`backend-${i}`, 1 + seedRng.below(10), loads, i));
  const quick = QUICK || !record;
  const bench = new Bench(quick ? { time: 40, warmupTime: 10 } : { time: 400, warmupTime: 100 });

  const baseRng = new Rng();
  // The baseline: two random indices from the same Rng and two Int32Array reads, nothing else.
  const baseline: Op = () => loads[baseRng.below(n)]! + loads[baseRng.below(n)]!;
  const entries: { name: string; op: Op; per: number; scan: boolean }[] = [
    { name: BASELINE, op: baseline, per: 1000, scan: false },
    { name: KEY_HASH, op: keyHashOp(), per: 1000, scan: false },
    { name: KEY_MURMUR, op: murmurOp(), per: 1000, scan: false },
  ];
  for (const s of SUBJECTS) {
    const op = s.make(slice);
    op(0); // prepares tables outside the timed region
    entries.push({ name: s.name, op, per: picksPerIteration(s.scan, n), scan: s.scan });
  }
  for (const e of entries) {
    const { op, per } = e;
    let i = 0;
    // Every entry, the baseline included, runs through this same loop shape and call.
    bench.add(e.name, () => {
      for (let k = 0; k < per; k++) sink = (sink + op(i++)) & 0x3fffffff;
    });
  }
  progress(`picks: timing ${entries.length} tasks at n = ${n}${record ? '' : ' (calibration pass, discarded)'}${QUICK ? ' (quick)' : ''}`);
  await bench.run();
  if (!record) return [];
  const ns = new Map<string, number>();
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state !== 'completed') throw new Error(`task ${task.name} at n = ${n}: ${r.state}`);
    ns.set(task.name, (r.latency.p50 * 1e6) / entries.find((e) => e.name === task.name)!.per);
  }
  const base = ns.get(BASELINE)!;
  progress(`picks: measuring heap bytes per pick at n = ${n}`);
  const rows: Row[] = [];
  for (const e of entries) {
    const chunkOps = e.scan ? Math.max(50, Math.min(10_000, Math.floor(200_000 / n))) : 10_000;
    const wrapped = (i: number): void => {
      sink = (sink + e.op(i)) & 0x3fffffff;
    };
    const bytes = heapBytesPerOp(wrapped, QUICK ? Math.max(20, chunkOps >> 2) : chunkOps, QUICK ? 11 : 41, QUICK ? chunkOps : chunkOps * 5);
    const t = ns.get(e.name)!;
    rows.push({ policy: e.name, n, 'ns/pick': t, 'x baseline': t / base, 'vs n=8': 0, 'bytes/pick': bytes });
  }
  return rows;
}

/** The policies whose pick is O(1): n = 4096 within 1.5× of n = 8, within 3× of the baseline, 0 bytes per pick. */
const CONSTANT_TIME = ['PowerOfTwo', 'Random', 'WeightedRandom', 'RoundRobin', 'Maglev', 'RingHash'];
const POLICY_SIZES = [8, 512, 4096];
const PICKS_THREAD = new URL('./picks-thread.js', import.meta.url);

/** One policy-level cell in a fresh thread: median ns per pick. */
function policyCell(entry: string, subject: string, n: number, quick: boolean): Promise<number> {
  const w = new Worker(PICKS_THREAD, {
    workerData: { entry, subject, n, batch: 20_000, samples: quick ? 41 : 201, warmupMs: quick ? 400 : 1500 },
  });
  return new Promise<number>((resolve, reject) => {
    w.once('message', (m: { ns: number }) => resolve(m.ns));
    w.once('error', reject);
  }).finally(() => w.terminate());
}

interface PolicyRow {
  subject: string;
  build: string;
  n: number;
  'ns/pick': number;
  'x inline': number;
  'x baseline build': number | string;
}

/**
 * The policy-level comparison: `PowerOfTwo` and `Random` over `Backend`
 * objects (equal weights) of each build, and the inline two-choice baseline,
 * every cell in a fresh thread, builds interleaved; the median over rounds.
 */
async function policyLevel(builds: Record<string, string>, quick: boolean, targets: Targets): Promise<PolicyRow[]> {
  const rounds = quick ? 1 : 5;
  const raw = new Map<string, number[]>();
  const cells: { key: string; entry: string; subject: string; n: number }[] = [];
  const own = builds['this build']!;
  for (const n of POLICY_SIZES) {
    cells.push({ key: `inline|this build|${n}`, entry: own, subject: 'inline', n });
    for (const subject of ['PowerOfTwo', 'Random'])
      for (const [label, entry] of Object.entries(builds)) cells.push({ key: `${subject}|${label}|${n}`, entry, subject, n });
  }
  let done = 0;
  for (let round = 0; round < rounds; round++) {
    for (const c of cells) {
      progress(`picks (policy level) ${++done}/${rounds * cells.length}: ${c.key} (load ${os.loadavg()[0]!.toFixed(2)})`);
      const ns = await policyCell(c.entry, c.subject, c.n, quick);
      raw.set(c.key, [...(raw.get(c.key) ?? []), ns]);
    }
  }
  const med = (key: string): number => {
    const xs = [...raw.get(key)!].sort((a, b) => a - b);
    return xs[xs.length >> 1]!;
  };
  const rows: PolicyRow[] = [];
  for (const n of POLICY_SIZES) {
    const inline = med(`inline|this build|${n}`);
    rows.push({ subject: 'inline two-choice', build: 'this build', n, 'ns/pick': inline, 'x inline': 1, 'x baseline build': '' });
    for (const subject of ['PowerOfTwo', 'Random']) {
      for (const label of Object.keys(builds)) {
        const ns = med(`${subject}|${label}|${n}`);
        const old = builds['baseline'] === undefined ? undefined : med(`${subject}|baseline|${n}`);
        rows.push({
          subject,
          build: label,
          n,
          'ns/pick': ns,
          'x inline': ns / inline,
          'x baseline build': old === undefined ? '' : ns / old,
        });
      }
      const ns = med(`${subject}|this build|${n}`);
      if (subject === 'PowerOfTwo')
        targets.expect(ns <= 2 * inline, `PowerOfTwo at n = ${n}: ${ns.toFixed(1)} ns, target ≤ 2× inline (${(2 * inline).toFixed(1)} ns)`);
      else if (builds['baseline'] !== undefined) {
        const old = med(`Random|baseline|${n}`);
        targets.expect(
          ns <= 1.15 * old,
          `Random at n = ${n}: ${ns.toFixed(1)} ns, target ≤ 1.15× the baseline build (${(1.15 * old).toFixed(1)} ns)`,
        );
      } else targets.expect(ns <= inline, `Random at n = ${n}: ${ns.toFixed(1)} ns, target ≤ inline (${inline.toFixed(1)} ns)`);
    }
  }
  return rows;
}

/** The single-tier table's targets (the `targets` text written with the results). */
function checkRows(rows: Row[], targets: Targets): void {
  for (const r of rows) {
    if (!CONSTANT_TIME.includes(r.policy)) continue;
    targets.expect(r['x baseline'] <= 3, `${r.policy} at n = ${r.n}: ${r['x baseline'].toFixed(2)}× baseline, target ≤ 3×`);
    targets.expect(r['bytes/pick'] < 1, `${r.policy} at n = ${r.n}: ${r['bytes/pick'].toFixed(2)} bytes/pick, target 0`);
    if (r.n === 4096) targets.expect(r['vs n=8'] <= 1.5, `${r.policy}: n = 4096 is ${r['vs n=8'].toFixed(2)}× n = 8, target ≤ 1.5×`);
  }
}

async function main(): Promise<void> {
  const targets = new Targets();
  const at = process.argv.indexOf('--baseline');
  const builds: Record<string, string> = {};
  if (at > 0) builds['baseline'] = pathToFileURL(path.resolve(process.argv[at + 1]!)).href;
  builds['this build'] = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'index.js')).href;
  const policyRows = await policyLevel(builds, QUICK, targets);
  progressDone();
  console.log(formatTable(policyRows as unknown as Record<string, unknown>[]));
  if (process.argv.includes('--policy-level')) {
    // Only the policy-level comparison (issue 40's figures).
    targets.finish('bench:picks --policy-level');
    return;
  }
  // Calibration pass, discarded: V8 specialises the first closure of each function literal to its
  // captured values (constant-folding n and the arrays), which would flatter whichever size ran first.
  await measure(8, false);
  const rows: Row[] = [];
  for (const n of SIZES) rows.push(...(await measure(n, true)));
  for (const row of rows) {
    const at8 = rows.find((r) => r.policy === row.policy && r.n === 8)!;
    row['vs n=8'] = row['ns/pick'] / at8['ns/pick'];
  }
  progressDone();
  const names = [BASELINE, KEY_HASH, KEY_MURMUR, ...SUBJECTS.map((s) => s.name)];
  const ordered = names.flatMap((p) => rows.filter((r) => r.policy === p));
  console.log(formatTable(ordered as unknown as Record<string, unknown>[]));
  const file = writeResults('picks', {
    quick: QUICK,
    sizes: SIZES,
    method: {
      time: 'tinybench median iteration time / picks per iteration (1,000 for O(1) policies; max(16, 64,000 / n) for O(n) ones); every entry through the same loop and call shape',
      heap: 'heapBytesPerOp: median process.memoryUsage().heapUsed delta per chunk after warm-up, minus an empty op',
      baseline: 'two Rng.below(n) draws and two Int32Array reads',
      candidates:
        'load() reads an Int32Array slot; weights uniform in [1, 10]; loads uniform in [0, 15]; keys: 4,096 strings of 16 characters; bounded rows: totalLoad a constant (the loads do not move), c = 1.25',
    },
    targets:
      'PowerOfTwo, Random, WeightedRandom, RoundRobin, Maglev, RingHash: n = 4096 within 1.5x of n = 8; within 3x of baseline; 0 bytes/pick',
    rows: ordered,
    policyLevel: {
      method:
        'public PowerOfTwo / Random over Backend objects (equal weights, load() reads an Int32Array, loads uniform in [0, 15]); each cell a fresh thread warmed for 0.4 s (quick) or 1.5 s, the fastest of 41 (quick) or 201 batches of 20,000 picks; median over rounds; builds interleaved',
      builds: Object.fromEntries(Object.keys(builds).map((k) => [k, k === 'baseline' ? process.argv[at + 1] : 'dist/src/index.js'])),
      loadavg: os.loadavg(),
      rows: policyRows,
    },
    sink,
  });
  console.log(`wrote ${file}`);
  checkRows(rows, targets);
  targets.finish('bench:picks');
}

await main();
