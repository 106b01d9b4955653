/**
 * The contract every policy implements.
 *
 * `pick(candidates, context?)` returns an index into `candidates` of an
 * eligible member, or throws `PoiseError` (`Empty` for an empty slice,
 * `NoEligibleCandidates` when no member may be chosen). Policies that prepare
 * tables (alias tables, Maglev) rebuild them when they are handed a different
 * array (identity) or a different length — never inside an ordinary pick —
 * so the runtime passes a fresh array whenever membership or health changes
 * and the same array otherwise.
 */
import type { Candidate } from '../core/candidate.js';
import type { Seed } from '../core/rng.js';

/** Per-pick context. Keyed policies (Rendezvous, Maglev) require `key`. */
export interface PickContext {
  /** Affinity key: the same key lands on the same backend across workers and restarts. */
  key?: string | number;
}

/** A selection policy. */
export interface Policy<C extends Candidate = Candidate> {
  /**
   * Builds now whatever the policy precomputes for this slice (alias table,
   * Maglev table, member hashes, scratch space), so that the next `pick`
   * with the same array does none of that work. Optional to call: `pick`
   * prepares by itself when it is handed a different array or length. It
   * never changes a decision — a seeded policy draws the same sequence with
   * or without it. Call it when membership or weights change (off the
   * request path); policies with nothing to precompute make it a no-op.
   * Throws what `pick` would throw for a malformed slice, and then keeps the
   * previous prepared state.
   */
  prepare(candidates: readonly C[]): void;
  /** An index into `candidates` of an eligible member; throws `PoiseError` when none can be chosen. */
  pick(candidates: readonly C[], context?: PickContext): number;
}

/** Options shared by every stochastic policy. */
export interface SeedOptions {
  /** Exact replay. Without it the policy seeds itself from the OS. */
  seed?: Seed;
}
