/**
 * The priority and locality policies in their two forms, one class body:
 * sample every candidate once (sample.ts), compute the priority shares
 * (plan.ts), then
 *
 * - per decision (`PriorityWeightedRandom`, `LocalityWeightedRandom`): draw
 *   directly from the sample (draw.ts), on every pick, so every predicate is
 *   read at that pick;
 * - prepared (`{ prepared: true }`): load cumulative tables once per snapshot (a new
 *   array identity or length, or `prepare()`; table.ts), then expected-O(1)
 *   picks through them.
 *
 * The draw and the tables consume random numbers identically and search the
 * same (priority, locality, index) order, so for one snapshot and seed both
 * forms return the same index sequence. Loading the tables per decision
 * instead of drawing directly was measured and is slower (the tables cost
 * guide building and every locality's shares; the draw computes only the
 * chosen priority's): docs/priority.md, "Two forms".
 */
import type { LocalityCandidate, PriorityCandidate } from '../../core/candidate.js';
import { invalidConfig } from '../../core/errors.js';
import { Rng } from '../../core/rng.js';
import type { PickContext, Policy } from '../types.js';
import { type DrawResult, drawDecision, type PriorityDecision } from './draw.js';
import { type PriorityOptions, type ResolvedPriorityOptions, resolvePriorityOptions } from './options.js';
import { PriorityLayer } from './layer.js';
import { computeLocalityShares, computePriorityShares } from './plan.js';
import { PriorityEngine, type Sample } from './sample.js';
import { PriorityTable } from './table.js';

/** Which of the two forms a policy object is. */
type Form = 'per-decision' | 'prepared';

/** The form `options.prepared` asks for (validated with the other options, in the constructor). */
function formOf(options: PriorityOptions | undefined): Form {
  return options?.prepared === true ? 'prepared' : 'per-decision';
}

/** Common body of the four priority and locality policies. */
export abstract class PriorityPolicyBase<C extends PriorityCandidate> implements Policy<C> {
  /** The validated options in force. */
  readonly options: ResolvedPriorityOptions;
  private readonly rng: Rng;
  private readonly engine = new PriorityEngine();
  private readonly table = new PriorityTable();
  private readonly last: DrawResult = { priority: 0, panic: false };
  private readonly withLocality: boolean;
  private readonly perDecision: boolean;
  /** The layer around the `within` policy (prepared forms), or undefined for weighted random. */
  private readonly layer: PriorityLayer | undefined;
  private preparedPlan: PriorityPlan | undefined;
  private source: readonly C[] | undefined;
  private sourceLength = -1;

  protected constructor(options: PriorityOptions | undefined, withLocality: boolean, form: Form) {
    this.options = resolvePriorityOptions(options);
    this.rng = new Rng(options?.seed);
    this.withLocality = withLocality;
    this.perDecision = form === 'per-decision';
    const within = options?.within;
    if (within !== undefined && this.perDecision) {
      invalidConfig('options.within', 'needs the prepared form (prepared: true)', within);
    }
    this.layer = within === undefined ? undefined : new PriorityLayer(within, options?.stickyKeys === true);
  }

  /**
   * Prepared form: samples `candidates` and loads the pick tables, kept until
   * the next prepare. Throws what a pick throws for a bad snapshot (`Empty`,
   * `InconsistentTopology`, `WeightOverflow`, `InvalidWeight`); the previous
   * prepared state stays in force when it does (a failed sample never reaches
   * the tables). Per-decision form: nothing to keep — every pick samples.
   */
  prepare(candidates: readonly C[]): void {
    if (this.perDecision) return;
    this.engine.sample(candidates, this.withLocality);
    computePriorityShares(this.engine, this.options);
    this.table.load(this.engine, this.options, this.withLocality);
    this.layer?.prepare(this.engine, this.table, candidates, this.withLocality);
    this.preparedPlan = planOf(this.engine, this.options, this.withLocality);
    this.source = candidates;
    this.sourceLength = candidates.length;
  }

