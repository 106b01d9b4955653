/**
 * Balls into bins with the library's own policies.
 *
 * Part 1, m = n: throw n balls into n bins with {@link Random} (one choice)
 * and {@link PowerOfTwo} (two choices, load = the bin's ball count) and
 * compare the maximum load with the classic results: one choice ≈ Γ⁻¹(n) − 3/2
 * (Gonnet; ≈ 7.9 at n = 10^5), two choices ln ln n / ln 2 + O(1) (Azar,
 * Broder, Karlin, Upfal; 3 or 4 at n = 10^5).
 *
 * Part 2, stale information: W selectors place balls in turn, each reading
 * its own copy of the bin loads, refreshed only every b picks (staggered, so
 * the selectors' copies are b/W picks apart — Mitzenmacher's bulletin board).
 * {@link LeastLoaded} ("least loaded of all") sends every pick between two
 * refreshes to the few bins that looked lightest, so its maximum load grows
 * with b — herding; {@link PowerOfTwo} compares only two random bins and
 * degrades gracefully. m = 4n so that the lightest set is small, as in a
 * busy system.
 */
import { LeastLoaded, PowerOfTwo, Random, type Candidate, type Policy } from 'poise-lb';
import { Rng } from './kit.js';

/** A bin as a candidate: its load is read from whichever view it is bound to. */
class Bin implements Candidate {
  readonly id: string;
  readonly weight = 1;
  constructor(
    private readonly view: { loads: Int32Array },
    private readonly index: number,
  ) {
    this.id = `bin${index}`;
  }
  isEligible(): boolean {
    return true;
  }
  load(): number {
    return this.view.loads[this.index]!;
  }
}

function bins(view: { loads: Int32Array }, n: number): Bin[] {
  return Array.from({ length: n }, (_, i) => new Bin(view, i));
}

function maxOf(a: Int32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) if (a[i]! > m) m = a[i]!;
  return m;
}

/** The maximum load after `m` balls into `n` bins, each placed by `policy` reading current loads. */
export function throwBalls(n: number, m: number, policy: Policy): number {
  const view = { loads: new Int32Array(n) };
  const candidates = bins(view, n);
  for (let i = 0; i < m; i++) view.loads[policy.pick(candidates)]! += 1;
  return maxOf(view.loads);
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error < 1e-13). */
export function lnGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
    -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - lnGamma(1 - x);
  const z = x - 1;
  let a = c[0]!;
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += c[i]! / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Where Γ is minimal on the positive axis; Γ increases beyond it. */
const GAMMA_ARGMIN = 1.4616321449683622;

