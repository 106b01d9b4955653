/**
 * The aperture wired into routers: with a width and a coordinate written
 * into the LoadTable (as the fleet connection budget's round writes them),
 * a router picks only its process's slice of the ring (backends sorted by
 * id), the boundary backends at their overlap weights; a new coordinate
 * moves the slice at the next pick; without an aperture (or with one
 * process, or a coordinate not yet known, or the whole ring) the seeded
 * sequence is exactly the one without. Injected clock, no servers.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { LoadTable } from '../../src/load/load-table.js';
import { FleetConnectionBudget } from '../../src/budget/redis-connection-budget.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { manualClock } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';

/** Twelve backends whose ids sort in ring order b00 … b11, listed to the Balancer in another order (the ring is by id, not by listing). */
const IDS = Array.from({ length: 12 }, (_, i) => `b${String(i).padStart(2, '0')}`);
const LISTED = [...IDS].reverse();

function pool() {
  const clock = manualClock(1000);
  const balancer = new Balancer({ capacity: 16, clock: clock.now });
  onTestFinished(() => balancer.close());
  balancer.update(LISTED.map((id) => ({ id, address: `127.0.0.1:${7000 + IDS.indexOf(id)}` })));
  return { clock, balancer };
}

/** Writes what the budget's round writes: the width, the coordinate, then the epoch bump routers rebuild on. */
function coordinate(balancer: Balancer, width: number | undefined, rank?: number, processes?: number): void {
  const t = balancer.ownerTable;
  t.aperture.configure(width);
  if (rank !== undefined && processes !== undefined) t.aperture.setCoordinate(rank, processes);
  t.epochs.bumpHealth();
}

/** Picks per backend id over `n` picks (each lease released at once). */
function counts(router: Router, n: number): Map<string, number> {
  const out = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const lease = router.acquire();
    out.set(lease.id, (out.get(lease.id) ?? 0) + 1);
    lease.release('success');
  }
  return out;
}

function sequence(router: Router, n: number): string[] {
  return Array.from({ length: n }, () => {
    const lease = router.acquire();
    lease.release('success');
    return lease.id;
  });
}

