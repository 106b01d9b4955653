/**
 * Pool task of bench/membership.ts (compiled to dist/bench/membership-worker.js).
 *
 * Shared cells (Int32Array): [0] stop flag, [1] next worker index,
 * [2] doorbell = the Balancer version the parent just applied,
 * [3 + i] the version worker i routes with.
 *
 * The worker sleeps on the doorbell, then yields to its event loop until its
 * Router's view reaches that version (membership messages arrive there),
 * routes one keyed Maglev pick with it — which includes the table rebuild —
 * and reports the version it routed with.
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { poolWorkerData, workerRouter } from '../src/runtime.js';

type WaitAsync = (ta: Int32Array, index: number, value: number, timeoutMs: number) => { async: boolean; value: Promise<string> | string };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;
const STOP = 0;
const NEXT_INDEX = 1;
const DOORBELL = 2;
const FIRST_WORKER = 3;

export default async function reporter(): Promise<number> {
  const { cells, gc } = poolWorkerData<{ cells: SharedArrayBuffer; gc?: SharedArrayBuffer }>();
  const view = new Int32Array(cells);
  // Atomics.add: two workers starting together still get distinct indices.
  const index = Atomics.add(view, NEXT_INDEX, 1);
  if (gc !== undefined) countMajorGcs(new Int32Array(gc), index);
  const router = workerRouter();
  let key = 0;
  let handled = 0;
  while (Atomics.load(view, STOP) === 0) {
    // Atomics.load pairs with the parent's Atomics.store of the doorbell.
    const target = Atomics.load(view, DOORBELL);
    if (target === handled) {
      // Sleep without blocking the event loop until the doorbell changes (or 100 ms, to re-check STOP).
      const w = waitAsync(view, DOORBELL, handled, 100);
      if (w.async) await w.value;
      continue;
    }
    while (router.refresh() < target && Atomics.load(view, STOP) === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      router.acquire({ key: key++ }).release('success');
    } catch {
      // Nothing routable (all draining): the version is still the one in force.
    }
    handled = target;
    // Atomics.store + notify: the parent waits on this cell with Atomics.waitAsync.
    Atomics.store(view, FIRST_WORKER + index, router.version);
    Atomics.notify(view, FIRST_WORKER + index);
  }
  return index;
}

/** Counts this thread's full (mark-compact) collections into `counts[index]` (bench/fleet.ts waits for each thread's first). */
export function countMajorGcs(counts: Int32Array, index: number): void {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if ((e as unknown as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR)
        Atomics.add(counts, index, 1);
    }
  }).observe({ entryTypes: ['gc'] });
}

/** Resolves once each of `threads` workers routes with `version` or later (their cells [3 + i] of `view`). */
export async function workersAt(view: Int32Array, threads: number, version: number): Promise<void> {
  for (let i = 0; i < threads; i++) {
    // Atomics.load pairs with the worker's Atomics.store; waitAsync wakes on its notify.
    for (let seen = Atomics.load(view, FIRST_WORKER + i); seen < version; seen = Atomics.load(view, FIRST_WORKER + i)) {
      const w = waitAsync(view, FIRST_WORKER + i, seen, 1000);
      if (w.async) await w.value;
    }
  }
}
