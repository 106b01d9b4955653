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
 * locality weight throw `InconsistentTopology`, whatever their order.
 */
import type { LocalityCandidate } from '../core/candidate.js';
import { PerDecisionPriorityPolicy } from './priority-base.js';
import type { PriorityOptions } from './priority-options.js';

/**
 * Locality-weighted routing inside failover priorities, planned per decision.
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
export class LocalityWeightedRandom<C extends LocalityCandidate = LocalityCandidate> extends PerDecisionPriorityPolicy<C> {
  /** Throws `InvalidConfig` naming a bad option. OS-seeded unless `seed` is given. */
  constructor(options?: PriorityOptions) {
    super(options, true);
  }
}
