// AdmissionGate in one thread: the ceilings against the table's global load,
// FIFO per band with the most important band served first, and every way a
// request can be refused, with the counters exact afterwards.
import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AdmissionGate } from '../../src/admission/admission.js';
import type { PoiseError } from '../../src/core/errors.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import type { Router } from '../../src/runtime/router.js';
import { specs } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { rejection } from '../helpers/thrown.js';

const silent = createLogger({ level: 'silent' });
const open: Balancer[] = [];
afterEach(() => {
  for (const b of open.splice(0)) b.close();
});

/** A balancer of `n` backends with `maxInflight` each, a holder router (the "other traffic") and a gated router. */
function pool(n: number, maxInflight: number): { b: Balancer; holder: Router; router: Router } {
  const b = new Balancer({ capacity: 64, logger: silent });
  open.push(b);
  b.update(specs(n, { maxInflight }));
  return {
    b,
    holder: b.router({ policy: 'round-robin', leaseKind: 'request' }),
    router: b.router({ policy: 'round-robin', leaseKind: 'request' }),
  };
}

function hold(router: Router, n: number): Lease[] {
  return Array.from({ length: n }, () => router.acquire());
}

/** Total request leases in the table. */
function inFlight(b: Balancer, slots: number): number {
  let n = 0;
  for (let s = 0; s < slots; s++) n += b.table.stats(s).requests;
  return n;
}

