/**
 * `flagsOf(c)`: a candidate's three predicates — `isMember()`,
 * `isEligible()`, `isPanicEligible()` — as engine flag bits, read once.
 *
 * For the library's own wrapper chain, `Prioritized(Backend)` optionally
 * inside `Localized`, whose predicate methods are the unmodified prototype
 * methods (checked by function identity, so an instance that overrides one
 * takes the generic path), the answers are read straight from the fields
 * those methods consult: the backend's `status` (`'ready'` is eligible,
 * `'draining'` leaves membership and panic) and `panicEligible`. This is
 * exactly what the methods return — they read the same two fields — without
 * six nested calls and two status validations per candidate. Any other
 * candidate has its three methods called, in that order.
 */
import { Backend, Localized, Prioritized, type PriorityCandidate } from '../../core/candidate.js';
/** Flag bit: counts in its priority's configured capacity. */
export const F_MEMBER = 1;
/** Flag bit: selectable for ordinary (healthy) traffic. */
export const F_ELIGIBLE = 2;
/** Flag bit: use-all panic may revive it. */
export const F_PANIC = 4;

const L_MEMBER = Localized.prototype.isMember;
const L_ELIGIBLE = Localized.prototype.isEligible;
const L_PANIC = Localized.prototype.isPanicEligible;
const P_MEMBER = Prioritized.prototype.isMember;
const P_ELIGIBLE = Prioritized.prototype.isEligible;
const P_PANIC = Prioritized.prototype.isPanicEligible;
const B_ELIGIBLE = Backend.prototype.isEligible;

/** The flags of `p`, a `Prioritized` with unmodified methods, when its inner candidate is a plain `Backend`; else −1. */
function prioritizedFlags(p: Prioritized): number {
  const b = p.inner;
  if (!(b instanceof Backend) || b.isEligible !== B_ELIGIBLE) return -1;
  const status = b.status;
  if (status === 'draining') return 0;
  return F_MEMBER | (status === 'ready' ? F_ELIGIBLE : 0) | (p.panicEligible ? F_PANIC : 0);
}

/** `isMember() | isEligible() | isPanicEligible()` of `c` as flag bits. */
export function flagsOf(c: PriorityCandidate): number {
  let f = -1;
  if (c.isMember === L_MEMBER && c.isEligible === L_ELIGIBLE && c.isPanicEligible === L_PANIC) {
    // Localized delegates all three to a Prioritized inner candidate (it is a PriorityCandidate).
    const inner = (c as Localized).inner;
    if (inner instanceof Prioritized && isPlainPrioritized(inner)) f = prioritizedFlags(inner);
  } else if (c.isMember === P_MEMBER && c.isEligible === P_ELIGIBLE && c.isPanicEligible === P_PANIC) {
    if (c instanceof Prioritized) f = prioritizedFlags(c);
  }
  if (f >= 0) return f;
  return (c.isMember() ? F_MEMBER : 0) | (c.isEligible() ? F_ELIGIBLE : 0) | (c.isPanicEligible() ? F_PANIC : 0);
}

function isPlainPrioritized(p: Prioritized): boolean {
  return p.isMember === P_MEMBER && p.isEligible === P_ELIGIBLE && p.isPanicEligible === P_PANIC && typeof p.priority === 'number';
}
