/**
 * A backend that leaves and comes back under the same id (a restarted pod)
 * is a new backend: cold (the PeakEWMA prior), ramped by slow start (again
 * after a flap mid-ramp), passive health, reports and database state reset,
 * while a spec change of a backend that never left keeps all of it. Leases
 * still open on the old occupant end on it without touching the new one.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import type { BackendSpec } from '../../src/core/spec.js';
import { DbRole } from '../../src/load/db-state.js';
import { EwmaSeries } from '../../src/load/ewma-region.js';
import { HealthFlag } from '../../src/load/load-table.js';
import { ReportFlag } from '../../src/load/backend-load.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import type { Router } from '../../src/runtime/router.js';
import { manualClock, pickShares } from '../helpers/runtime.js';

const WINDOW = 20_000;
const WARM: BackendSpec[] = ['a', 'b', 'c'].map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` }));
const D: BackendSpec = { id: 'd', address: '127.0.0.1:7003' };
/** A backend never seen before, joining at the instant of each rejoin: what "a new backend" reads. */
const E: BackendSpec = { id: 'e', address: '127.0.0.1:7004' };
const NOT_D = ['a', 'b', 'c', 'e'];

function pool() {
  const clock = manualClock(1000);
  const balancer = new Balancer({
    capacity: 8,
    clock: clock.now,
    initialMs: 50,
    slowStart: { windowMs: WINDOW, aggression: 1, minWeightPercent: 10 },
  });
  onTestFinished(() => balancer.close());
  balancer.update([...WARM, D]);
  const router = balancer.router({ policy: 'weighted', seed: 42 });
  return { clock, balancer, router };
}

/** The slot of live backend `id`. */
function slotOf(b: Balancer, id: string): number {
  const e = b.slotEntries().find((x) => x.id === id && !x.removed);
  if (e === undefined) throw new Error(`${id} is not live`);
  return e.slot;
}

/** A lease on `d` (every other backend excluded). */
function leaseOnD(router: Router): Lease {
  const lease = router.acquire({ exclude: NOT_D });
  expect(lease.id).toBe('d');
  return lease;
}

/** Gives `d` state in every region a rejoin must reset: samples, failures, an ejection, check, agent and ORCA words, a database role, a budget share. */
function dress(balancer: Balancer, router: Router, now: number): void {
  const t = balancer.ownerTable;
  for (let k = 0; k < 5; k++) leaseOnD(router).release('success', { latencyMs: 400, connectMs: 90 });
  const slot = slotOf(balancer, 'd');
  // An ejection resets the consecutive failures: the two after it stay.
  t.health.eject(slot, now + 30_000);
  t.health.addFailure(slot);
  t.health.addFailure(slot);
  t.health.setHealth(
    slot,
    HealthFlag.Unhealthy | HealthFlag.CheckDegraded | HealthFlag.AgentDown,
    HealthFlag.CheckDegraded | HealthFlag.AgentDown,
  );
  t.reported.setAgentWeight(slot, 250_000);
  t.reported.setOrcaWeight(slot, 2_000_000);
  t.reported.setAdmin(slot, ReportFlag.Drain);
  t.db.write(slot, DbRole.Primary, 0, 0x12, 0x3400);
  t.budget.setShare(slot, 5);
}

/** Every word of one row of the table below, read from `id`'s slot now. */
function read(balancer: Balancer, id: string): Record<string, unknown> {
  const t = balancer.ownerTable;
  const v = balancer.table;
  const slot = slotOf(balancer, id);
  return {
    'PeakEWMA latency (µs)': v.estimateUs(slot, EwmaSeries.Latency),
    'PeakEWMA connect time (µs)': v.estimateUs(slot, EwmaSeries.ConnectTime),
    'consecutive failures': t.health.failures(slot),
    'ejections (backoff exponent)': t.health.ejections(slot),
    'ejections (total)': t.health.ejectionsTotal(slot),
    'ejected for (ms)': v.ejectedForMs(slot),
    'check / agent flags': t.health.health(slot) & (HealthFlag.Unhealthy | HealthFlag.CheckDegraded | HealthFlag.AgentDown),
    'agent weight multiplier': v.reportedLoad(slot).agent,
    'ORCA weight multiplier': v.reportedLoad(slot).orca,
    'reported weight multiplier (combined)': v.reportedLoad(slot).multiplier,
    'agent drain': v.reportedLoad(slot).drain,
    'database role': t.db.role(slot),
    LSN: t.db.lsn(slot),
    'connection budget share': t.budget.share(slot),
    'slow-start ramp factor': v.rampFactor(slot),
  };
}

