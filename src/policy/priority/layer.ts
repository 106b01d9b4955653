/**
 * The priority and locality layer around any policy (the `within` option of
 * the prepared priority and locality policies; every runtime policy name
 * runs inside it).
 *
 * Envoy runs priority and locality above whichever per-host policy is
 * configured; so does this layer. When a snapshot is prepared, the priority
 * engine plans it once (sample.ts, plan.ts: overprovisioning, spill-over,
 * panic and health-adjusted locality weights) and the pick table holds the
 * cumulative shares (table.ts). The layer then cuts the snapshot into one
 * candidate array per endpoint group — a (priority, locality), or a
 * priority without locality routing — holding that group's selectable
 * members (eligible ones; in a panicking priority, also the panic-eligible
 * ones), and gives every group its own instance of the configured policy,
 * prepared on that array. A pick draws the priority (and the locality when
 * the chosen priority has more than one), then lets the group's policy
 * choose inside it, and maps its index back: it touches that group's
 * members only, allocates nothing, and reads no weight of any other group.
 *
 * - Every group's policy instance is kept by (priority, locality) across
 *   prepares, so a round-robin cursor, a smooth-weighted rotation or a
 *   Maglev table carries over a health change the way it does without
 *   the layer.
 * - When one healthy group takes all traffic (the usual case: priority 0
 *   fully available, one locality), nothing is drawn at all, so the
 *   configured policy's own seeded sequence is exactly what it is alone.
 * - With `stickyKeys` (the keyed policies) a pick with `context.key` takes
 *   its priority and locality draws from the key's hash (MurmurHash3 with
 *   the fleet-wide seed), as Envoy's hashing load balancers choose the
 *   priority from the request hash: a key moves to the next priority only
 *   with the share that spills, and lands on the same member in every
 *   worker. Without a key, draws come from the layer's own stream.
 * - In a panicking priority, a member that is not eligible (use-all panic
 *   revives it) is shown to the group's policy through a thin wrapper whose
 *   `isEligible()` answers "eligible or panic-eligible".
 * - When the group's policy finds no eligible member at this pick (every
 *   member excluded for this acquire, or gone ineligible since the
 *   prepare), the layer returns the first eligible candidate of the whole
 *   snapshot (a rare O(n) fallback), else throws `NoEligibleCandidates`.
 */
import type { Candidate, PriorityCandidate } from '../../core/candidate.js';
import { PoiseError } from '../../core/errors.js';
import { DEFAULT_HASH_SEED, seed32Of, toHashSeed } from '../../core/hash.js';
import type { Rng } from '../../core/rng.js';
import { MILLION } from '../../core/weight.js';
import { keyHash32 } from '../keyed.js';
import type { TimedCandidate } from '../power-of-two.js';
import type { PickContext, Policy } from '../types.js';
import { type DrawResult, drawSmall } from './draw.js';
import type { Sample } from './sample.js';
import type { PriorityTable } from './table.js';

/** Builds the policy of one endpoint group; `group` counts the instances made so far (0 for the first). */
export type WithinFactory = (group: number) => Policy;

const KEY_SEED32 = seed32Of(toHashSeed(DEFAULT_HASH_SEED));

/** A member of a panicking priority as its group's policy sees it: selectable when eligible or panic-eligible. */
class PanicMember implements Candidate {
  readonly inner: PriorityCandidate;
  constructor(inner: PriorityCandidate) {
    this.inner = inner;
  }
  get id(): string {
    return this.inner.id;
  }
  get weight(): number {
    return this.inner.weight;
  }
  isEligible(): boolean {
    return this.inner.isEligible() || this.inner.isPanicEligible();
  }
  load(): number {
    return this.inner.load();
  }
}

/** A panic member of a latency-measuring candidate: also forwards `latency()` (the tail rule's read, power-of-two.ts). */
class TimedPanicMember extends PanicMember implements TimedCandidate {
  latency(): number {
    return (this.inner as unknown as TimedCandidate).latency();
  }
}