describe('AdmissionGate: ceilings on the pool saturation', () => {
  it('capacity is Σ maxInflight of the eligible backends; a band is admitted while load / capacity <= its ceiling', async () => {
    // 4 × 5 = 20; ceilings 1 / 0.75 / 0.5 → admit while load < 20 / 16 / 11.
    const { holder, router } = pool(4, 5);
    const gate = new AdmissionGate(router, { bands: [1, 2, 3], minCeiling: 0.5 });
    expect(gate.ceilings()).toEqual([
      { band: 3, ceiling: 1 },
      { band: 2, ceiling: 0.75 },
      { band: 1, ceiling: 0.5 },
    ]);
    const held = hold(holder, 10);
    const leases: Lease[] = [];
    leases.push(await router.acquireAsync({ band: 1 })); // load 10 → 11 (10 / 20 = 0.5 <= 0.5)
    const low = router.acquireAsync({ band: 1 }); // 11 / 20 > 0.5: waits
    for (let i = 0; i < 5; i++) leases.push(await router.acquireAsync({ band: 2 })); // 11 .. 15 <= 0.75
    const mid = router.acquireAsync({ band: 2 }); // 16 / 20 > 0.75: waits
    for (let i = 0; i < 4; i++) leases.push(await router.acquireAsync({ band: 3 })); // 16 .. 19 < 20
    const top = router.acquireAsync({ band: 3 }); // full: waits
    // Queued synchronously: the stats already show every waiter.
    const s = gate.admissionStats();
    expect(s).toMatchObject({ capacity: 20, load: 20, saturation: 1, waiting: 3 });
    expect(s.bands.map((x) => [x.band, x.queued, x.admitted])).toEqual([
      [3, 1, 4],
      [2, 1, 5],
      [1, 1, 1],
    ]);
    // Free 10 at once: the queues drain most important first (top, mid, then low at load 12 > 11 stays).
    for (const l of held) l.release('success');
    const got = await Promise.all([top, mid]);
    // The dispatch that admitted them stopped at the low band's limit.
    expect(gate.admissionStats().bands.map((x) => x.queued)).toEqual([0, 0, 1]);
    for (const l of [...got, ...leases.splice(0, 3)]) l.release('success');
    const lowLease = await low; // load 9 after those releases
    for (const l of [...leases, lowLease]) l.release('success');
    expect(router.openLeases).toBe(0);
    expect(gate.admissionStats()).toMatchObject({ load: 0, waiting: 0 });
  });

  it('every band flows on an idle pool, even a ceiling of 0; a full pool admits no band', async () => {
    const { holder, router } = pool(1, 1);
    const gate = new AdmissionGate(router, { bands: [0, 1], minCeiling: 0 });
    const first = await router.acquireAsync({ band: 0 });
    expect(gate.saturation()).toBe(1);
    const top = router.acquireAsync({ band: 1 });
    expect(gate.admissionStats().bands[0]!.queued).toBe(1);
    first.release('success');
    (await top).release('success');
    expect(holder.openLeases + router.openLeases).toBe(0);
  });

  it('no eligible capacity reads as saturation 1: requests wait, then time out; a backend coming back drains them', async () => {
    const { b, router } = pool(2, 3);
    const timers = new ManualTimers();
    const gate = new AdmissionGate(router, { bands: [1], minCeiling: 0, timers });
    b.update(specs(2, { maxInflight: 3, status: 'draining' }));
    expect(gate.saturation()).toBe(1);
    const timedOut = rejection(router.acquireAsync({ timeoutMs: 30 }));
    await timers.advance(30);
    expect((await timedOut).code).toBe('QueueTimeout');
    const waiting = router.acquireAsync({ timeoutMs: 5000 });
    b.update(specs(2, { maxInflight: 3 }));
    const lease = await waiting; // noticed by the poll: the epoch moved, capacity 6
    expect(gate.admissionStats()).toMatchObject({ capacity: 6, load: 1 });
    lease.release('success');
  });

  it('an explicit capacity replaces Σ maxInflight (backends may be unlimited)', async () => {
    const { holder, router } = pool(2, 0);
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0.5, capacity: 4 });
    const held = hold(holder, 3); // 3 / 4 > 0.5
    const low = router.acquireAsync({ band: 0 });
    const high = await router.acquireAsync({ band: 1 }); // 3 < 4
    expect(gate.admissionStats()).toMatchObject({ capacity: 4, load: 4, waiting: 1 });
    for (const l of held) l.release('success');
    high.release('success');
    (await low).release('success');
  });

  it('unlimited backends without an explicit capacity never hold back (capacity Infinity, saturation 0)', async () => {
    const { holder, router } = pool(2, 0);
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0 });
    const held = hold(holder, 50);
    const l = await router.acquireAsync({ band: 0 });
    expect(gate.admissionStats()).toMatchObject({ capacity: Number.POSITIVE_INFINITY, saturation: 0 });
    for (const x of [...held, l]) x.release('success');
  });

  it('a custom saturation function replaces load / capacity', async () => {
    const { router } = pool(2, 0);
    let s = 0.6;
    const timers = new ManualTimers();
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0.5, saturation: () => s, timers });
    const high = await router.acquireAsync({ band: 1 });
    const low = router.acquireAsync({ band: 0 });
    expect(gate.admissionStats().bands[1]!.queued).toBe(1);
    s = 0.5;
    (await low).release('success');
    s = Number.NaN; // reads as 1: even the top band waits
    const top = rejection(router.acquireAsync({ band: 1, timeoutMs: 20 }));
    await timers.advance(20);
    expect((await top).code).toBe('QueueTimeout');
    high.release('success');
  });

  it('the integer limits equal the rule load / capacity <= ceiling and load < capacity, for any capacity and ceilings', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 40 }), fc.double({ min: 0, max: 0.99, noNaN: true }), async (cap, minCeiling) => {
        const b = new Balancer({ capacity: 64, logger: silent });
        try {
          b.update([{ id: 'x', address: '127.0.0.1:7000', maxInflight: cap }]);
          const holder = b.router({ policy: 'round-robin', leaseKind: 'request' });
          const router = b.router({ policy: 'round-robin', leaseKind: 'request' });
          const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling });
          const ceiling = gate.ceilings()[1]!.ceiling;
          const probes: Promise<Lease>[] = [];
          const held: Lease[] = [];
          // Each step adds one lease (an admitted probe, else a holder's) until the pool is full.
          for (let load = 0; load < cap; load = gate.admissionStats().load) {
            const want = load / cap <= ceiling + 1e-9;
            const before = router.openLeases;
            probes.push(router.acquireAsync({ band: 0, timeoutMs: 60_000 }));
            const admitted = router.openLeases - before === 1;
            expect(admitted).toBe(want);
            if (!admitted) held.push(holder.acquire());
          }
          gate.close();
          for (const r of await Promise.allSettled(probes)) if (r.status === 'fulfilled') r.value.release('success');
          for (const l of held) l.release('success');
          expect(router.openLeases + holder.openLeases).toBe(0);
        } finally {
          b.close();
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe('AdmissionGate: queues', () => {
  it('FIFO within a band; when capacity frees, the highest waiting band goes first and an empty band blocks no lower one', async () => {
    const { holder, router } = pool(2, 5); // capacity 10; ceilings 1 / 0.75 / 0.5 → limits 10 / 8 / 6
    const gate = new AdmissionGate(router, { bands: [3, 2, 1], minCeiling: 0.5 });
    const held = hold(holder, 10);
    const order: string[] = [];
    const waits = ['L1', 'M1', 'L2', 'M2', 'L3'].map((name) =>
      router.acquireAsync({ band: name[0] === 'L' ? 1 : 2 }).then((l) => {
        order.push(name);
        return l;
      }),
    );
    // Down to load 3: band 3 is empty, band 2 takes M1, M2 (→ 5), band 1 takes L1 (→ 6) and stops at its limit.
    // The releases are another router's: the table's wake-up reaches the gate.
    for (const l of held.splice(0, 7)) l.release('success');
    await until(() => order.length === 3, 'three admissions');
    expect(order).toEqual(['M1', 'M2', 'L1']);
    for (const l of held.splice(0)) l.release('success'); // load 3: L2, L3
    const leases = await Promise.all(waits);
    expect(order).toEqual(['M1', 'M2', 'L1', 'L2', 'L3']);
    for (const l of leases) l.release('success');
    expect(gate.admissionStats().bands.map((b) => b.admittedAfterWait)).toEqual([0, 2, 3]);
    expect(router.openLeases + holder.openLeases).toBe(0);
  });

  it('a new arrival does not pass a waiter of its own or a more important band', async () => {
    const { holder, router } = pool(1, 4); // limits 4 / 3 (minCeiling 0.5)
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0.5 });
    const held = hold(holder, 4);
    const order: string[] = [];
    const first = router.acquireAsync({ band: 0 }).then((l) => (order.push('first'), l));
    // Load 1 by now: the fast path alone would admit the next arrival, but 'first' waits and goes first (→ 2, → 3).
    for (const l of held.slice(0, 3)) l.release('success');
    const second = router.acquireAsync({ band: 0 }).then((l) => (order.push('second'), l));
    const leases = await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second']);
    for (const l of [...leases, held[3]!]) l.release('success');
    expect(gate.admissionStats().waiting).toBe(0);
  });

  it('QueueFull at maxQueue waiters of a band, other bands unaffected; counters exact', async () => {
    const { b, holder, router } = pool(1, 2);
    // Capacity 2, ceilings 1 / 0.5: band 0 enters while load <= 1.
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0.5, maxQueue: 2 });
    const held = hold(holder, 2);
    const queued = [0, 0].map(() => router.acquireAsync({ band: 0 }));
    const err = await rejection(router.acquireAsync({ band: 0 }));
    expect(err.code).toBe('QueueFull');
    expect(err.message).toContain('maxQueue');
    const top = router.acquireAsync({ band: 1 }); // its own queue has room
    expect(gate.admissionStats().bands.map((x) => [x.queued, x.rejected.QueueFull])).toEqual([
      [1, 0],
      [2, 1],
    ]);
    for (const l of held) l.release('success');
    // Capacity 2: the top band first, then the oldest low waiter; the last low one enters when a lease returns.
    const topLease = await top;
    const low1 = await queued[0]!;
    expect(gate.admissionStats().bands.map((x) => x.queued)).toEqual([0, 1]);
    topLease.release('success');
    const low2 = await queued[1]!;
    low1.release('success');
    low2.release('success');
    expect(inFlight(b, 1)).toBe(0);
    expect(gate.admissionStats().bands.map((x) => [x.admitted, x.rejected.QueueFull])).toEqual([
      [1, 0],
      [2, 1],
    ]);
  });
});