/** Each row: a region / word, its value right after a rejoin (a new backend's), and after a spec change of a backend that never left (kept). */
const ROWS: [word: string, afterRejoin: unknown, afterChange: unknown][] = [
  ['PeakEWMA latency (µs)', 50_000, 400_000],
  ['PeakEWMA connect time (µs)', 50_000, 90_000],
  ['consecutive failures', 0, 2],
  ['ejections (backoff exponent)', 0, 1],
  ['ejections (total)', 0, 1],
  ['ejected for (ms)', 0, 30_000],
  ['check / agent flags', 0, HealthFlag.CheckDegraded | HealthFlag.AgentDown],
  ['agent weight multiplier', 1, 0.25],
  ['ORCA weight multiplier', 1, 2],
  ['reported weight multiplier (combined)', 1, 0.5],
  ['agent drain', false, true],
  ['database role', DbRole.Unknown, DbRole.Primary],
  ['LSN', 0n, 0x12_0000_3400n],
  ['connection budget share', undefined, 5],
  ['slow-start ramp factor', 0.1, 1],
];

/** The ways `d` can come back: each ends with `d` and `e` live at the same instant. */
const REJOINS: [name: string, run: (p: ReturnType<typeof pool>) => void][] = [
  [
    'removed for 55 s, nothing left open (its own slot back, next generation)',
    ({ clock, balancer }) => {
      balancer.update(WARM);
      clock.advance(55_000);
      balancer.update([...WARM, D, E]);
    },
  ],
  [
    'a 50 ms flap',
    ({ clock, balancer }) => {
      balancer.update(WARM);
      clock.advance(50);
      balancer.update([...WARM, D, E]);
    },
  ],
  [
    'a 50 ms flap with a lease still open on the old occupant (another slot)',
    ({ clock, balancer, router }) => {
      const old = leaseOnD(router);
      const before = slotOf(balancer, 'd');
      balancer.update(WARM);
      clock.advance(50);
      balancer.update([...WARM, D, E]);
      expect(slotOf(balancer, 'd')).not.toBe(before);
      old.release('success');
    },
  ],
  [
    'a rejoin with a changed spec',
    ({ clock, balancer }) => {
      balancer.update(WARM);
      clock.advance(1000);
      balancer.update([...WARM, { ...D, weight: 2, locality: 'z2' }, E]);
    },
  ],
];

/** Spec changes of a backend that never left. */
const CHANGES: [name: string, spec: BackendSpec][] = [
  ['weight', { ...D, weight: 3 }],
  ['address', { ...D, address: '127.0.0.1:7999' }],
  ['locality', { ...D, locality: 'z2' }],
  ['priority', { ...D, priority: 1 }],
  ['status degraded', { ...D, status: 'degraded' }],
];