/** The per-group arrays of one prepared snapshot and the policies choosing inside them. @internal */
export class PriorityLayer {
  private readonly make: WithinFactory;
  private readonly sticky: boolean;
  private made = 0;
  /** Group policy instances by (priority, locality), kept across prepares. */
  private readonly byKey = new Map<string, Policy>();
  /** By endpoint group of the prepared table: the members as the group's policy sees them, and their indices in the snapshot. */
  private groupCands: Candidate[][] = [];
  private groupIndex: Int32Array[] = [];
  private groupPolicy: Policy[] = [];
  /** The group that takes all traffic without a draw, or −1, and its priority. */
  private sole = -1;
  private solePriority = 0;

  constructor(make: WithinFactory, stickyKeys: boolean) {
    this.make = make;
    this.sticky = stickyKeys;
  }

  /**
   * Cuts the prepared snapshot into its endpoint groups and prepares each
   * group's policy on its array. `e` is the sampled engine behind `table`
   * (its locality names and priorities name the groups).
   */
  prepare(e: Sample, table: PriorityTable, candidates: readonly PriorityCandidate[], withLocality: boolean): void {
    const cands: Candidate[][] = [];
    const index: Int32Array[] = [];
    const policies: Policy[] = [];
    for (let p = 0; p < table.priorities; p++) {
      const panic = e.pPanic[p] === 1;
      const from = table.groupStart(p);
      for (let g = from; g < from + table.groupCount(p); g++) {
        const members = table.groupMembers(g);
        const first = members.length > 0 ? members[0]! : withLocality ? e.order[e.lStart[g]!]! : e.order[e.pStart[p]!]!;
        const key = withLocality ? `${e.pValue[p]}\u0000${e.loc[first]}` : `${e.pValue[p]}`;
        let policy = this.byKey.get(key);
        if (policy === undefined) {
          policy = this.make(this.made++);
          this.byKey.set(key, policy);
        }
        const group: Candidate[] = [];
        for (const i of members) {
          const c = candidates[i]!;
          group.push(
            panic && !c.isEligible()
              ? typeof (c as Partial<TimedCandidate>).latency === 'function'
                ? new TimedPanicMember(c)
                : new PanicMember(c)
              : c,
          );
        }
        if (group.length > 0) policy.prepare(group);
        cands[g] = group;
        index[g] = members;
        policies[g] = policy;
      }
    }
    this.groupCands = cands;
    this.groupIndex = index;
    this.groupPolicy = policies;
    const p = table.soleGroupPriority();
    this.sole = p >= 0 && table.groupCount(p) === 1 ? table.groupStart(p) : -1;
    this.solePriority = p >= 0 ? e.pValue[p]! : 0;
  }

  /** One pick: the group (drawn, or the sole one), then the group's policy inside it. */
  pick(
    table: PriorityTable,
    rng: Rng,
    candidates: readonly PriorityCandidate[],
    context: PickContext | undefined,
    out: DrawResult,
  ): number {
    let g = this.sole;
    if (g >= 0) {
      out.panic = false;
      out.priority = this.solePriority;
    } else {
      const key = this.sticky ? context?.key : undefined;
      if (key === undefined) {
        const p = table.priorityAt(drawSmall(rng, MILLION), out);
        g = table.groupCount(p) === 1 ? table.groupStart(p) : table.groupAt(p, drawSmall(rng, MILLION));
      } else {
        // The key's hash gives both draws: its low bits the priority, a remix the locality.
        const h = keyHash32(key, KEY_SEED32) >>> 0;
        const p = table.priorityAt(h % MILLION, out);
        g = table.groupCount(p) === 1 ? table.groupStart(p) : table.groupAt(p, (Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0) % MILLION);
      }
    }
    const group = this.groupCands[g]!;
    try {
      return this.groupIndex[g]![this.groupPolicy[g]!.pick(group, context)]!;
    } catch (err) {
      if (!(err instanceof PoiseError) || (err.code !== 'NoEligibleCandidates' && err.code !== 'Empty')) throw err;
      for (let i = 0; i < candidates.length; i++) if (candidates[i]!.isEligible()) return i;
      throw new PoiseError('NoEligibleCandidates', `pick: none of the ${candidates.length} candidates is eligible`);
    }
  }
}