describe('AdmissionGate: refusals, each with its code, and nothing left behind', () => {
  it('QueueTimeout after the per-request timeout (the gate default otherwise), counted per band; no lease taken', async () => {
    const { b, holder, router } = pool(1, 1);
    const timers = new ManualTimers();
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0, timeoutMs: 40, timers });
    const held = hold(holder, 1);
    const settled: string[] = [];
    const own = rejection(router.acquireAsync({ band: 0, timeoutMs: 10 })).then((e) => (settled.push('own'), e));
    const dflt = rejection(router.acquireAsync({ band: 1 })).then((e) => (settled.push('default'), e));
    // Each times out exactly at its deadline on the gate's clock, not a millisecond before.
    await timers.advance(9);
    expect(settled).toEqual([]);
    await timers.advance(1);
    expect(settled).toEqual(['own']);
    await timers.advance(29);
    expect(settled).toEqual(['own']);
    await timers.advance(1);
    expect(settled).toEqual(['own', 'default']);
    expect([(await own).code, (await dflt).code]).toEqual(['QueueTimeout', 'QueueTimeout']);
    expect((await dflt).message).toContain('40 ms');
    const s = gate.admissionStats();
    expect(s.bands.map((x) => x.rejected.QueueTimeout)).toEqual([1, 1]);
    expect(s.waiting).toBe(0);
    held[0]!.release('success');
    expect(inFlight(b, 1)).toBe(0);
    expect(router.openLeases).toBe(0);
  });

  it('Cancelled when the signal aborts while queued (cause = the reason), or was aborted before', async () => {
    const { b, holder, router } = pool(1, 1);
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0 });
    const held = hold(holder, 1);
    const ac = new AbortController();
    const p = router.acquireAsync({ band: 0, signal: ac.signal });
    expect(gate.admissionStats().waiting).toBe(1);
    ac.abort(new Error('client went away'));
    const err = await rejection(p);
    expect(err.code).toBe('Cancelled');
    expect((err.cause as Error).message).toBe('client went away');
    const pre = await rejection(router.acquireAsync({ signal: AbortSignal.abort() }));
    expect(pre.code).toBe('Cancelled');
    expect(gate.admissionStats().bands.map((x) => x.rejected.Cancelled)).toEqual([1, 1]);
    held[0]!.release('success');
    // The aborted waiter is gone: the freed unit is not handed to it.
    expect(inFlight(b, 1)).toBe(0);
    expect(gate.admissionStats().waiting).toBe(0);
  });

  it('close() rejects every waiter with Closed (none left hanging) and refuses new requests; router.close() does the same', async () => {
    for (const via of ['gate', 'router'] as const) {
      const { b, holder, router } = pool(1, 1);
      const gate = new AdmissionGate(router, { bands: [2, 1, 0], minCeiling: 0 });
      const held = hold(holder, 1);
      const waiters = [0, 1, 2, 0, 1, 2].map((p) => rejection(router.acquireAsync({ band: p })));
      expect(gate.admissionStats().waiting).toBe(6);
      if (via === 'gate') gate.close();
      else router.close();
      expect((await Promise.all(waiters)).map((e) => e.code)).toEqual(Array(6).fill('Closed'));
      expect((await rejection(gate.acquireAsync())).code).toBe('Closed');
      expect(gate.admissionStats().bands.map((x) => x.rejected.Closed)).toEqual([via === 'gate' ? 3 : 3, 2, 2]);
      held[0]!.release('success');
      expect(inFlight(b, 1)).toBe(0);
    }
  });

  it('an admission whose acquire then finds every backend full (a unit lost to another thread) waits instead of failing', async () => {
    const { holder, router } = pool(1, 1);
    // A saturation that reads 0 while the one unit is taken: the stale figure a racing thread would see.
    const gate = new AdmissionGate(router, { bands: [1], minCeiling: 0, saturation: () => 0 });
    const held = hold(holder, 1);
    const p = router.acquireAsync({ timeoutMs: 5000 });
    expect(gate.admissionStats().waiting).toBe(1);
    held[0]!.release('success'); // freed by a router without the gate: the table's wake-up reaches the gate
    const lease = await p;
    expect(gate.admissionStats().bands[0]).toMatchObject({ admitted: 1, admittedAfterWait: 1, rejected: { NoEligibleCandidates: 0 } });
    lease.release('success');
  });

  it('a waiter whose acquire cannot succeed for its own reasons (every backend excluded) rejects with NoEligibleCandidates', async () => {
    const { holder, router } = pool(2, 1);
    const gate = new AdmissionGate(router, { bands: [1], minCeiling: 0 });
    const err = await rejection(router.acquireAsync({ exclude: ['b0', 'b1'] }));
    expect(err.code).toBe('NoEligibleCandidates');
    const held = hold(holder, 2);
    const queued = router.acquireAsync({ exclude: ['b0', 'b1'] });
    expect(gate.admissionStats().waiting).toBe(1);
    held[0]!.release('success');
    expect((await rejection(queued)).code).toBe('NoEligibleCandidates');
    expect(gate.admissionStats().bands[0]!.rejected.NoEligibleCandidates).toBe(2);
    held[1]!.release('success');
  });

  it('admitted + rejected = offered per band over a random schedule of arrivals, releases, aborts and timeouts', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            band: fc.integer({ min: 0, max: 2 }),
            abortAfter: fc.option(fc.integer({ min: 0, max: 6 })),
            timeout: fc.integer({ min: 1, max: 30 }),
            holdFor: fc.integer({ min: 0, max: 8 }),
          }),
          { maxLength: 40 },
        ),
        async (plan) => {
          const { b, router } = pool(2, 2);
          const gate = new AdmissionGate(router, { bands: [2, 1, 0], minCeiling: 0.3, maxQueue: 4 });
          const outcomes = await Promise.all(
            plan.map(async (r) => {
              const ac = new AbortController();
              if (r.abortAfter !== null) setTimeout(() => ac.abort(), r.abortAfter);
              try {
                const lease = await router.acquireAsync({ band: r.band, signal: ac.signal, timeoutMs: r.timeout });
                await new Promise((res) => setTimeout(res, r.holdFor));
                lease.release('success');
                return 'admitted';
              } catch (err) {
                return (err as PoiseError).code;
              }
            }),
          );
          const s = gate.admissionStats();
          for (const band of s.bands) {
            const offered = plan.filter((r) => r.band === band.band).length;
            const rejected = Object.values(band.rejected).reduce((x, y) => x + y, 0);
            expect(band.admitted + rejected).toBe(offered);
          }
          expect(outcomes.filter((o) => o === 'admitted').length).toBe(s.bands.reduce((x, y) => x + y.admitted, 0));
          expect(new Set(outcomes.filter((o) => o !== 'admitted'))).toSatisfy((codes: Set<string>) =>
            [...codes].every((c) => ['QueueFull', 'QueueTimeout', 'Cancelled'].includes(c)),
          );
          expect(s.waiting).toBe(0);
          expect(inFlight(b, 2)).toBe(0);
          expect(router.openLeases).toBe(0);
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('AdmissionGate: statistics', () => {
  it('queue length and oldest wait per band on the injected clock; admitted and rejected by reason; the pool figures', async () => {
    const { holder, router } = pool(1, 2);
    let now = 1000;
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0, clock: () => now });
    const held = hold(holder, 2);
    const a = router.acquireAsync({ band: 0 });
    now = 1250;
    const b2 = router.acquireAsync({ band: 0 });
    const c = router.acquireAsync({ band: 1 });
    now = 1400;
    expect(gate.admissionStats()).toEqual({
      saturation: 1,
      capacity: 2,
      load: 2,
      waiting: 3,
      bands: [
        {
          band: 1,
          ceiling: 1,
          queued: 1,
          oldestWaitMs: 150,
          admitted: 0,
          admittedAfterWait: 0,
          rejected: { QueueFull: 0, QueueTimeout: 0, Cancelled: 0, NoEligibleCandidates: 0, Closed: 0, Other: 0 },
        },
        {
          band: 0,
          ceiling: 0,
          queued: 2,
          oldestWaitMs: 400,
          admitted: 0,
          admittedAfterWait: 0,
          rejected: { QueueFull: 0, QueueTimeout: 0, Cancelled: 0, NoEligibleCandidates: 0, Closed: 0, Other: 0 },
        },
      ],
    });
    held[0]!.release('success');
    const lc = await c; // the top band first
    expect(gate.admissionStats().bands.map((x) => [x.queued, x.oldestWaitMs, x.admitted])).toEqual([
      [0, 0, 1],
      [2, 400, 0],
    ]);
    gate.close();
    expect((await rejection(a)).code).toBe('Closed');
    expect((await rejection(b2)).code).toBe('Closed');
    lc.release('success');
    held[1]!.release('success');
    expect(gate.admissionStats()).toMatchObject({ saturation: 0, load: 0, waiting: 0 });
  });
});

