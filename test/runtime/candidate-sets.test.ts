// Candidate sets (src/runtime/candidate-sets.ts): the whole view, a failover tier and a database role are one
// kind of set — the view's members a rule admits, with the set's own policy on its own stream — prepared once
// per view (at the reset for the whole view, at the first use after it for a tier or a role), never per lookup.
import { describe, expect, it } from 'vitest';
import type { DbState } from '../../src/load/db-state.js';
import { DbRole } from '../../src/load/db-state.js';
import type { Policy } from '../../src/policy/types.js';
import { CandidateSets, deriveSeed } from '../../src/runtime/candidate-sets.js';
import type { PolicySetup } from '../../src/runtime/policies.js';
import { type LoadEnv, Metric, type SlotCandidate } from '../../src/runtime/slot-candidate.js';

/** A policy that records what it was prepared on. */
interface Recorder extends Policy<SlotCandidate> {
  seed: unknown;
  prepared: SlotCandidate[][];
}

function fixture(seed: bigint | undefined) {
  const made: Recorder[] = [];
  const setup: PolicySetup = {
    metric: Metric.Requests,
    create(s) {
      const p: Recorder = {
        seed: s,
        prepared: [],
        prepare(c: readonly SlotCandidate[]) {
          p.prepared.push(c as SlotCandidate[]);
        },
        pick: () => 0,
      } as unknown as Recorder;
      made.push(p);
      return p;
    },
  };
  const roles = new Map<number, number>();
  const db = { role: (slot: number) => roles.get(slot) ?? DbRole.Unknown } as unknown as DbState;
  const sets = new CandidateSets(setup, {} as LoadEnv, seed, db);
  return { sets, made, roles };
}

/** Candidates of slots 0..n-1, priority `prio(i)`, eligible unless `ineligible` holds i. */
function view(n: number, prio: (i: number) => number, ineligible: readonly number[] = []): SlotCandidate[] {
  return Array.from({ length: n }, (_, i) => ({ slot: i, priority: prio(i), eligible: !ineligible.includes(i) }) as SlotCandidate);
}

describe('candidate sets', () => {
  it('a tier is exactly the view members of its priority, prepared once per view however often it is looked up', () => {
    const { sets, made } = fixture(undefined);
    const v1 = view(6, (i) => i % 3, [3]);
    sets.reset(v1);
    for (let k = 0; k < 1000; k++) sets.tier(0);
    const t0 = sets.tier(0);
    expect(t0.cands.map((c) => c.slot)).toEqual([0, 3]);
    expect(t0.eligible).toBe(1);
    expect((t0.policy as Recorder).prepared).toEqual([t0.cands]);
    // A new view: the tier re-filters and re-prepares at its next use, with the same policy instance.
    const v2 = view(4, () => 0);
    sets.reset(v2);
    expect((t0.policy as Recorder).prepared).toHaveLength(1);
    const again = sets.tier(0);
    expect(again.policy).toBe(t0.policy);
    expect(again.cands.map((c) => c.slot)).toEqual([0, 1, 2, 3]);
    expect((t0.policy as Recorder).prepared).toHaveLength(2);
    // The whole view's policy is prepared at every reset, on the view array itself; three policies in all.
    expect((sets.all.policy as Recorder).prepared).toEqual([v1, v2]);
    expect(made).toHaveLength(2);
    sets.tier(1);
    expect(made).toHaveLength(3);
  });

  it('a role set is the members the db state gives that role, prepared once per view', () => {
    const { sets, roles } = fixture(undefined);
    roles.set(0, DbRole.Primary);
    roles.set(2, DbRole.Replica);
    roles.set(3, DbRole.Replica);
    sets.reset(view(5, () => 0, [3]));
    const primaries = sets.role(DbRole.Primary);
    const replicas = sets.role(DbRole.Replica);
    for (let k = 0; k < 100; k++) sets.role(DbRole.Replica);
    expect(primaries.cands.map((c) => c.slot)).toEqual([0]);
    expect([replicas.cands.map((c) => c.slot), replicas.eligible]).toEqual([[2, 3], 1]);
    expect((replicas.policy as Recorder).prepared).toHaveLength(1);
    expect(replicas.policy).not.toBe(primaries.policy);
  });

  it('each set has its own stream: the replay seed mixed with the salts a router has always used (view 2, tier 3 + p, role −r)', () => {
    const { sets, made } = fixture(42n);
    sets.reset(view(3, (i) => i));
    sets.tier(0);
    sets.tier(2);
    sets.role(DbRole.Primary);
    sets.role(DbRole.Replica);
    expect(made.map((p) => p.seed)).toEqual([
      deriveSeed(42n, 2),
      deriveSeed(42n, 3),
      deriveSeed(42n, 5),
      deriveSeed(42n, -DbRole.Primary),
      deriveSeed(42n, -DbRole.Replica),
    ]);
    expect(new Set(made.map((p) => p.seed)).size).toBe(5);
    // Without a replay seed every policy seeds itself from the OS (in the router's thread).
    const unseeded = fixture(undefined);
    unseeded.sets.reset(view(1, () => 0));
    unseeded.sets.tier(0);
    expect(unseeded.made.map((p) => p.seed)).toEqual([undefined, undefined]);
  });
});