describe('aperture in routers', () => {
  // 5 processes, 12 backends, width 0.34 → 2 process units (0.4 of the ring).
  // In ring units (12 × 5 = 60; a backend spans 5, a process unit 12), rank 1's
  // slice is [12, 36): b02 overlaps 3, b03–b06 5 each, b07 1 → shares of 24.
  const RANK1 = new Map([
    ['b02', 3],
    ['b03', 5],
    ['b04', 5],
    ['b05', 5],
    ['b06', 5],
    ['b07', 1],
  ]);
  // Rank 3's slice is [36, 60): b07 overlaps 4, b08–b11 5 each.
  const RANK3 = new Map([
    ['b07', 4],
    ['b08', 5],
    ['b09', 5],
    ['b10', 5],
    ['b11', 5],
  ]);

  it('a weighted router picks only its slice, the boundary backends at their overlap weights (48,000 picks, ±0.005)', () => {
    const { balancer } = pool();
    coordinate(balancer, 0.34, 1, 5);
    const router = balancer.router({ policy: 'weighted', seed: 11 });
    const n = 48_000;
    const got = counts(router, n);
    expect([...got.keys()].sort()).toEqual([...RANK1.keys()]);
    // A binomial share of 48,000 picks has sd ≤ 0.0023 (p = 5/24); ±0.005 is over 2 sd for
    // the largest and over 5 sd for b07 (p = 1/24, sd 0.0009), and it tells 3/24 from 5/24
    // (0.083 apart) and 1/24 from 0 or from an even sixth (0.125 apart).
    for (const [id, w] of RANK1) expect(Math.abs((got.get(id) ?? 0) / n - w / 24), id).toBeLessThan(0.005);
  });

  it('smooth weighted round robin follows the overlap weights exactly: 3, 5, 5, 5, 5, 1 picks in every 24', () => {
    const { balancer } = pool();
    coordinate(balancer, 0.34, 1, 5);
    const router = balancer.router({ policy: 'smooth-weighted', seed: 1 });
    const got = counts(router, 24 * 100);
    expect(new Map([...got].sort())).toEqual(new Map([...RANK1].map(([id, w]) => [id, w * 100])));
  });

  it.each(['p2c', 'least-loaded', 'round-robin', 'random'] as const)(
    '%s picks only inside the slice, and every backend of it',
    (policy) => {
      const { balancer } = pool();
      coordinate(balancer, 0.34, 3, 5);
      const router = balancer.router({ policy, seed: 4 });
      expect([...counts(router, 5000).keys()].sort()).toEqual([...RANK3.keys()]);
    },
  );

  it('a new coordinate moves the slice at the next pick', () => {
    const { balancer } = pool();
    coordinate(balancer, 0.34, 1, 5);
    const router = balancer.router({ policy: 'smooth-weighted', seed: 1 });
    expect([...counts(router, 240).keys()].sort()).toEqual([...RANK1.keys()]);
    balancer.ownerTable.aperture.setCoordinate(3, 5);
    balancer.ownerTable.epochs.bumpHealth();
    const got = counts(router, 2400);
    expect(new Map([...got].sort())).toEqual(new Map([...RANK3].map(([id, w]) => [id, w * 100])));
    // A process leaving (6 → 5 … here 5 → 2): rank 1 of 2 with width 0.34 takes one unit, half the ring: b06–b11.
    balancer.ownerTable.aperture.setCoordinate(1, 2);
    balancer.ownerTable.epochs.bumpHealth();
    expect([...counts(router, 600).keys()].sort()).toEqual(IDS.slice(6));
  });

  it('the slices of all 5 processes weigh every backend the same (the fleet law, through real routers)', () => {
    const total = new Map<string, number>();
    for (let rank = 0; rank < 5; rank++) {
      const { balancer } = pool();
      coordinate(balancer, 0.34, rank, 5);
      const router = balancer.router({ policy: 'smooth-weighted', seed: 1 });
      // 2400 picks = 100 cycles of the slice's 24 units: exact counts.
      for (const [id, c] of counts(router, 2400)) total.set(id, (total.get(id) ?? 0) + c);
    }
    // 5 × 2400 picks over 12 backends: 1000 each, exactly.
    expect(new Map([...total].sort())).toEqual(new Map(IDS.map((id) => [id, 1000])));
  });

  it.each(['weighted', 'p2c', 'smooth-weighted', 'least-loaded'] as const)(
    '%s: no aperture, a width with no coordinate yet, one process, or the whole ring give the same seeded sequence',
    (policy) => {
      const runs = [
        (b: Balancer) => void b,
        (b: Balancer) => coordinate(b, 0.34),
        (b: Balancer) => coordinate(b, 0.34, 0, 1),
        (b: Balancer) => coordinate(b, 1, 2, 5),
        (b: Balancer) => coordinate(b, 0.9, 4, 5),
      ].map((setup) => {
        const { balancer } = pool();
        setup(balancer);
        return sequence(balancer.router({ policy, seed: 99 }), 3000);
      });
      expect(new Set(runs[0]).size).toBe(12);
      for (const r of runs.slice(1)) expect(r).toEqual(runs[0]);
    },
  );

  it('turning the aperture off gives the whole ring back at the next pick', () => {
    const { balancer } = pool();
    coordinate(balancer, 0.34, 1, 5);
    const router = balancer.router({ policy: 'round-robin' });
    expect(counts(router, 60).size).toBe(6);
    coordinate(balancer, undefined);
    expect(counts(router, 120).size).toBe(12);
  });

  it('the coordinate word holds up to 65,535 processes (the sign bit is not a rank)', () => {
    const { balancer } = pool();
    const a = balancer.ownerTable.aperture;
    a.configure(0.5);
    expect(a.setCoordinate(65_534, 65_535)).toBe(true);
    expect(a.setCoordinate(65_534, 65_535)).toBe(false);
    expect(a.read()).toEqual({ width: 0.5, rank: 65_534, processes: 65_535 });
    // Another thread's attachment reads the same words.
    expect(LoadTable.attach(balancer.ownerTable.buffer).aperture.read()).toEqual({ width: 0.5, rank: 65_534, processes: 65_535 });
  });

  it('options.aperture is validated with a PoiseError naming the field', () => {
    const { balancer } = pool();
    const make = (aperture: unknown) => () =>
      new FleetConnectionBudget({ balancer, cluster: 'c', url: 'redis://127.0.0.1:1', limitPerBackend: 10, aperture } as never);
    for (const [aperture, field] of [
      [{ width: 0 }, 'options.aperture.width'],
      [{ width: 1.5 }, 'options.aperture.width'],
      [{ width: Number.NaN }, 'options.aperture.width'],
      [{ width: '0.3' }, 'options.aperture.width'],
      [{}, 'options.aperture.width'],
      [{ width: 0.3, size: 2 }, 'options.aperture.size'],
      [0.3, 'options.aperture'],
    ] as const) {
      const err = thrown(make(aperture));
      expect(err.code, JSON.stringify(aperture)).toBe('InvalidConfig');
      expect(err.field).toBe(field);
    }
    // A valid width constructs (it connects lazily: nothing is reached here).
    make({ width: 1 })();
  });
});
