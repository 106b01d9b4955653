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
 * of every candidate and per-group sums without sorting, for up to 64
 * distinct (priority, locality) groups; O(n log n) beyond — with retained scratch;
 * for per-request use see {@link PreparedPriorityWeightedRandom}.
 */
import type { PriorityCandidate } from '../core/candidate.js';
import { PerDecisionPriorityPolicy } from './priority-base.js';
import type { PriorityOptions } from './priority-options.js';

/**
 * Priority failover with weighted random endpoint choice, planned per decision.
 *
 * @example
 * const policy = new PriorityWeightedRandom({ panicMode: 'failClosed', seed: 1 });
 * const members = [
 *   new Prioritized(new Backend('db-a', { weight: 2 }), 0),
 *   new Prioritized(new Backend('db-standby'), 1).withPanicEligibility(false),
 * ];
 * const { index, priority, mode } = policy.decide(members);
 */
export class PriorityWeightedRandom<C extends PriorityCandidate = PriorityCandidate> extends PerDecisionPriorityPolicy<C> {
  /** Throws `InvalidConfig` naming a bad option. OS-seeded unless `seed` is given. */
  constructor(options?: PriorityOptions) {
    super(options, false);
  }
}