  /**
   * An index into `candidates`. Throws `Empty`, `NoEligibleCandidates`,
   * `PanicRejected` (fail-closed panic), `InconsistentTopology`,
   * `WeightOverflow`. Allocates nothing after warm-up; the prepared form is
   * expected O(1) while the same array is passed.
   */
  pick(candidates: readonly C[], context?: PickContext): number {
    if (this.perDecision) {
      this.engine.sample(candidates, this.withLocality);
      computePriorityShares(this.engine, this.options);
      return drawDecision(this.engine, this.options, this.rng, this.withLocality, this.last);
    }
    if (candidates !== this.source || candidates.length !== this.sourceLength) this.prepare(candidates);
    if (this.layer !== undefined) return this.layer.pick(this.table, this.rng, candidates, context, this.last);
    return this.table.pick(this.rng, this.last);
  }

  /** Like {@link pick}, also reporting the chosen priority and whether it routed healthy or in panic. */
  decide(candidates: readonly C[]): PriorityDecision {
    const index = this.pick(candidates);
    return { index, priority: this.last.priority, mode: this.last.panic ? 'panic' : 'healthy' };
  }

  /** The share computation: for the per-decision form of `candidates` now; for the prepared form the plan in force (prepared first when `candidates` is not the prepared array). */
  plan(candidates: readonly C[]): PriorityPlan {
    if (this.perDecision) return computePlan(this.engine, candidates, this.options, this.withLocality);
    if (candidates !== this.source || candidates.length !== this.sourceLength || this.preparedPlan === undefined) {
      this.prepare(candidates);
    }
    return this.preparedPlan!;
  }
}

/**
 * PriorityWeightedRandom: ordered failover groups with overprovisioning and
 * panic, then weighted random choice inside the chosen priority.
 *
 * Priority 0 (lower is preferred) receives traffic first; a lower priority
 * receives only what higher ones cannot cover according to their weighted
 * availability × the overprovisioning factor (default 140 %, so a priority
 * keeps all traffic down to 5/7 ≈ 71.4 % available). Panic is considered
 * only under a global shortage (combined effective availability < 100 %): a
 * priority whose raw availability is strictly below the threshold (default
 * 50 %) then routes over its panic-eligible members (`'useAll'`) or sheds
 * with `PanicRejected` (`'failClosed'`). Three predicates are sampled once
 * per decision and kept distinct: `isMember()` (the availability
 * denominator), `isEligible()` (healthy capacity) and `isPanicEligible()`.
 * All share arithmetic is integer millionths (`plan()` shows it); sums are
 * checked (`WeightOverflow`). Calculation is O(n) per decision — one read
 * of every candidate and a counting sort into groups, for up to 64
 * distinct (priority, locality) groups; O(n log n) beyond — with retained scratch;
 * for per-request use pass `prepared: true`.
 */

/**
 * Priority failover with weighted random endpoint choice, planned per
 * decision, or once per snapshot with `prepared: true` (expected-O(1) picks;
 * pass a new array, or call `prepare()`, when membership or health changes).
 *
 * @example
 * const hot = new PriorityWeightedRandom({ prepared: true });
 * hot.prepare(members);               // on every membership/health epoch
 * const i = hot.pick(members);        // expected O(1), no allocation
 *
 * @example
 * const policy = new PriorityWeightedRandom({ panicMode: 'failClosed', seed: 1 });
 * const members = [
 *   new Prioritized(new Backend('db-a', { weight: 2 }), 0),
 *   new Prioritized(new Backend('db-standby'), 1).withPanicEligibility(false),
 * ];
 * const { index, priority, mode } = policy.decide(members);
 */
export class PriorityWeightedRandom<C extends PriorityCandidate = PriorityCandidate> extends PriorityPolicyBase<C> {
  /** Throws `InvalidConfig` naming a bad option. OS-seeded unless `seed` is given; `prepared: true` plans once per snapshot. */
  constructor(options?: PriorityOptions) {
    super(options, false, formOf(options));
  }
}

