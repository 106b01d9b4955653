/**
 * EdfRotation: a weighted rotation by earliest deadline first (Envoy's
 * `EdfScheduler`), O(log n) per pick over a binary heap in preallocated
 * typed arrays.
 *
 * Member i with weight wᵢ is due at virtual times 1/wᵢ, 2/wᵢ, 3/wᵢ, ...;
 * each pick takes the member due first (the lower index on an exact tie)
 * and moves it to its next deadline. From a fresh start, after the picks
 * due up to virtual time t every member has been chosen ⌊t·wᵢ⌋ times, so
 * any Σw consecutive picks from a fresh start choose member i exactly wᵢ
 * times (weights 2, 1, 1 → a, then the tie at t = 1 in index order: a b c;
 * a member is never due twice before another is due once unless its
 * weight is at least twice the other's, but a run of ties is served in
 * index order, so nginx's smooth rotation — O(n) — interleaves more). A deadline is computed as `origin + (k + 1) / w` from
 * the member's pick count k — one correctly rounded division, never an
 * accumulated sum — so two mathematically equal deadlines are equal
 * doubles, and ties are exact. (Distinct deadlines closer than one part in
 * 2^52 can compare equal; with weights of 2^26 and more that is possible,
 * and only reorders such a tie.)
 *
 * Carrying a rotation across a membership change: {@link reset} takes, for
 * each new member, how long before it is due (relative to now) — a
 * surviving member keeps its place in the rotation, a new one is due after
 * one period 1/w — exactly Envoy's "preserve the current deadlines" rule
 * where a plain restart would hand the first members an extra turn on
 * every change.
 */

/** Earliest-deadline-first rotation over member indices 0 .. n − 1. @internal */
export class EdfRotation {
  /** Members in the rotation. */
  n = 0;
  /** Virtual time of the last pick. */
  now = 0;
  private weight = new Float64Array(0);
  private count = new Float64Array(0);
  private origin = new Float64Array(0);
  private deadline = new Float64Array(0);
  /** Binary min-heap of member indices by (deadline, index). */
  private heap = new Int32Array(0);

  /**
   * Starts a rotation over `weights[0 .. n)`. `dueIn[i]`, when given and not
   * negative, is how long before member i is due (0: due now; clamped to one
   * period 1/wᵢ); otherwise (a new member) it is due after one period.
   */
  reset(weights: Float64Array, n: number, dueIn?: Float64Array): void {
    if (this.heap.length < n) {
      const cap = Math.max(n, 2 * this.heap.length);
      this.weight = new Float64Array(cap);
      this.count = new Float64Array(cap);
      this.origin = new Float64Array(cap);
      this.deadline = new Float64Array(cap);
      this.heap = new Int32Array(cap);
    }
    this.n = n;
    this.now = 0;
    for (let i = 0; i < n; i++) {
      const w = weights[i]!;
      const period = 1 / w;
      const due = dueIn !== undefined && dueIn[i]! >= 0 ? Math.min(dueIn[i]!, period) : period;
      this.weight[i] = w;
      this.count[i] = 0;
      this.origin[i] = due === period ? 0 : due - period;
      this.deadline[i] = due;
      this.heap[i] = i;
    }
    for (let k = (n >> 1) - 1; k >= 0; k--) this.siftDown(k);
  }

  /** How long before member i is due, relative to the last pick (for {@link reset} after a change). */
  dueIn(i: number): number {
    return this.deadline[i]! - this.now;
  }

  /** The member due first; it moves to its next deadline. O(log n). */
  next(): number {
    const i = this.heap[0]!;
    this.now = this.deadline[i]!;
    const k = this.count[i]! + 1;
    this.count[i] = k;
    this.deadline[i] = this.origin[i]! + (k + 1) / this.weight[i]!;
    this.siftDown(0);
    return i;
  }

  /** The member due first, without moving it. */
  peek(): number {
    return this.heap[0]!;
  }

  private before(a: number, b: number): boolean {
    const da = this.deadline[a]!;
    const db = this.deadline[b]!;
    return da < db || (da === db && a < b);
  }

  private siftDown(k: number): void {
    const heap = this.heap;
    const n = this.n;
    const item = heap[k]!;
    for (;;) {
      let child = 2 * k + 1;
      if (child >= n) break;
      if (child + 1 < n && this.before(heap[child + 1]!, heap[child]!)) child++;
      if (!this.before(heap[child]!, item)) break;
      heap[k] = heap[child]!;
      k = child;
    }
    heap[k] = item;
  }
}
