/**
 * PowerOfTwo: power of two choices (P2C) on `candidate.load()`.
 *
 * Draw two distinct members, each pair equally likely: `first = below(n)`
 * uniform over all n, `second = below(n − 1)` uniform over the other n − 1
 * (bumped by one when `>= first`, so it never equals `first` and needs no
 * redraw). Read the load of those two and nothing else (exactly two `load()`
 * calls per pick when n >= 2), keep the strictly lighter, and settle an exact
 * tie with a coin flip. For one seed the sequence of pairs is fixed, so a
 * seeded run replays exactly.
 *
 * Why two: with n picks into n backends, one random choice leaves a maximum
 * load of Θ(log n / log log n); the lighter of two leaves ln ln n / ln 2 + O(1)
 * — most of least-loaded's balance without ever computing a global minimum.
 * That missing global minimum is the point: independent selectors (worker
 * threads, processes) that each compute "the least loaded backend" herd onto
 * it together; selectors that each compare two random members do not.
 *
 * Why ties are random: ties are the common case (every backend starts at load
 * 0; a cold start or a rebalance is all ties). "Lower index wins" would send
 * every tie — on every worker at once — to the same member, the very herding
 * P2C exists to prevent. A coin from the per-instance seeded stream spreads
 * ties across members and, because every worker has its own stream, across
 * workers too.
 *
 * Why the OS seed and never `DEFAULT_HASH_SEED`: keyed policies hash with a
 * fleet-wide constant so workers agree on a key; this policy draws from an
 * advancing stream, and a shared constant seed would give every worker the
 * same stream after a synchronised restart, so the first ties would resolve
 * identically fleet-wide. Without `{ seed }` each instance reads the OS once,
 * at construction; `{ seed }` is for exact replay in tests and simulations.
 *
 * Cost: two draws and two load reads, whatever n. No walk collects the
 * healthy members per request: the runtime prepares eligible slices when
 * health or membership changes, so the whole pick is O(1).
 *
 * Allocation-free: the three draws (first, second, and the coin on a tie)
 * read `rng.word` after `rng.step()` (never a returned uint32, which would
 * box: see `Rng.word`), with exactly `below`'s rejection rule (limit =
 * 2^32 − 2^32 mod n, cached per slice length) and remainder (taken by
 * multiplying with a cached 1 / n, `modRecip`: no integer division per
 * pick), and `coin`'s top bit — the same values, in the same order, as
 * `below(n)`, `below(n − 1)`, `coin()`. With equal weights and no tail rule
 * the pick reads one field to know it, and nothing of either.
 *
 * Weights: with equal weights (the usual case) the draw above, unchanged.
 * When the slice's weights differ, the two members are drawn by weight, each
 * independently (with replacement) through an alias table built when the
 * slice is adopted (alias.ts), and their loads are compared as they are.
 * At equal loads the lighter-of-two then picks member i with probability
 * exactly wᵢ / Σw: P(i) = pᵢ² + 2·pᵢ(1 − pᵢ)·½ = pᵢ (a draw of the same
 * member twice needs no comparison; a tie is the coin). Comparing
 * load ÷ weight over a uniform pair instead was measured to follow weights
 * less closely at equal load (docs/policies.md, "Weighted power of two
 * choices"). Still exactly two `load()` reads per pick.
 *
 * Lower `load()` is lighter. An ineligible draw (standalone callers only)
 * falls back to P2C over the eligible members.
 *
 * The tail rule (`latencyRatio` k, off by default): before the loads, the
 * pair's `latency()` (a mean latency, no peak rule) is compared, and a member
 * more than k× slower than the other loses whatever the loads. It consumes
 * no draw, so with no gap wider than k a seeded sequence is the plain one.
 * Why the mean: a pause every backend's samples share peaks every PeakEWMA
 * and hides the slow one from the cost, and from a PeakEWMA comparison too
 * (docs/policies.md, "The tail rule", with the simulated figures).
 */
import type { Candidate } from '../core/candidate.js';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { modRecip, rejectionLimit32 } from '../core/rng.js';
import { numberIn } from '../core/validate.js';
import { drawEligibleByWeight } from './alias.js';
import { EligibleDraw, throwEmpty, throwNoEligible } from './slice.js';
import type { SeedOptions } from './types.js';