describe('AdmissionGate: options', () => {
  it('names every bad option at once', () => {
    const { router } = pool(1, 1);
    const err = thrown(
      () =>
        new AdmissionGate(router, {
          bands: [1, 1],
          minCeiling: 2,
          capacity: 0,
          kind: 'bytes' as never,
          maxQueue: -1,
          timeoutMs: 0,
          pollMs: Number.NaN,
          defaultBand: 7,
        }),
    );
    expect(err.code).toBe('InvalidConfig');
    for (const f of [
      'options.bands',
      'options.capacity',
      'options.kind',
      'options.maxQueue',
      'options.timeoutMs',
      'options.pollMs',
      'options.defaultBand',
    ]) {
      expect(err.message).toContain(f);
    }
    expect(err.message).toMatch(/^8 bad options/);
  });

  it('a timers option that is not a TimerSource names the member it lacks', () => {
    const { router } = pool(1, 1);
    expect(thrown(() => new AdmissionGate(router, { bands: [1], minCeiling: 0, timers: 5 as never })).message).toBe(
      'options.timers: must be a TimerSource ({ now, setTimeout, clearTimeout }), got 5',
    );
    expect(
      thrown(() => new AdmissionGate(router, { bands: [1], minCeiling: 0, timers: { now: () => 0, setTimeout: () => 0 } as never }))
        .message,
    ).toMatch(/^options\.timers: must have a function clearTimeout/);
  });

  it('explicit ceilings: one per band, in [0, 1], never higher for a less important band, not mixed with holdback options', () => {
    const { router } = pool(1, 1);
    expect(thrown(() => new AdmissionGate(router, { bands: [1, 0], ceilings: [0.5] })).message).toContain('options.ceilings');
    expect(thrown(() => new AdmissionGate(router, { bands: [1, 0], ceilings: [0.5, 1.5] })).message).toContain('options.ceilings[1]');
    expect(thrown(() => new AdmissionGate(router, { bands: [1, 0], ceilings: [0.5, 0.9] })).message).toContain('higher ceiling');
    expect(thrown(() => new AdmissionGate(router, { bands: [1, 0], ceilings: [1, 1], minCeiling: 0 })).message).toContain('excludes');
    expect(thrown(() => new AdmissionGate(router, { bands: [1], minCeiling: 0, capacity: 3, saturation: () => 0 })).message).toContain(
      'options.saturation',
    );
    const gate = new AdmissionGate(router, { bands: [0, 1], ceilings: [0.4, 0.8] });
    expect(gate.ceilings()).toEqual([
      { band: 1, ceiling: 0.8 },
      { band: 0, ceiling: 0.4 },
    ]);
    expect(thrown(() => new AdmissionGate(router, { bands: [1], minCeiling: 0 })).message).toContain('already has an admission gate');
  });

  it('acquireAsync refuses an unknown band, an unknown option, a bad timeout; a router without a gate refuses a band', async () => {
    const { b, router } = pool(1, 1);
    const bare = b.router();
    expect((await rejection(bare.acquireAsync({ band: 1 }))).message).toBe(
      'acquireAsync(options).band: needs an AdmissionGate attached to this router, got 1',
    );
    expect((await rejection(bare.acquireAsync({ timeoutMs: 0 }))).message).toContain('acquireAsync(options).timeoutMs');
    expect((await rejection(bare.acquireAsync({ signal: AbortSignal.abort() }))).code).toBe('Cancelled');
    const lease = await bare.acquireAsync({ priority: 0 });
    lease.release('success');
    new AdmissionGate(router, { bands: [1, 0], minCeiling: 0 });
    expect((await rejection(router.acquireAsync({ band: 5 }))).message).toBe(
      "acquireAsync(options).band: must be one of the gate's bands (1, 0), got 5",
    );
    expect((await rejection(router.acquireAsync({ timeotMs: 5 } as never))).message).toContain('acquireAsync(options).timeotMs');
    expect((await rejection(router.acquireAsync({ timeoutMs: -1 }))).message).toContain('acquireAsync(options).timeoutMs');
    expect((await rejection(router.acquireAsync({ priority: -1 }))).message).toBe(
      'acquireAsync(options).priority: must be an integer >= 0, got -1',
    );
  });

  it('the pre-1.0 priority: { admission, failover } is refused, with and without a gate, naming band as its replacement', async () => {
    const { b, router } = pool(2, 4);
    const bare = b.router();
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0 });
    for (const r of [bare, router]) {
      for (const old of [{ admission: 1 }, { failover: 0 }, { admission: 0, failover: 0 }]) {
        const err = await rejection(r.acquireAsync({ priority: old as never }));
        expect(err.code).toBe('InvalidConfig');
        expect(err.field).toBe('acquireAsync(options).priority');
        expect(err.message).toMatch(
          /^acquireAsync\(options\)\.priority: is the failover tier, an integer >= 0; the admission band is its own option now: acquireAsync\(\{ band, priority \}\), got /,
        );
      }
    }
    // Nothing was admitted, queued or counted as a rejection of a band, and no lease was taken.
    expect(gate.admissionStats().bands.map((x) => [x.admitted, x.queued, x.rejected.Other])).toEqual([
      [0, 0, 0],
      [0, 0, 0],
    ]);
    expect(inFlight(b, 2)).toBe(0);
  });

  it('with a gate attached, priority alone is the failover tier (in the default band); band and priority combine', async () => {
    const b = new Balancer({ capacity: 64, logger: silent });
    open.push(b);
    // Tier 0: p0-0, p0-1; tier 1: p1-0, p1-1. Every backend ready, so a plain acquire would use tier 0.
    b.update([
      ...specs(2, { maxInflight: 8 }).map((x, i) => ({ ...x, id: `p0-${i}` })),
      ...specs(2, { maxInflight: 8 }).map((x, i) => ({ ...x, id: `p1-${i}`, address: `127.0.0.1:${7100 + i}`, priority: 1 })),
    ]);
    const router = b.router({ policy: 'round-robin', leaseKind: 'request' });
    const gate = new AdmissionGate(router, { bands: [10, 1], ceilings: [1, 1] }); // no holdback: only which band counts
    const leases: Lease[] = [];
    for (let i = 0; i < 4; i++) leases.push(await router.acquireAsync({ priority: 1 })); // the default band: 10
    for (let i = 0; i < 2; i++) leases.push(await router.acquireAsync({ band: 1, priority: 0 }));
    for (let i = 0; i < 2; i++) leases.push(await router.acquireAsync({ band: 1, priority: 1 }));
    expect(leases.map((l) => l.spec.priority)).toEqual([1, 1, 1, 1, 0, 0, 1, 1]);
    expect(new Set(leases.slice(0, 4).map((l) => l.id))).toEqual(new Set(['p1-0', 'p1-1']));
    // The number was never read as a band: band 10 (the default) took the four priority-only requests, band 1 the rest.
    expect(gate.admissionStats().bands.map((x) => [x.band, x.admitted])).toEqual([
      [10, 4],
      [1, 4],
    ]);
    for (const l of leases) l.release('success');
  });
});