describe('a backend that rejoins is a new backend; a changed one keeps its state', () => {
  it.each(REJOINS)('rejoin (%s): every row reads as a new backend', (_name, run) => {
    const p = pool();
    p.clock.advance(30_000);
    dress(p.balancer, p.router, p.clock.now());
    run(p);
    const d = read(p.balancer, 'd');
    const e = read(p.balancer, 'e');
    for (const [word, afterRejoin] of ROWS) {
      expect(d[word], word).toEqual(afterRejoin);
      expect(d[word], `${word}: as a never-seen backend`).toEqual(e[word]);
    }
  });

  it.each(CHANGES)('change of %s: every row keeps its value', (_name, spec) => {
    const p = pool();
    p.clock.advance(30_000);
    dress(p.balancer, p.router, p.clock.now());
    const slot = slotOf(p.balancer, 'd');
    p.balancer.update([...WARM, spec]);
    expect(slotOf(p.balancer, 'd')).toBe(slot);
    const d = read(p.balancer, 'd');
    for (const [word, , afterChange] of ROWS) expect(d[word], word).toEqual(afterChange);
  });

  it('slow start after a rejoin: d takes f / (3 + f) of the picks, the ramp restarting at each return (weighted, 20,000 picks per instant)', () => {
    const { clock, balancer, router } = pool();
    // Everyone joined together (nobody ramps); then d leaves for 55 s and comes back.
    clock.advance(30_000);
    balancer.update(WARM);
    clock.advance(55_000);
    balancer.update([...WARM, D]);
    // d's share is f / (3 + f) with f = max(0.1, elapsed / window). A binomial share of
    // 20,000 picks has sd <= 0.0035; the band ±0.015 is over 4 sd and less than half the
    // distance between any two expected shares below (0.032, 0.077, 0.143).
    const expectShare = (f: number, at: string) => {
      const got = pickShares(router, 20_000).get('d') ?? 0;
      expect(Math.abs(got - f / (3 + f)), `${at}: share ${got}, factor ${f}`).toBeLessThan(0.015);
    };
    expectShare(0.1, 'at the rejoin');
    clock.advance(10_000);
    expectShare(0.5, 'half the window after the rejoin');
    // A 50 ms flap mid-ramp starts the ramp again.
    balancer.update(WARM);
    clock.advance(50);
    balancer.update([...WARM, D]);
    expectShare(0.1, 'right after a 50 ms flap');
    clock.advance(5000);
    expectShare(0.25, '5 s after the flap');
    clock.advance(15_000);
    expectShare(1, 'a window after the flap');
  });

  it('leases open on the old occupant end on it: the new occupant’s counts, samples and failures stay its own (300 flaps)', () => {
    const { clock, balancer, router } = pool();
    const t = balancer.ownerTable;
    router.acquire().release('success');
    for (let round = 0; round < 300; round++) {
      // Some leases on d, of both kinds, held across its removal and return.
      const open: Lease[] = [];
      for (let k = 0; k < round % 4; k++) open.push(leaseOnD(router));
      const other = round % 3 === 0 ? router.acquire({ exclude: NOT_D, kind: 'connection' }) : undefined;
      const oldSlot = slotOf(balancer, 'd');
      balancer.update(WARM);
      clock.advance(50);
      balancer.update([...WARM, D]);
      const slot = slotOf(balancer, 'd');
      const held = open.length + (other === undefined ? 0 : 1);
      // With nothing open d takes its own slot back; otherwise another, leaving the tombstone to its leases.
      if (held === 0) expect(slot).toBe(oldSlot);
      else expect(slot).not.toBe(oldSlot);
      expect(t.connections(slot) + t.requests(slot)).toBe(0);
      // The old leases end with failures and slow samples: all of it lands on the tombstone.
      for (const l of open) l.release('failure', { latencyMs: 5000 });
      other?.release('failure', { latencyMs: 5000 });
      expect(t.connections(oldSlot) + t.requests(oldSlot)).toBe(0);
      expect(t.health.failures(slot)).toBe(0);
      expect(balancer.table.ejectedForMs(slot)).toBe(0);
      expect(balancer.table.estimateUs(slot, EwmaSeries.Latency)).toBe(50_000);
      // A lease on the new occupant counts on its slot only.
      const fresh = leaseOnD(router);
      expect(t.connections(slot) + t.requests(slot)).toBe(1);
      fresh.release('success');
      expect(t.connections(slot) + t.requests(slot)).toBe(0);
    }
    // The tombstones left behind were all reused: d and the warm three hold four slots, the rest is free.
    expect(balancer.slotEntries().filter((e) => !e.removed)).toHaveLength(4);
  });
});
