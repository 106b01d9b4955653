/**
 * The candidate sets a Router draws from: the whole view, a failover tier
 * (`acquire({ priority })`) or a database role (`acquire({ intent })`). One
 * kind of set for all three: the view's members a rule admits, with the
 * set's own policy instance (its own seed, derived from the router's replay
 * seed when there is one) prepared on them.
 *
 * Sets are prepared when the view is rebuilt — that is, when the table's
 * membership or health epoch moves (a role change bumps the health epoch)
 * — never per request: the whole view at once, a tier or a role at its
 * first use after the rebuild (off the steady-state pick path; most
 * routers never name one). A set's policy is kept across views, as a
 * policy's streams are. Looking a set up is a map lookup (a tier) or an
 * index (a role): no allocation, no scan.
 */
import type { Seed } from '../core/rng.js';
import type { DbRoleCode, DbState } from '../load/db-state.js';
import type { Policy } from '../policy/types.js';
import type { PolicySetup } from './policies.js';
import type { LoadEnv, SlotCandidate } from './slot-candidate.js';

/** A seed for one of a router's streams: its replay seed mixed with `salt` (one salt per stream). */
export function deriveSeed(seed: Seed, salt: number): bigint {
  return BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + BigInt(salt) * 0xbf58476d1ce4e5b9n + 1n);
}

/** Salts of a router's streams: the router's own (jitter, fallback), the whole view's policy, tier p's (TIER + p), role r's (−r). */
export const SeedSalt = { Router: 1, View: 2, Tier: 3 } as const;

/**
 * Prepares `policy` for a new view now, before any acquire has excluded a
 * member (an exclusion marks candidates ineligible for that acquire only,
 * and a plan sampled then would keep them out until the next view). A
 * snapshot the policy refuses is left to the pick, which throws the same
 * error to the acquire.
 */
function prepareQuietly(policy: Policy<SlotCandidate>, view: SlotCandidate[]): void {
  try {
    policy.prepare(view);
  } catch {
    // The next pick on this view prepares again and throws the error to its caller.
  }
}

/** One candidate set: the members a rule admits, and the set's own policy prepared on them. */
export class CandidateSet {
  /** The set's members in the view in force (a new array per view, so the policy re-prepares). */
  cands: SlotCandidate[] = [];
  /** Members eligible when the set was prepared (how many distinct members a draw can try). */
  eligible = 0;
  /** The set's own policy instance. */
  readonly policy: Policy<SlotCandidate>;
  /** Which members belong (undefined: all of them). */
  private readonly admits: ((c: SlotCandidate) => boolean) | undefined;
  /** The view build this set was prepared for. */
  builtFor = -1;

  constructor(policy: Policy<SlotCandidate>, admits: ((c: SlotCandidate) => boolean) | undefined) {
    this.policy = policy;
    this.admits = admits;
  }

  /** Takes `view`'s admitted members and prepares the policy on them. */
  prepare(view: SlotCandidate[], build: number): void {
    const cands = this.admits === undefined ? view : view.filter(this.admits);
    let eligible = 0;
    for (const c of cands) if (c.eligible) eligible++;
    this.cands = cands;
    this.eligible = eligible;
    this.builtFor = build;
    prepareQuietly(this.policy, cands);
  }
}

/** Every candidate set of one router (its thread only). */
export class CandidateSets {
  /** The whole view, with the router's main policy: what an acquire without priority or intent draws from. */
  readonly all: CandidateSet;
  private readonly setup: PolicySetup;
  private readonly env: LoadEnv;
  private readonly seed: Seed | undefined;
  private readonly db: DbState;
  private readonly tiers = new Map<number, CandidateSet>();
  /** By role code. */
  private readonly roles: (CandidateSet | undefined)[] = [undefined, undefined, undefined];
  private view: SlotCandidate[] = [];
  private build = 0;

  constructor(setup: PolicySetup, env: LoadEnv, seed: Seed | undefined, db: DbState) {
    this.setup = setup;
    this.env = env;
    this.seed = seed;
    this.db = db;
    this.all = new CandidateSet(this.policy(SeedSalt.View), undefined);
  }

  /** A new view (rebuilt): the whole set is prepared now, every other set at its next use. */
  reset(view: SlotCandidate[]): void {
    this.view = view;
    this.all.prepare(view, ++this.build);
  }

  /** Failover tier `priority`'s set (an integer ≥ 0, checked by the request's reader). */
  tier(priority: number): CandidateSet {
    let set = this.tiers.get(priority);
    if (set === undefined) {
      set = new CandidateSet(this.policy(SeedSalt.Tier + priority), (c) => c.priority === priority);
      this.tiers.set(priority, set);
    }
    if (set.builtFor !== this.build) set.prepare(this.view, this.build);
    return set;
  }

  /** Role `role`'s set: its members as the view was built (a role change bumps the health epoch, so the view rebuilds). */
  role(role: DbRoleCode): CandidateSet {
    let set = this.roles[role];
    if (set === undefined) {
      const db = this.db;
      set = new CandidateSet(this.policy(-role), (c) => db.role(c.slot) === role);
      this.roles[role] = set;
    }
    if (set.builtFor !== this.build) set.prepare(this.view, this.build);
    return set;
  }

  /** A new policy instance of the router's kind, on its own stream (`salt`). */
  private policy(salt: number): Policy<SlotCandidate> {
    return this.setup.create(this.seed === undefined ? undefined : deriveSeed(this.seed, salt), this.env);
  }
}
