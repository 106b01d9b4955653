/**
 * The members one acquire has ruled out — excluded by its caller
 * (`acquire({ exclude })`), or refused while it drew (full, behind, a
 * moved tag) — marked on the candidates themselves so that the policies
 * skip them, and unmarked when the acquire ends. One per router; a fixed
 * array reused by every acquire (no allocation), never a scan: only the
 * marked members are visited to unmark them.
 */
import type { Rng } from '../core/rng.js';
import type { SlotCandidate } from './slot-candidate.js';

/** The ruled-out members of the acquire in progress (one router's thread). */
export class Exclusions {
  private readonly byId: ReadonlyMap<string, SlotCandidate>;
  private readonly rng: Rng;
  private blocked: SlotCandidate[] = [];
  /** How many members are marked now. */
  count = 0;

  /** `byId`: the router's view by backend id (kept up to date in place); `rng`: the router's own stream. */
  constructor(byId: ReadonlyMap<string, SlotCandidate>, rng: Rng) {
    this.byId = byId;
    this.rng = rng;
  }

  /** Rules `c` out for this acquire. */
  block(c: SlotCandidate): void {
    if (c.blocked) return;
    c.blocked = true;
    this.blocked[this.count++] = c;
  }

  /** Rules out the members of these ids (ids the view does not hold are ignored). */
  blockIds(ids: ReadonlySet<string> | readonly string[]): void {
    if ((ids instanceof Set ? ids.size : (ids as readonly string[]).length) > 0) ids.forEach(this.blockId, this);
  }

  /** The acquire ended: every marked member is a candidate again. */
  clear(): void {
    for (let k = 0; k < this.count; k++) this.blocked[k]!.blocked = false;
    this.count = 0;
  }

  /**
   * When a prepared policy returned a ruled-out member: the first usable
   * one from a random start (eligible first, then panic-eligible), or
   * undefined when none is.
   */
  fallback(cands: SlotCandidate[]): SlotCandidate | undefined {
    const n = cands.length;
    const start = this.rng.below(n);
    for (let k = 0; k < n; k++) {
      const c = cands[(start + k) % n]!;
      if (c.isEligible()) return c;
    }
    for (let k = 0; k < n; k++) {
      const c = cands[(start + k) % n]!;
      if (c.isPanicEligible()) return c;
    }
    return undefined;
  }

  private blockId(id: string): void {
    const c = this.byId.get(id);
    if (c !== undefined) this.block(c);
  }
}