describe('AdmissionGate.admitNow: the at-once half, for a caller that cannot wait (a grpc-js pick)', () => {
  it('a lease when admissible now, undefined when the band would wait (nothing queued, no older waiter passed), the same refusals as acquireAsync', async () => {
    // 2 × 2 = 4; band 1's ceiling 0.5 → admitted while load < 3.
    const { holder, router } = pool(2, 2);
    const gate = new AdmissionGate(router, { bands: [10, 1], ceilings: [1, 0.5] });
    const held = hold(holder, 2);
    const lease = gate.admitNow(1, undefined);
    expect(lease).toBeDefined();
    // load 3: band 1 would wait; admitNow queues nothing and counts nothing.
    expect(gate.admitNow(1, undefined)).toBeUndefined();
    expect(gate.admissionStats().waiting).toBe(0);
    // Band 10 (ceiling 1) still enters; the default band is the most important one.
    const top = gate.admitNow(undefined, undefined)!;
    expect(top).toBeDefined();
    const stats = gate.admissionStats().bands;
    expect(stats.map((b) => [b.band, b.admitted])).toEqual([
      [10, 1],
      [1, 1],
    ]);
    // A waiter of band 1: a later band-1 request does not pass it, even once there is room for one.
    for (const l of [lease!, top, ...held]) l.release('success');
    const h = hold(holder, 3);
    const waiting = router.acquireAsync({ band: 1 });
    expect(gate.admissionStats().waiting).toBe(1);
    h[0]!.release('success'); // load 2: room for band 1, but its waiter comes first
    expect(gate.admitNow(1, undefined)).toBeUndefined();
    (await waiting).release('success');
    expect(thrown(() => gate.admitNow(7, undefined))).toMatchObject({ code: 'InvalidConfig', field: 'acquireAsync(options).band' });
    gate.close();
    expect(thrown(() => gate.admitNow(10, undefined))).toMatchObject({ code: 'Closed' });
  });
});