/** A candidate that also reports its latency estimate (what `latencyRatio` compares). */
export interface TimedCandidate extends Candidate {
  /**
   * The latency estimate alone, without the in-flight factor (any unit,
   * lower is faster); negative when not known yet (the tail rule then
   * leaves the pair to the loads).
   */
  latency(): number;
}

/** Options of {@link PowerOfTwo}. */
export interface PowerOfTwoOptions extends SeedOptions {
  /**
   * The tail rule, off by default: when one of the two candidates' latency
   * estimates (`latency()`) is more than `latencyRatio` times the other's,
   * the faster one wins whatever their loads; within the ratio, the lighter
   * load wins as usual. A number >= 1 (Infinity = off). Candidates must have
   * `latency()`. See docs/policies.md, "The tail rule".
   */
  latencyRatio?: number;
}

/** `{ seed }` of validated {@link PowerOfTwoOptions}. */
function seedOf(options: PowerOfTwoOptions): SeedOptions {
  if (typeof options !== 'object' || options === null) invalidConfig('options', 'must be an object', options);
  checkOptionKeys(options, ['seed', 'latencyRatio']);
  if (options.latencyRatio !== undefined) numberIn(options.latencyRatio, 'options.latencyRatio', 1, Number.POSITIVE_INFINITY);
  return { seed: options.seed };
}

/**
 * Power of two choices.
 *
 * @example
 * const p2c = new PowerOfTwo();   // OS-seeded
 * const i = p2c.pick(backends);   // reads backends[a].load() and backends[b].load()
 */
export class PowerOfTwo extends EligibleDraw {
  /** The tail rule's ratio; Infinity when off (then `latency()` is never read). */
  readonly latencyRatio: number;
  /** `below(n)`'s and `below(n − 1)`'s rejection limits, and 1 / n, 1 / (n − 1) (core/rng.ts `modRecip`). */
  private limitFirst = 0;
  private limitSecond = 0;
  private invFirst = 0;
  private invSecond = 0;
  /** The adopted slice needs neither weights nor the tail rule: `pick` takes the plain draw. */
  private plain = true;
  /** The pair the last {@link drawPair} drew (small integers: no allocation). */
  private first = 0;
  private second = 0;
  /** OS-seeded unless `seed` is given; `latencyRatio` turns the tail rule on. */
  constructor(options: PowerOfTwoOptions = {}) {
    super(seedOf(options));
    this.latencyRatio = options.latencyRatio ?? Number.POSITIVE_INFINITY;
  }

  /** Adopts a slice: scratch, weights, and the two draws' limits. */
  override prepare(candidates: readonly Candidate[]): void {
    const timed = this.latencyRatio !== Number.POSITIVE_INFINITY;
    if (timed && candidates.length > 0 && typeof (candidates[0] as TimedCandidate).latency !== 'function')
      invalidConfig('options.latencyRatio', 'needs candidates with latency() (a latency-measuring policy)');
    super.prepare(candidates);
    const n = candidates.length;
    this.limitFirst = rejectionLimit32(Math.max(1, n));
    this.limitSecond = rejectionLimit32(Math.max(1, n - 1));
    this.invFirst = 1 / Math.max(1, n);
    this.invSecond = 1 / Math.max(1, n - 1);
    this.plain = !this.weighted && !timed;
  }

  /**
   * The lighter of two random eligible members; `Empty` / `NoEligibleCandidates` when none.
   *
   * Equal weights and no tail rule (the common case) is this body alone: one
   * field says so, and neither the alias table nor `latency()` is touched.
   */
  pick(candidates: readonly Candidate[]): number {
    const n = candidates.length;
    if (n < 2) {
      if (n === 0) throwEmpty();
      if (candidates[0]!.isEligible()) return 0;
      throwNoEligible(1);
    }
    if (n !== this.n || candidates !== this.slice) this.prepare(candidates);
    if (!this.plain) return this.weighted ? this.pickWeighted(candidates) : this.pickTimed(candidates);
    this.drawPair(n);
    const a = this.first;
    const b = this.second;
    const ca = candidates[a]!;
    const cb = candidates[b]!;
    if (!ca.isEligible() || !cb.isEligible()) return this.pickEligible(candidates);
    const la = ca.load();
    const lb = cb.load();
    if (la < lb) return a;
    if (lb < la) return b;
    // A tie: the next draw is the coin (its top bit; heads, set, takes the second).
    this.rng.step();
    return (this.rng.word[0]! & 0x80000000) !== 0 ? b : a;
  }

