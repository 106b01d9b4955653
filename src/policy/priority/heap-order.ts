/**
 * The priority sample's ordering past MAX_KEYS distinct (priority, locality)
 * keys, where the counting sort of sample.ts gives up: an in-place heapsort
 * of candidate indices by (priority, locality, index) — no comparator
 * closure, no allocation.
 */

/** Strict order of candidate indices `a`, `b`: (priority, locality, index). */
function less(prio: Uint32Array, loc: readonly string[], a: number, b: number, withLocality: boolean): boolean {
  const pa = prio[a]!;
  const pb = prio[b]!;
  if (pa !== pb) return pa < pb;
  if (withLocality) {
    const la = loc[a]!;
    const lb = loc[b]!;
    if (la !== lb) return la < lb;
  }
  return a < b;
}

function siftDown(order: Int32Array, prio: Uint32Array, loc: readonly string[], root: number, end: number, withLocality: boolean): void {
  for (;;) {
    let child = 2 * root + 1;
    if (child >= end) return;
    if (child + 1 < end && less(prio, loc, order[child]!, order[child + 1]!, withLocality)) child++;
    if (!less(prio, loc, order[root]!, order[child]!, withLocality)) return;
    const t = order[root]!;
    order[root] = order[child]!;
    order[child] = t;
    root = child;
  }
}

/** Sorts `order[0..n)` in place by (`prio`, `loc` when `withLocality`, index). @internal */
export function heapSortOrder(order: Int32Array, n: number, prio: Uint32Array, loc: readonly string[], withLocality: boolean): void {
  for (let start = (n >> 1) - 1; start >= 0; start--) siftDown(order, prio, loc, start, n, withLocality);
  for (let end = n - 1; end > 0; end--) {
    const t = order[0]!;
    order[0] = order[end]!;
    order[end] = t;
    siftDown(order, prio, loc, 0, end, withLocality);
  }
}
