/**
 * The prepared form of the priority and locality policies: plan once per
 * membership/health epoch, then pick in expected O(1) — flat in n, through
 * guide tables — with no allocation.
 *
 * `prepare(candidates)` samples every predicate once, computes the plan and
 * builds cumulative tables. `pick(candidates)` re-prepares only when handed a
 * different array (identity) or a different length, so the runtime passes a
 * fresh array whenever membership or health changes and the same array
 * otherwise. Health read at `prepare` time stays in force until the next
 * prepare: that is the point (no per-request scan), and it is also why, for
 * the same snapshot and seed, the prepared form returns exactly the index
 * sequence of the per-decision form.
 */
import type { LocalityCandidate, PriorityCandidate } from '../core/candidate.js';
import { Rng } from '../core/rng.js';
import { PriorityEngine } from './priority-engine.js';
import type { DrawResult, PriorityDecision } from './priority-decide.js';
import { type PriorityOptions, type ResolvedPriorityOptions, resolvePriorityOptions } from './priority-options.js';
import { type PriorityPlan, planOf } from './priority-plan.js';
import { computePriorityShares } from './priority-shares.js';
import { PriorityTable } from './priority-table.js';
import type { PickContext, Policy } from './types.js';

/** Common body of the prepared priority and locality policies. */
export abstract class PreparedPriorityPolicy<C extends PriorityCandidate> implements Policy<C> {
  /** The validated options in force. */
  readonly options: ResolvedPriorityOptions;
  private readonly rng: Rng;
  private readonly engine = new PriorityEngine();
  private readonly last: DrawResult = { priority: 0, panic: false };
  private readonly withLocality: boolean;
  private table: PriorityTable | undefined;
  private preparedPlan: PriorityPlan | undefined;
  private source: readonly C[] | undefined;
  private sourceLength = -1;

  protected constructor(options: PriorityOptions | undefined, withLocality: boolean) {
    this.options = resolvePriorityOptions(options);
    this.rng = new Rng(options?.seed);
    this.withLocality = withLocality;
  }

  /**
   * Samples `candidates` and builds the pick tables. Throws what the
   * per-decision form throws for a bad snapshot (`Empty`,
   * `InconsistentTopology`, `WeightOverflow`, `InvalidWeight`); the previous
   * prepared state stays in force when it does.
   */
  prepare(candidates: readonly C[]): void {
    this.engine.sample(candidates, this.withLocality);
    computePriorityShares(this.engine, this.options);
    const table = new PriorityTable(this.engine, this.options, this.withLocality);
    const plan = planOf(this.engine, this.options, this.withLocality);
    this.table = table;
    this.preparedPlan = plan;
    this.source = candidates;
    this.sourceLength = candidates.length;
  }

  /** An index into `candidates`; expected O(1) and allocation-free while the same array is passed. */
  pick(candidates: readonly C[], context?: PickContext): number {
    void context;
    if (candidates !== this.source || candidates.length !== this.sourceLength || this.table === undefined) {
      this.prepare(candidates);
    }
    return this.table!.pick(this.rng, this.last);
  }

  /** Like {@link pick}, also reporting the chosen priority and its mode. */
  decide(candidates: readonly C[]): PriorityDecision {
    const index = this.pick(candidates);
    return { index, priority: this.last.priority, mode: this.last.panic ? 'panic' : 'healthy' };
  }

  /** The plan in force for `candidates` (prepares first when they are not the prepared array). */
  plan(candidates: readonly C[]): PriorityPlan {
    if (candidates !== this.source || candidates.length !== this.sourceLength || this.preparedPlan === undefined) {
      this.prepare(candidates);
    }
    return this.preparedPlan!;
  }
}

/**
 * {@link PriorityWeightedRandom} with the plan prepared once per snapshot.
 *
 * @example
 * const policy = new PreparedPriorityWeightedRandom({ seed: 1 });
 * policy.prepare(members);          // on every membership/health epoch (or pass a new array)
 * const i = policy.pick(members);   // expected O(1), no allocation
 */
export class PreparedPriorityWeightedRandom<
  C extends PriorityCandidate = PriorityCandidate,
> extends PreparedPriorityPolicy<C> {
  /** Throws `InvalidConfig` naming a bad option. OS-seeded unless `seed` is given. */
  constructor(options?: PriorityOptions) {
    super(options, false);
  }
}

/**
 * {@link LocalityWeightedRandom} with the plan prepared once per snapshot.
 *
 * @example
 * const policy = new PreparedLocalityWeightedRandom({ seed: 1 });
 * const i = policy.pick(endpoints); // prepares on first use and on a new array
 */
export class PreparedLocalityWeightedRandom<
  C extends LocalityCandidate = LocalityCandidate,
> extends PreparedPriorityPolicy<C> {
  /** Throws `InvalidConfig` naming a bad option. OS-seeded unless `seed` is given. */
  constructor(options?: PriorityOptions) {
    super(options, true);
  }
}