  /**
   * Draws `below(n)` into `first` and `below(n − 1)`, bumped past it, into
   * `second` (uniform over the other n − 1, never `first`): one draw site
   * per loop, the uint32 read from the generator's word (see the class
   * comment), with `below`'s exact rejection rule and remainder.
   */
  private drawPair(n: number): void {
    const rng = this.rng;
    const word = rng.word;
    let r: number;
    do {
      rng.step();
      r = word[0]!;
    } while (r >= this.limitFirst);
    const a = modRecip(r, n, this.invFirst);
    do {
      rng.step();
      r = word[0]!;
    } while (r >= this.limitSecond);
    const b = modRecip(r, n - 1, this.invSecond);
    this.first = a;
    this.second = b >= a ? b + 1 : b;
  }

  /** The tail rule on (equal weights): the same pair, then {@link lighter}. */
  private pickTimed(candidates: readonly Candidate[]): number {
    this.drawPair(candidates.length);
    const a = this.first;
    const b = this.second;
    const ca = candidates[a]!;
    const cb = candidates[b]!;
    if (!ca.isEligible() || !cb.isEligible()) return this.pickEligible(candidates);
    return this.lighter(candidates, a, ca.load(), b, cb.load());
  }

  /**
   * The tail rule: −1 when `ca`'s latency estimate is more than
   * `latencyRatio` times below `cb`'s, 1 when `cb`'s is, 0 within the ratio
   * or when either is not known yet (negative).
   */
  private faster(ca: Candidate, cb: Candidate): number {
    const ta = (ca as TimedCandidate).latency();
    const tb = (cb as TimedCandidate).latency();
    if (ta < 0 || tb < 0) return 0;
    const k = this.latencyRatio;
    if (tb > ta * k) return -1;
    if (ta > tb * k) return 1;
    return 0;
  }

  private lighter(candidates: readonly Candidate[], a: number, la: number, b: number, lb: number): number {
    if (this.latencyRatio !== Number.POSITIVE_INFINITY) {
      const t = this.faster(candidates[a]!, candidates[b]!);
      if (t !== 0) return t < 0 ? a : b;
    }
    if (la < lb) return a;
    if (lb < la) return b;
    return this.rng.coin() ? b : a;
  }

  /** Unequal weights: two independent draws by weight, the lighter of the two (exactly two `load()` reads). */
  private pickWeighted(candidates: readonly Candidate[]): number {
    const a = this.alias.draw(this.rng);
    const b = this.alias.draw(this.rng);
    const ca = candidates[a]!;
    const cb = candidates[b]!;
    if (!ca.isEligible() || !cb.isEligible()) return this.pickEligibleWeighted(candidates);
    const la = ca.load();
    const lb = cb.load();
    return a === b ? a : this.lighter(candidates, a, la, b, lb);
  }

  /** Slow path of {@link pickWeighted}: the same two draws by weight over the eligible members only. */
  private pickEligibleWeighted(candidates: readonly Candidate[]): number {
    const a = drawEligibleByWeight(candidates, this.rng);
    const b = drawEligibleByWeight(candidates, this.rng);
    return a === b ? a : this.lighter(candidates, a, candidates[a]!.load(), b, candidates[b]!.load());
  }

  /** Slow path: the same draw over the eligible indices only. */
  private pickEligible(candidates: readonly Candidate[]): number {
    const m = this.eligible.collect(candidates);
    if (m === 1) return this.eligible.at(0);
    const x = this.rng.below(m);
    let y = this.rng.below(m - 1);
    if (y >= x) y++;
    const a = this.eligible.at(x);
    const b = this.eligible.at(y);
    return this.lighter(candidates, a, candidates[a]!.load(), b, candidates[b]!.load());
  }
}