/** Γ⁻¹(y): the x ≥ 1.4616 with Γ(x) = y, for y ≥ 1 (bisection on ln Γ to 1e-12). */
export function inverseGamma(y: number): number {
  if (!(y >= 1)) throw new RangeError(`inverseGamma: y must be >= 1, got ${y}`);
  const target = Math.log(y);
  let lo = GAMMA_ARGMIN;
  let hi = 2;
  while (lnGamma(hi) < target) hi *= 2;
  while (hi - lo > 1e-12 * hi) {
    const mid = (lo + hi) / 2;
    if (lnGamma(mid) < target) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** The classic one-choice maximum load for m = n: Γ⁻¹(n) − 3/2. */
export function oneChoiceTheory(n: number): number {
  return inverseGamma(n) - 1.5;
}

/** The leading term of the two-choice maximum load for m = n: ln ln n / ln 2 (the bound adds O(1)). */
export function twoChoiceTheory(n: number): number {
  return Math.log(Math.log(n)) / Math.LN2;
}

/** One row of part 1. */
export interface BallsRow {
  n: number;
  trials: number;
  /** Maximum load of each trial, one choice. */
  oneChoice: number[];
  oneChoiceTheory: number;
  /** Maximum load of each trial, two choices. */
  twoChoice: number[];
  twoChoiceTheory: number;
}

/** One row of part 2. */
export interface StaleRow {
  /** Picks between two refreshes of a selector's view. */
  b: number;
  /** Mean over trials of the maximum load. */
  leastLoaded: number;
  twoChoice: number;
  oneChoice: number;
}

/** Everything the balls scenario measured. */
export interface BallsResult {
  /** The base seed (replay with `--seed`). */
  seed: number;
  mEqualsN: BallsRow[];
  stale: { n: number; m: number; selectors: number; trials: number; rows: StaleRow[] };
}

/** Options of {@link runBalls}; the defaults are what `poise bench` runs. */
export interface BallsOptions {
  /** Bin counts for part 1; default 10^3 … 10^6. */
  ns?: readonly number[];
  /** Base seed, an integer in [0, 10^9]: every trial's policies use seeds derived from it. Default: drawn from the OS. */
  seed?: number;
  /** Part 2 bins; default 1000. */
  staleBins?: number;
  /** Part 2 balls per bin; default 4. */
  staleBallsPerBin?: number;
  /** Part 2 selectors W; default 8. */
  selectors?: number;
  /** Part 2 refresh intervals; default 1, 4, 16, 64, 256, 1024. */
  bs?: readonly number[];
  /** Part 2 trials per b; default 3. */
  staleTrials?: number;
  /** Called after each unit of work, for progress. */
  onProgress?: (label: string) => void;
}

/** Derives a child seed from a parent seed and a salt: a 53-bit multiplicative mix of the two (a safe integer, stable across releases). */
function derive(seed: number, salt: number): number {
  return Number(BigInt.asUintN(53, BigInt(seed) * 0x9e3779b97f4a7c15n + BigInt(salt) * 0xbf58476d1ce4e5b9n + 1n));
}

function trialsFor(n: number): number {
  return Math.max(1, Math.min(20, Math.round(2e5 / n)));
}

/** Part 1 at one n. */
export function ballsRow(n: number, trials: number, seed: number): BallsRow {
  const oneChoice: number[] = [];
  const twoChoice: number[] = [];
  for (let t = 0; t < trials; t++) {
    oneChoice.push(throwBalls(n, n, new Random({ seed: derive(derive(seed, n), t * 2) })));
    twoChoice.push(throwBalls(n, n, new PowerOfTwo({ seed: derive(derive(seed, n), t * 2 + 1) })));
  }
  return { n, trials, oneChoice, oneChoiceTheory: oneChoiceTheory(n), twoChoice, twoChoiceTheory: twoChoiceTheory(n) };
}

type PolicyFactory = (seed: number) => Policy;

/**
 * Part 2, one (policy, b, trial): W selectors place `m` balls in turn (ball i
 * by selector i mod W); selector w copies the true loads into its view when
 * (i + ⌊w·b/W⌋) mod b = 0 and otherwise sees nothing, not even its own picks.
 * Returns the maximum load.
 */
export function staleMaxLoad(n: number, m: number, selectors: number, b: number, make: PolicyFactory, seed: number): number {
  const loads = new Int32Array(n);
  const views = Array.from({ length: selectors }, () => ({ loads: new Int32Array(n) }));
  const candidates = views.map((v) => bins(v, n));
  const policies = views.map((_, w) => make(derive(seed, w)));
  const offsets = views.map((_, w) => Math.floor((w * b) / selectors));
  for (let i = 0; i < m; i++) {
    for (let w = 0; w < selectors; w++) if ((i + offsets[w]!) % b === 0) views[w]!.loads.set(loads);
    const w = i % selectors;
    loads[policies[w]!.pick(candidates[w]!)]! += 1;
  }
  return maxOf(loads);
}

/** Runs both parts. */
export function runBalls(opts: BallsOptions = {}): BallsResult {
  const seed = opts.seed ?? new Rng().below(1_000_000_007);
  const mEqualsN: BallsRow[] = [];
  for (const n of opts.ns ?? [1e3, 1e4, 1e5, 1e6]) {
    mEqualsN.push(ballsRow(n, trialsFor(n), seed));
    opts.onProgress?.(`balls: m = n = ${n}`);
  }
  const n = opts.staleBins ?? 1000;
  const m = n * (opts.staleBallsPerBin ?? 4);
  const selectors = opts.selectors ?? 8;
  const trials = opts.staleTrials ?? 3;
  const rows: StaleRow[] = [];
  const mean = (make: PolicyFactory, b: number, salt: number): number => {
    let s = 0;
    for (let t = 0; t < trials; t++) s += staleMaxLoad(n, m, selectors, b, make, derive(derive(derive(seed, b), t), salt));
    return s / trials;
  };
  for (const b of opts.bs ?? [1, 4, 16, 64, 256, 1024]) {
    rows.push({
      b,
      leastLoaded: mean((s) => new LeastLoaded({ seed: s }), b, 1),
      twoChoice: mean((s) => new PowerOfTwo({ seed: s }), b, 2),
      oneChoice: mean((s) => new Random({ seed: s }), b, 3),
    });
    opts.onProgress?.(`balls: stale information, b = ${b}`);
  }
  return { seed, mEqualsN, stale: { n, m, selectors, trials, rows } };
}

/** Part 1 and part 2 as text tables. */
export function formatBalls(r: BallsResult): string {
  const lines: string[] = [];
  const range = (xs: number[]): string => {
    const lo = Math.min(...xs);
    const hi = Math.max(...xs);
    return lo === hi ? String(lo) : `${lo}–${hi}`;
  };
  lines.push('Balls into bins, m = n (max load; library Random and PowerOfTwo with load = balls in the bin)');
  lines.push(
    `${'n'.padStart(9)}  ${'trials'.padStart(6)}  ${'one choice'.padStart(10)}  ${'Γ⁻¹(n)−3/2'.padStart(10)}  ${'two choices'.padStart(11)}  ${'lnln n/ln2'.padStart(10)}`,
  );
  for (const row of r.mEqualsN) {
    lines.push(
      `${String(row.n).padStart(9)}  ${String(row.trials).padStart(6)}  ${range(row.oneChoice).padStart(10)}  ${row.oneChoiceTheory.toFixed(2).padStart(10)}  ${range(row.twoChoice).padStart(11)}  ${`${row.twoChoiceTheory.toFixed(2)}+O(1)`.padStart(10)}`,
    );
  }
  const s = r.stale;
  lines.push('');
  lines.push(
    `Stale loads: ${s.selectors} selectors, ${s.n} bins, m = ${s.m / s.n}n balls, view refreshed every b picks (mean max load of ${s.trials} trials)`,
  );
  lines.push(`${'b'.padStart(6)}  ${'least-loaded'.padStart(12)}  ${'two choices'.padStart(11)}  ${'one choice'.padStart(10)}`);
  for (const row of s.rows) {
    lines.push(
      `${String(row.b).padStart(6)}  ${row.leastLoaded.toFixed(1).padStart(12)}  ${row.twoChoice.toFixed(1).padStart(11)}  ${row.oneChoice.toFixed(1).padStart(10)}`,
    );
  }
  return lines.join('\n');
}