/**
 * LocalityWeightedRandom: priority → health-adjusted locality → weighted
 * endpoint.
 *
 * The priority is chosen first with exactly the rules of
 * `PriorityWeightedRandom`, so a large locality weight in a failover priority
 * never steals traffic from a fully provisioned primary. Inside the chosen
 * priority each locality gets
 * `localityWeight × min(100 %, overprovisioning × selectable / members)`
 * (integer millionths; a locality with any selectable member never rounds to
 * zero), and an endpoint is then drawn by `Candidate.weight` among that
 * locality's selectable members. Locality weight (the control plane's share
 * between localities) and endpoint weight (capacity inside one locality)
 * stay separate. Members of one (priority, locality) that disagree on the
 * locality weight throw `InconsistentTopology`, whatever their order. This
 * form plans per decision unless `prepared: true`, which plans once per
 * snapshot.
 *
 * @example
 * const policy = new LocalityWeightedRandom({ seed: 7 });
 * const endpoints = [
 *   new Localized(new Prioritized(new Backend('west-1'), 0), 'us-west-2').withLocalityWeight(2),
 *   new Localized(new Prioritized(new Backend('east-1'), 0), 'us-east-1'),
 * ];
 * const i = policy.pick(endpoints);
 * policy.plan(endpoints).priorities[0]?.localities; // [{ locality: 'us-east-1', ... }, ...]
 */
export class LocalityWeightedRandom<C extends LocalityCandidate = LocalityCandidate> extends PriorityPolicyBase<C> {
  /** Throws `InvalidConfig` naming a bad option. OS-seeded unless `seed` is given; `prepared: true` plans once per snapshot. */
  constructor(options?: PriorityOptions) {
    super(options, true, formOf(options));
  }
}

/**
 * `PriorityPlan`: the deterministic share computation behind a decision,
 * for operators and tests.
 */

/** One locality of a priority. */
export interface LocalityPlan {
  readonly locality: string;
  /** Millionths of its priority's traffic; the localities of a selectable priority sum to 1,000,000. */
  readonly shareMillionths: number;
}

/** One priority, ascending. */
export interface PriorityLevelPlan {
  readonly priority: number;
  /** Eligible member weight / member weight, in millionths (host counts with `arithmetic: 'envoy'`). */
  readonly rawAvailabilityMillionths: number;
  /** min(100 %, overprovisioning × raw), in millionths (Envoy's integer health × 10,000 with `'envoy'`). */
  readonly effectiveAvailabilityMillionths: number;
  /** Millionths of all traffic. */
  readonly shareMillionths: number;
  /** True when this priority routes in panic (only ever under a global shortage). */
  readonly panic: boolean;
  /** Present for `LocalityWeightedRandom`: locality shares in ascending locality order. */
  readonly localities?: readonly LocalityPlan[];
}

/** The share computation for one snapshot. Priority shares sum to exactly 1,000,000 whenever anything is selectable. */
export interface PriorityPlan {
  /** Combined effective availability below 100 %: panic thresholds apply. */
  readonly globalShortage: boolean;
  readonly priorities: readonly PriorityLevelPlan[];
}

/** Samples `candidates` into `e`, computes every share, and returns the plan (allocates; not for the hot path). @internal */
export function computePlan(
  e: PriorityEngine,
  candidates: readonly PriorityCandidate[],
  o: ResolvedPriorityOptions,
  withLocality: boolean,
): PriorityPlan {
  e.sample(candidates, withLocality);
  computePriorityShares(e, o);
  return planOf(e, o, withLocality);
}

/** The plan of an already sampled engine whose priority shares are computed. @internal */
export function planOf(e: Sample, o: ResolvedPriorityOptions, withLocality: boolean): PriorityPlan {
  const priorities: PriorityLevelPlan[] = [];
  for (let p = 0; p < e.pCount; p++) {
    const level: {
      priority: number;
      rawAvailabilityMillionths: number;
      effectiveAvailabilityMillionths: number;
      shareMillionths: number;
      panic: boolean;
      localities?: LocalityPlan[];
    } = {
      priority: e.pValue[p]!,
      rawAvailabilityMillionths: e.pRaw[p]!,
      effectiveAvailabilityMillionths: e.pEff[p]!,
      shareMillionths: e.pShare[p]!,
      panic: e.pPanic[p] === 1,
    };
    if (withLocality) {
      computeLocalityShares(e, p, o);
      const localities: LocalityPlan[] = [];
      for (let l = e.pLocStart[p]!; l < e.pLocEnd[p]!; l++) {
        localities.push({ locality: e.loc[e.order[e.lStart[l]!]!]!, shareMillionths: e.lShare[l]! });
      }
      level.localities = localities;
    }
    priorities.push(level);
  }
  return { globalShortage: e.globalShortage, priorities };
}
