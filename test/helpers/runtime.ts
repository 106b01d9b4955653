import { onTestFinished } from 'vitest';
import type { BackendSpec } from '../../src/core/spec.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';

/** `n` backend specs `b0 .. b{n-1}` on loopback ports 7000 + i, each with `extra` merged in. */
export function specs(n: number, extra: Partial<BackendSpec> = {}): BackendSpec[] {
  return Array.from({ length: n }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}`, ...extra }));
}

/** A clock the test moves by hand: `now()` reads it, `advance(ms)` moves it forward. */
export function manualClock(start = 1000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

/** The connection (`c`) and request (`r`) counters of one LoadTable slot. */
export function counters(b: Balancer, slot: number): { c: number; r: number } {
  const s = b.table.stats(slot);
  return { c: s.connections, r: s.requests };
}

/** A round-robin Router over backends named `ids` (loopback ports 7000 + i); its Balancer closes when the test ends. */
export function routerOver(ids: readonly string[]): Router {
  const balancer = new Balancer({ capacity: 8 });
  onTestFinished(() => balancer.close());
  balancer.update(ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })));
  return balancer.router({ policy: 'round-robin' });
}

/** The share of each id in `n` picks of `router` (each lease released at once). */
export function pickShares(router: Router, n: number): Map<string, number> {
  const seen = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const lease = router.acquire();
    seen.set(lease.id, (seen.get(lease.id) ?? 0) + 1 / n);
    lease.release('success');
  }
  return seen;
}
