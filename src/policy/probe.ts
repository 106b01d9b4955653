/**
 * Probe: chooses on what backends report about themselves now (Prequal,
 * Wydrowski et al., NSDI '24), with `p2c:latency` when they have not
 * reported recently.
 *
 * Each pick samples `sample` distinct members at random (a partial
 * Fisher–Yates shuffle over an index array kept between picks: O(sample),
 * never a scan) and reads each one's latest probe answer: its requests in
 * flight and its latency estimate, the answer's age and how many picks
 * already chose it on that answer. An answer is usable when it is at most
 * `maxAgeMs` old, has been chosen fewer than `maxUses` times, and its
 * member is not failing requests now (`failing()`: consecutive failures —
 * a server that fails fast answers probes fast too, and must not attract
 * traffic for it). Its in-flight count is taken as reported plus the picks
 * made on it since (this process's own traffic the answer cannot show yet).
 *
 * The hot-cold rule: a usable member is cold when its in-flight count is at
 * or below the threshold — the `quantile` of the in-flight counts the pool
 * has seen (`coldInflight`, the owner's figure over every fresh answer), or
 * of the sample's own when that is not known. Among cold members the lowest
 * latency wins; when none is cold, the lowest in-flight. Exact ties go to
 * the first in the sample's order, which is uniformly random (each tied
 * member equally likely, no extra draw), so processes that
 * read the same answers do not herd on one idle backend; the uses limit
 * bounds how many picks one answer may send anywhere.
 *
 * No usable answer in the sample: the pick is `PowerOfTwo` with the tail
 * rule (`p2c:latency`) over the whole slice.
 *
 * Allocates nothing per pick after the first pick of a slice: the sample's
 * figures live in typed arrays sized at `prepare`.
 */
import type { Candidate } from '../core/candidate.js';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { Rng, type Seed } from '../core/rng.js';
import { integerIn, numberIn } from '../core/validate.js';
import { PowerOfTwo, type TimedCandidate } from './power-of-two.js';
import { throwEmpty, throwNoEligible } from './slice.js';
import type { Policy, SeedOptions } from './types.js';

/** One member's probe answer as a pick reads it (the policy's reused object). */
export interface ProbeAnswer {
  /** Requests in flight the member reported. */
  inflight: number;
  /** Its latency estimate (any unit, lower is faster). */
  latencyUs: number;
  /** The answer's age, ms. */
  ageMs: number;
  /** Picks already made on this answer. */
  uses: number;
}

/** A candidate that can show its probe answer. */
export interface ProbedCandidate extends TimedCandidate {
  /** Fills `out` with the latest answer; false when there is none. */
  readProbe(out: ProbeAnswer): boolean;
  /** A pick chose this member on its current answer. */
  useProbe(): void;
  /** Failing requests now (consecutive failures): its answers are not used. */
  failing(): boolean;
}

/** The limits a pick applies; read at every pick (the runtime's come from the shared table). */
export interface ProbeLimits {
  /** Answers older than this, ms, are not used. */
  readonly maxAgeMs: number;
  /** An answer chosen this many times is not used again. */
  readonly maxUses: number;
  /** The hot-cold quantile, in (0, 1]. */
  readonly quantile: number;
  /** Members one pick samples (at least 1; more than the slice: all of it). */
  readonly sample: number;
  /** The pool's cold threshold (in-flight at or below it is cold); negative: take the sample's quantile. */
  readonly coldInflight: number;
}

/** Options of {@link Probe}. */
export interface ProbeOptions extends SeedOptions {
  /** Answers older than this are not used, ms; default 100. */
  maxAgeMs?: number;
  /** Picks one answer may serve; default 32 (with probes at 5 % of requests, each answer must serve about 20). */
  maxUses?: number;
  /** The hot-cold quantile, in (0, 1]; default 0.75. */
  quantile?: number;
  /** Members sampled per pick, 1–64; default 5. */
  sample?: number;
  /** The fallback's tail rule (`PowerOfTwo`'s `latencyRatio`); default 2, as `p2c:latency`. */
  latencyRatio?: number;
  /** Limits read at every pick instead of the four above (the runtime's shared table). @internal */
  limits?: ProbeLimits;
}

/** Largest `sample`. */
export const MAX_PROBE_SAMPLE = 64;

/** Validated limits of `options` (a fixed object). */
function limitsOf(o: ProbeOptions): ProbeLimits {
  if (typeof o !== 'object' || o === null) invalidConfig('options', 'must be an object', o);
  checkOptionKeys(o, ['seed', 'maxAgeMs', 'maxUses', 'quantile', 'sample', 'latencyRatio', 'limits']);
  if (o.latencyRatio !== undefined) numberIn(o.latencyRatio, 'options.latencyRatio', 1, Number.POSITIVE_INFINITY);
  const fixed: ProbeLimits = {
    maxAgeMs: integerIn(o.maxAgeMs ?? 100, 'options.maxAgeMs', 0, 86_400_000),
    maxUses: integerIn(o.maxUses ?? 32, 'options.maxUses', 1, 1_000_000),
    quantile: numberIn(o.quantile ?? 0.75, 'options.quantile', Number.MIN_VALUE, 1),
    sample: integerIn(o.sample ?? 5, 'options.sample', 1, MAX_PROBE_SAMPLE),
    coldInflight: -1,
  };
  return o.limits ?? fixed;
}

