/**
 * Slow start's benefit to the client, simulated on an injected clock (the
 * issue's scenario, with simulated latencies, so nothing here is timed): a
 * backend that is 10× slow at its join, its coldness fading linearly to 1×
 * over 20 s, joins three warm backends (10 ms each) under 1,000 requests
 * per second. Every request takes a real lease from a real Router; its
 * latency is the chosen backend's at that instant, and the lease is held
 * for exactly that long (so `p2c:requests` sees the cold backend's requests
 * pile up, as it would). The law: over the 20 s window the client p99 with
 * slow start (window 20 s, aggression 1, floor 10 %) is below the p99
 * without, and the cold backend's share of picks follows the ramp.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import { manualClock } from '../helpers/runtime.js';

const WINDOW = 20_000;
const BASE_MS = 10;

/** The cold backend's latency `age` ms after its join: 10× fading linearly to 1× over the window. */
function coldLatency(age: number): number {
  return BASE_MS * (1 + 9 * Math.max(0, 1 - age / WINDOW));
}

interface Run {
  p99: number;
  /** The cold backend's share of picks in each quarter of the window. */
  quarters: number[];
}

function simulate(policy: 'weighted' | 'p2c:requests', slowStart: boolean, seed = 42): Run {
  const clock = manualClock(1000);
  const balancer = new Balancer({
    capacity: 8,
    clock: clock.now,
    ...(slowStart ? { slowStart: { windowMs: WINDOW, aggression: 1, minWeightPercent: 10 } } : {}),
  });
  onTestFinished(() => balancer.close());
  const warm = ['a', 'b', 'c'].map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` }));
  balancer.update(warm);
  const router = balancer.router({ policy, seed });
  balancer.update([...warm, { id: 'd', address: '127.0.0.1:7003' }]);
  // Leases by the simulated millisecond they complete at.
  const due = new Map<number, Lease[]>();
  const latencies: number[] = [];
  const quarterHits = [0, 0, 0, 0];
  for (let t = 0; t < WINDOW; t++) {
    clock.advance(1);
    for (const lease of due.get(t) ?? []) lease.release('success');
    due.delete(t);
    const lease = router.acquire();
    const ms = lease.id === 'd' ? Math.round(coldLatency(t)) : BASE_MS;
    if (lease.id === 'd') quarterHits[Math.floor((t * 4) / WINDOW)]!++;
    latencies.push(ms);
    const at = t + ms;
    const list = due.get(at);
    if (list === undefined) due.set(at, [lease]);
    else list.push(lease);
  }
  for (const list of due.values()) for (const lease of list) lease.release('success');
  router.close();
  latencies.sort((x, y) => x - y);
  return { p99: latencies[Math.ceil(latencies.length * 0.99) - 1]!, quarters: quarterHits.map((h) => h / (WINDOW / 4)) };
}

describe('slow start: the client p99 while a cold backend joins (simulated latencies, 20,000 requests)', () => {
  it('weighted: the p99 with slow start beats the p99 without, and the cold share follows f / (3 + f) per quarter', () => {
    const off = simulate('weighted', false);
    const on = simulate('weighted', true);
    // Seed 42: p99 96 ms without, 80 ms with.
    expect(on.p99).toBeLessThan(off.p99);
    // Without slow start the cold backend takes 1/4 throughout.
    for (const q of off.quarters) expect(Math.abs(q - 0.25)).toBeLessThan(0.03);
    // With it, quarter k's expected share is the mean of f / (3 + f) over the quarter (f = max(0.1, t / window)).
    for (let k = 0; k < 4; k++) {
      let sum = 0;
      for (let t = k * 5000; t < (k + 1) * 5000; t++) {
        const f = Math.max(0.1, t / WINDOW);
        sum += f / (3 + f);
      }
      // 5,000 picks per quarter: sd ≤ 0.0061; band ±0.025 (4 sd).
      expect(Math.abs(on.quarters[k]! - sum / 5000), `quarter ${k}`).toBeLessThan(0.025);
    }
  });

  it('p2c:requests (which already shuns a backend whose requests pile up): the p99 with slow start still beats the p99 without, for every seed tried', () => {
    for (const seed of [42, 7, 1234]) {
      const off = simulate('p2c:requests', false, seed);
      const on = simulate('p2c:requests', true, seed);
      // Seed 42: p99 82 ms without, 77 ms with; the cold share in the first quarter 5.0 % without, 3.8 % with.
      expect(on.p99, `seed ${seed}`).toBeLessThan(off.p99);
      expect(on.quarters[0]!, `seed ${seed}`).toBeLessThan(off.quarters[0]!);
    }
  });
});
