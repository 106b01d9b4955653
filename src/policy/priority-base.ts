/**
 * The per-decision form shared by `PriorityWeightedRandom` and
 * `LocalityWeightedRandom`: sample, plan and draw on every call.
 */
import type { PriorityCandidate } from '../core/candidate.js';
import { Rng } from '../core/rng.js';
import { PriorityEngine } from './priority-engine.js';
import { type DrawResult, type PriorityDecision, drawDecision } from './priority-decide.js';
import { type PriorityOptions, type ResolvedPriorityOptions, resolvePriorityOptions } from './priority-options.js';
import { type PriorityPlan, computePlan } from './priority-plan.js';
import { computePriorityShares } from './priority-shares.js';
import type { PickContext, Policy } from './types.js';

/** Common body of the per-decision priority and locality policies. */
export abstract class PerDecisionPriorityPolicy<C extends PriorityCandidate> implements Policy<C> {
  /** The validated options in force. */
  readonly options: ResolvedPriorityOptions;
  private readonly rng: Rng;
  private readonly engine = new PriorityEngine();
  private readonly last: DrawResult = { priority: 0, panic: false };
  private readonly withLocality: boolean;

  protected constructor(options: PriorityOptions | undefined, withLocality: boolean) {
    this.options = resolvePriorityOptions(options);
    this.rng = new Rng(options?.seed);
    this.withLocality = withLocality;
  }

  /** Nothing to precompute: this form samples, plans and draws on every pick (the prepared classes keep tables). */
  prepare(_candidates: readonly C[]): void {}

  /**
   * An index into `candidates`, sampled, planned and drawn now. Throws
   * `Empty`, `NoEligibleCandidates`, `PanicRejected` (fail-closed panic),
   * `InconsistentTopology`, `WeightOverflow`. Allocates nothing after warm-up.
   */
  pick(candidates: readonly C[], context?: PickContext): number {
    void context;
    this.engine.sampleUnordered(candidates, this.withLocality);
    computePriorityShares(this.engine, this.options);
    return drawDecision(this.engine, this.options, this.rng, this.withLocality, this.last);
  }

  /** Like {@link pick}, also reporting the chosen priority and whether it routed healthy or in panic. */
  decide(candidates: readonly C[]): PriorityDecision {
    const index = this.pick(candidates);
    return { index, priority: this.last.priority, mode: this.last.panic ? 'panic' : 'healthy' };
  }

  /** The share computation for `candidates`, without drawing. */
  plan(candidates: readonly C[]): PriorityPlan {
    return computePlan(this.engine, candidates, this.options, this.withLocality);
  }
}