/**
 * The probing policy (Prequal's hot-cold rule over shared probe answers).
 *
 * @example
 * const probe = new Probe({ maxAgeMs: 50 });
 * const i = probe.pick(candidates); // candidates implement ProbedCandidate
 */
export class Probe implements Policy<ProbedCandidate> {
  private readonly limits: ProbeLimits;
  private readonly rng: Rng;
  private readonly fallback: PowerOfTwo;
  private readonly answer: ProbeAnswer = { inflight: 0, latencyUs: 0, ageMs: 0, uses: 0 };
  /** A permutation of the slice's indices: its first k entries are each pick's sample. */
  private perm = new Int32Array(0);
  /** The usable sampled members: index, in-flight (reported + uses), latency. */
  private readonly idx = new Int32Array(MAX_PROBE_SAMPLE);
  private readonly rif = new Float64Array(MAX_PROBE_SAMPLE);
  private readonly lat = new Float64Array(MAX_PROBE_SAMPLE);
  private readonly sorted = new Float64Array(MAX_PROBE_SAMPLE);
  private slice: readonly Candidate[] | undefined;

  /** OS-seeded unless `seed` is given. */
  constructor(options: ProbeOptions = {}) {
    this.limits = limitsOf(options);
    this.rng = new Rng(options.seed);
    this.fallback = new PowerOfTwo({ seed: fallbackSeed(options.seed), latencyRatio: options.latencyRatio ?? 2 });
  }

  /** Sizes the sample's index array for this slice and prepares the fallback. */
  prepare(candidates: readonly ProbedCandidate[]): void {
    const n = candidates.length;
    if (this.perm.length !== n) this.perm = new Int32Array(n);
    for (let k = 0; k < n; k++) this.perm[k] = k;
    this.slice = candidates;
    this.fallback.prepare(candidates);
  }

  /** See the module comment: the hot-cold rule over a sample's usable answers, else `p2c:latency`. */
  pick(candidates: readonly ProbedCandidate[]): number {
    const n = candidates.length;
    if (n < 2) {
      if (n === 0) throwEmpty();
      if (candidates[0]!.isEligible()) return 0;
      throwNoEligible(1);
    }
    if (candidates !== this.slice || this.perm.length !== n) this.prepare(candidates);
    const m = this.sampleAnswers(candidates);
    if (m === 0) return this.fallback.pick(candidates);
    const chosen = this.idx[this.hotCold(m)]!;
    candidates[chosen]!.useProbe();
    return chosen;
  }

  /** Samples up to `sample` distinct members and keeps the usable answers; how many. */
  private sampleAnswers(candidates: readonly ProbedCandidate[]): number {
    const lim = this.limits;
    const n = candidates.length;
    const k = Math.min(n, lim.sample);
    const maxAge = lim.maxAgeMs;
    const maxUses = lim.maxUses;
    const perm = this.perm;
    const a = this.answer;
    let m = 0;
    for (let t = 0; t < k; t++) {
      // Partial Fisher–Yates: perm stays a permutation, so no reset between picks.
      const j = t + this.rng.below(n - t);
      const i = perm[j]!;
      perm[j] = perm[t]!;
      perm[t] = i;
      const c = candidates[i]!;
      if (!c.isEligible() || c.failing() || !c.readProbe(a)) continue;
      if (a.ageMs > maxAge || a.uses >= maxUses) continue;
      this.idx[m] = i;
      this.rif[m] = a.inflight + a.uses;
      this.lat[m] = a.latencyUs;
      m++;
    }
    return m;
  }

  /** The position (in the usable sample) the hot-cold rule chooses. */
  private hotCold(m: number): number {
    let threshold = this.limits.coldInflight;
    if (threshold < 0) threshold = this.sampleQuantile(m);
    const rif = this.rif;
    const lat = this.lat;
    // Strictly lower wins: a tie goes to the first in sample order, which the shuffle made uniform.
    let best = -1;
    // Cold members: the lowest latency.
    for (let p = 0; p < m; p++) if (rif[p]! <= threshold && (best < 0 || lat[p]! < lat[best]!)) best = p;
    if (best >= 0) return best;
    // All hot: the lowest in-flight.
    best = 0;
    for (let p = 1; p < m; p++) if (rif[p]! < rif[best]!) best = p;
    return best;
  }

  /** The `quantile` of the usable sample's in-flight counts (nearest rank). */
  private sampleQuantile(m: number): number {
    const s = this.sorted;
    for (let p = 0; p < m; p++) {
      const v = this.rif[p]!;
      let q = p;
      while (q > 0 && s[q - 1]! > v) {
        s[q] = s[q - 1]!;
        q--;
      }
      s[q] = v;
    }
    return s[Math.max(0, Math.ceil(this.limits.quantile * m) - 1)]!;
  }
}

/** The fallback's stream: another one than the policy's own, from the same replay seed. */
function fallbackSeed(seed: Seed | undefined): Seed | undefined {
  return seed === undefined ? undefined : BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + 0x7f4a7c15n);
}
