import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { POLICY_NAMES, type PolicyName } from '../../src/runtime/policies.js';
import { Router } from '../../src/runtime/router.js';
import { ejectionBackoff, resolveEjection } from '../../src/runtime/health.js';
import { Rng } from '../../src/core/rng.js';
import type { PoiseError } from '../../src/core/errors.js';
import { SlotState } from '../../src/load/load-table.js';
import { createLogger } from '../../src/log.js';
import type { BackendSpec } from '../../src/core/spec.js';

const logger = createLogger({ level: 'silent' });

function specs(n: number, extra: Partial<BackendSpec> = {}): BackendSpec[] {
  return Array.from({ length: n }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}`, ...extra }));
}

function manualClock(start = 1000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

function counters(b: Balancer, slot: number): { c: number; r: number } {
  const s = b.table.stats(slot);
  return { c: s.connections, r: s.requests };
}

describe('Balancer.update', () => {
  it('versions arrays, ignores older snapshots, and keeps the last good membership on bad input', () => {
    const b = new Balancer({ logger, capacity: 8 });
    expect(b.version).toBe(0);
    expect(b.update(specs(2))).toBe(1);
    expect(b.update({ version: 10, backends: specs(3) })).toBe(10);
    expect(b.update({ version: 10, backends: specs(1) })).toBe(10);
    expect(b.update({ version: 4, backends: specs(1) })).toBe(10);
    expect(() => b.update([{ id: 'x', address: 'nope' }])).toThrow(
      'backends[0].address: must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"), got "nope"',
    );
    expect(() => b.update([{ id: 'x', address: '127.0.0.1:1', weight: -1 }])).toThrow('backends[0].weight: must be an integer in [1, 4294967295], got -1');
    expect(() => b.update({ version: -1, backends: [] })).toThrow('membership.version: must be an integer >= 0, got -1');
    expect(b.version).toBe(10);
    const r = b.router({ policy: 'random' });
    expect(r.version).toBe(10);
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const l = r.acquire();
      seen.add(l.id);
      l.release('cancelled');
    }
    expect([...seen].sort()).toEqual(['b0', 'b1', 'b2']);
  });

  it('applies a first snapshot with version 0, then ignores a later version 0', () => {
    const b = new Balancer({ logger, capacity: 8 });
    expect(b.update({ version: 0, backends: specs(2) })).toBe(0);
    const r = b.router({ policy: 'round-robin' });
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const l = r.acquire();
      seen.add(l.id);
      l.release('cancelled');
    }
    expect([...seen].sort()).toEqual(['b0', 'b1']);
    // Nothing newer than 0 arrives: a second version-0 snapshot is ignored.
    expect(b.update({ version: 0, backends: specs(1) })).toBe(0);
    expect(b.table.stats(1).state).toBe(SlotState.Ready);
    // An array after it gets version 1.
    expect(b.update(specs(3))).toBe(1);
    // version is a pure read of the view in force; refresh() (or the next acquire) moves it.
    expect(r.version).toBe(0);
    expect(r.version).toBe(0);
    expect(r.refresh()).toBe(1);
    expect(r.version).toBe(1);
    r.acquire().release('cancelled');
    b.update(specs(2));
    expect(r.version).toBe(1);
    r.acquire().release('cancelled');
    expect(r.version).toBe(2);
  });

  it('rejects a membership that needs more slots than are free, naming the capacity', () => {
    const b = new Balancer({ logger, capacity: 2 });
    b.update(specs(2));
    expect(() => b.update(specs(3))).toThrow(/backends: 1 new backends need free slots but only 0 are free \(options\.capacity 2/);
    expect(() => b.update(specs(3))).toThrow(expect.objectContaining({ code: 'CapacityExhausted', field: 'backends' }));
    expect(b.version).toBe(1);
  });

  it('names a bad constructor option', () => {
    expect(() => new Balancer({ capacity: 0 })).toThrow('options.capacity: must be an integer in [1, 65536], got 0');
    try {
      new Balancer({ maxThreads: 300 });
    } catch (e) {
      expect((e as PoiseError).code).toBe('InvalidConfig');
      expect((e as PoiseError).field).toBe('options.maxThreads');
    }
  });
});

describe('Router options and errors', () => {
  it('rejects an unknown policy and a bad ejection option', () => {
    const b = new Balancer({ logger });
    expect(() => b.router({ policy: 'fastest' as PolicyName })).toThrow(/^options\.policy: must be one of round-robin, .*, got "fastest"$/);
    expect(() => b.router({ ejection: { consecutiveFailures: 0 } })).toThrow(
      'options.ejection.consecutiveFailures: must be an integer >= 1, got 0',
    );
    expect(() => Router.attach({ buffer: new ArrayBuffer(8) as unknown as SharedArrayBuffer, layoutVersion: 1, clock: new SharedArrayBuffer(8) })).toThrow(
      /^attachment\.buffer: must be a SharedArrayBuffer/,
    );
  });

  it('throws Empty with no backends and NoEligibleCandidates when all are draining', () => {
    const b = new Balancer({ logger });
    const r = b.router();
    expect(() => r.acquire()).toThrow(expect.objectContaining({ code: 'Empty' }));
    b.update(specs(2, { status: 'draining' }));
    expect(() => r.acquire()).toThrow(expect.objectContaining({ code: 'NoEligibleCandidates' }));
  });

  it.each(POLICY_NAMES)('policy %s leases only live backends and returns every counter to zero', (policy) => {
    const b = new Balancer({ logger });
    b.update([
      ...specs(3, { priority: 0, locality: 'z1' }),
      { id: 'p1', address: '127.0.0.1:7100', priority: 1, locality: 'z2' },
      { id: 'gone', address: '127.0.0.1:7200', status: 'draining' },
    ]);
    const r = b.router({ policy, seed: 5 });
    const open = [];
    for (let i = 0; i < 300; i++) {
      const l = r.acquire({ key: `k${i}` });
      expect(['b0', 'b1', 'b2', 'p1']).toContain(l.id);
      open.push(l);
    }
    for (const l of open) l.release('success', { latencyMs: 3 });
    for (let s = 0; s < 5; s++) expect(counters(b, s)).toEqual({ c: 0, r: 0 });
    expect(r.openLeases).toBe(0);
  });
});

describe('Lease', () => {
  it('releases exactly once: a second release is a no-op, never a double decrement', () => {
    const b = new Balancer({ logger });
    b.update(specs(1));
    const r = b.router({ policy: 'round-robin' });
    const a = r.acquire();
    const c = r.acquire();
    expect(counters(b, 0)).toEqual({ c: 0, r: 2 });
    a.release('success');
    a.release('success');
    a.release('failure');
    expect(counters(b, 0)).toEqual({ c: 0, r: 1 });
    expect(b.table.stats(0).failures).toBe(0);
    expect(a.released).toBe(true);
    c.release('cancelled');
    expect(counters(b, 0)).toEqual({ c: 0, r: 0 });
    const h = r.acquireHandle();
    expect(r.releaseHandle(h, 'success')).toBe(true);
    expect(r.releaseHandle(h, 'success')).toBe(false);
    expect(counters(b, 0)).toEqual({ c: 0, r: 0 });
  });

  it('rejects a bad outcome or sample and stays open', () => {
    const b = new Balancer({ logger });
    b.update(specs(1));
    const l = b.router().acquire();
    expect(() => l.release('ok' as 'success')).toThrow('release(outcome): must be one of "success", "failure", "overload", "cancelled", got "ok"');
    expect(() => l.release('success', { latencyMs: -1 })).toThrow('release(options).latencyMs: must be a finite number >= 0 (milliseconds), got -1');
    expect(l.released).toBe(false);
    l.release('success', { latencyMs: 1 });
    expect(counters(b, 0)).toEqual({ c: 0, r: 0 });
  });

  it('connection leases count connections and feed the connect-time estimate', () => {
    const clock = manualClock(0);
    const b = new Balancer({ logger, clock: clock.now });
    b.update(specs(1));
    const r = b.router({ policy: 'p2c:connectionTime' });
    const l = r.acquire();
    expect(counters(b, 0)).toEqual({ c: 1, r: 0 });
    l.connected(200);
    expect(b.table.stats(0).connectEstimateUs).toBe(200_000);
    clock.advance(1000);
    l.release('success');
    expect(counters(b, 0)).toEqual({ c: 0, r: 0 });
    const q = r.acquire({ kind: 'request' });
    expect(counters(b, 0)).toEqual({ c: 0, r: 1 });
    q.release('success', { latencyMs: 80 });
    expect(b.table.stats(0).latencyEstimateUs).toBe(80_000);
  });
});

describe('membership changes', () => {
  it('a drained backend gets no new leases while its old ones finish', () => {
    const b = new Balancer({ logger });
    b.update(specs(2));
    const r = b.router({ policy: 'round-robin' });
    const old = [r.acquire(), r.acquire(), r.acquire(), r.acquire()].filter((l) => l.id === 'b0');
    expect(old.length).toBe(2);
    b.update([{ id: 'b0', address: '127.0.0.1:7000', status: 'draining' }, { id: 'b1', address: '127.0.0.1:7001' }]);
    for (let i = 0; i < 100; i++) expect(r.acquire().id).toBe('b1');
    expect(counters(b, 0)).toEqual({ c: 0, r: 2 });
    for (const l of old) l.release('success');
    expect(counters(b, 0)).toEqual({ c: 0, r: 0 });
  });

  it('reweights at the next pick after the epoch moves', () => {
    const b = new Balancer({ logger });
    b.update(specs(2));
    const r = b.router({ policy: 'smooth-weighted' });
    const before = [0, 1, 2, 3].map(() => r.acquire().id);
    expect(before.sort()).toEqual(['b0', 'b0', 'b1', 'b1']);
    b.update([{ id: 'b0', address: '127.0.0.1:7000', weight: 3 }, { id: 'b1', address: '127.0.0.1:7001' }]);
    const after = [0, 1, 2, 3].map(() => r.acquire().id);
    expect(after.filter((id) => id === 'b0').length).toBe(3);
  });

  it('reuses a removed slot only after it drains, with the generation bumped; a stale lease never touches the new occupant', () => {
    const b = new Balancer({ logger, capacity: 2 });
    b.update(specs(2));
    const r = b.router({ policy: 'round-robin' });
    let held = r.acquire();
    while (held.id !== 'b0') {
      held.release('cancelled');
      held = r.acquire();
    }
    b.update([{ id: 'b1', address: '127.0.0.1:7001' }]);
    expect(b.table.stats(0).state).toBe(SlotState.Removed);
    // The tombstone still counts its live lease, so the slot is not free.
    expect(() => b.update([{ id: 'b1', address: '127.0.0.1:7001' }, { id: 'c', address: '127.0.0.1:7009' }])).toThrow(/only 0 are free/);
    expect(counters(b, 0)).toEqual({ c: 0, r: 1 });
    held.release('success');
    b.update([{ id: 'b1', address: '127.0.0.1:7001' }, { id: 'c', address: '127.0.0.1:7009' }]);
    const s = b.table.stats(0);
    expect(s.generation).toBe(2);
    expect(s.state).toBe(SlotState.Ready);
    held.release('failure');
    expect(counters(b, 0)).toEqual({ c: 0, r: 0 });
    expect(b.table.stats(0).failures).toBe(0);
    const ids = new Set([0, 1, 2, 3].map(() => r.acquire().id));
    expect([...ids].sort()).toEqual(['b1', 'c']);
  });

  it('a lease whose slot generation no longer matches writes no health into the new occupant, and still returns its own load', () => {
    const b = new Balancer({ logger, capacity: 1 });
    b.update(specs(1));
    const r = b.router({ ejection: { consecutiveFailures: 1 } });
    const h = r.acquireHandle();
    // Simulate a slot handed to a new occupant (generation moved) while the lease was out.
    b.ownerTable.setTag(0, 7, SlotState.Ready);
    b.ownerTable.leaseUp(0, 0, r.row);
    expect(r.releaseHandle(h, 'failure')).toBe(true);
    // The lease's own count is returned (the row's cell is exact) ...
    expect(counters(b, 0)).toEqual({ c: 0, r: 1 });
    // ... but its failure was not written into the new generation.
    expect(b.table.stats(0)).toMatchObject({ failures: 0, ejections: 0, ejectedUntilMs: 0 });
  });

  it('retries around backends at their maxInflight cap and fails clearly when all are full', () => {
    const b = new Balancer({ logger });
    b.update(specs(2, { maxInflight: 2 }));
    const r = b.router({ policy: 'p2c', seed: 1 });
    const held = [r.acquire(), r.acquire(), r.acquire(), r.acquire()];
    expect(held.map((l) => l.id).sort()).toEqual(['b0', 'b0', 'b1', 'b1']);
    expect(() => r.acquire()).toThrow(expect.objectContaining({ code: 'NoEligibleCandidates' }));
    expect(counters(b, 0)).toEqual({ c: 0, r: 2 });
    held[0]!.release('success');
    expect(r.acquire().id).toBe(held[0]!.id);
  });

  it('honours exclude and priority', () => {
    const b = new Balancer({ logger });
    b.update([...specs(3), { id: 'p1', address: '127.0.0.1:7100', priority: 1 }]);
    for (const policy of ['p2c', 'weighted', 'rendezvous', 'maglev', 'priority'] as const) {
      const r = b.router({ policy, seed: 3 });
      for (let i = 0; i < 50; i++) {
        const l = r.acquire({ key: 'user-1', exclude: new Set(['b0', 'b1']) });
        expect(['b2', 'p1']).toContain(l.id);
        l.release('cancelled');
        const p = r.acquire({ key: `k${i}`, priority: 1 });
        expect(p.id).toBe('p1');
        p.release('cancelled');
      }
    }
  });
});

describe('passive health', () => {
  it('backoff is uniform in [1, 2^k) units, k capped at maxTries, never above maxMs', () => {
    const b = ejectionBackoff(resolveEjection({ baseMs: 100, maxMs: 5000, maxTries: 3 }), new Rng(9));
    for (let i = 0; i < 1000; i++) {
      expect(b.delayMs(0)).toBeGreaterThanOrEqual(100);
      expect(b.delayMs(0)).toBeLessThan(200);
      const k3 = b.delayMs(10);
      expect(k3).toBeGreaterThanOrEqual(100);
      expect(k3).toBeLessThan(800);
    }
    const capped = ejectionBackoff(resolveEjection({ baseMs: 1000, maxMs: 2000, maxTries: 6 }), new Rng(1));
    for (let i = 0; i < 1000; i++) expect(capped.delayMs(20)).toBeLessThan(2000);
  });

  it('an ejection that ends past the 2^30 ms clock wrap expires on time, not 12 days late', () => {
    // The clock starts 30 ms before the wrap; the ejection of [100, 200) ms ends after it.
    const clock = manualClock(2 ** 30 - 30);
    const b = new Balancer({ logger, clock: clock.now });
    b.update(specs(2));
    const r = b.router({ policy: 'round-robin', seed: 3, ejection: { consecutiveFailures: 1, baseMs: 100, maxMs: 10_000 } });
    for (;;) {
      const l = r.acquire();
      if (l.id === 'b0') {
        l.release('failure');
        break;
      }
      l.release('cancelled');
    }
    const left = b.table.ejectedForMs(0, clock.now());
    expect(left).toBeGreaterThanOrEqual(100);
    expect(left).toBeLessThan(200);
    expect(b.table.stats(0).ejectedUntilMs).toBeLessThan(200); // stored wrapped
    clock.advance(left - 1);
    for (let i = 0; i < 10; i++) {
      const l = r.acquire();
      expect(l.id).toBe('b1');
      l.release('cancelled');
    }
    clock.advance(1);
    const ids = new Set([0, 1, 2, 3].map(() => {
      const l = r.acquire();
      l.release('cancelled');
      return l.id;
    }));
    expect(ids).toEqual(new Set(['b0', 'b1']));
  });

  it('ejects after consecutive failures for a seeded backoff, readmits at expiry, and a success clears it', () => {
    const clock = manualClock(1000);
    const b = new Balancer({ logger, clock: clock.now });
    b.update(specs(2));
    const ejection = { consecutiveFailures: 3, baseMs: 100, maxMs: 10_000 };
    const r = b.router({ policy: 'round-robin', seed: 11, ejection });
    const fail = (id: string): void => {
      for (;;) {
        const l = r.acquire();
        if (l.id === id) {
          l.release('failure');
          return;
        }
        l.release('cancelled');
      }
    };
    fail('b0');
    fail('b0');
    expect(b.table.stats(0).failures).toBe(2);
    const health = b.table.healthEpoch();
    fail('b0');
    expect(b.table.healthEpoch()).toBe(health + 1);
    const s = b.table.stats(0);
    expect(s.ejections).toBe(1);
    expect(s.failures).toBe(0);
    // The same seed gives the same jitter: first ejection is uniform in [1, 2) × 100 ms.
    const expected = ejectionBackoff(resolveEjection(ejection), new Rng(BigInt.asUintN(64, 11n * 0x9e3779b97f4a7c15n + 0xbf58476d1ce4e5b9n + 1n))).delayMs(0);
    expect(s.ejectedUntilMs).toBe(Math.trunc(1000 + expected));
    for (let i = 0; i < 20; i++) {
      const l = r.acquire();
      expect(l.id).toBe('b1');
      l.release('cancelled');
    }
    clock.advance(Math.ceil(expected));
    const ids = new Set([0, 1, 2, 3].map(() => {
      const l = r.acquire();
      l.release('cancelled');
      return l.id;
    }));
    expect(ids).toEqual(new Set(['b0', 'b1']));
    // Second ejection: exponent 2, so [1, 4) units.
    fail('b0');
    fail('b0');
    fail('b0');
    expect(b.table.stats(0).ejections).toBe(2);
    const left = b.table.ejectedForMs(0, clock.now());
    expect(left).toBeGreaterThanOrEqual(100);
    expect(left).toBeLessThan(400);
    // A success (a lease taken before) clears failures and the exponent.
    clock.advance(400);
    const l = (() => {
      for (;;) {
        const x = r.acquire();
        if (x.id === 'b0') return x;
        x.release('cancelled');
      }
    })();
    l.release('success');
    expect(b.table.stats(0).ejections).toBe(0);
  });

  it('fails open when every ready backend is ejected', () => {
    const clock = manualClock(0);
    const b = new Balancer({ logger, clock: clock.now });
    b.update(specs(1));
    const r = b.router({ ejection: { consecutiveFailures: 1 } });
    r.acquire().release('failure');
    expect(b.table.ejectedForMs(0, clock.now())).toBeGreaterThan(0);
    expect(r.acquire().id).toBe('b0');
  });
});

describe('p2c:latency in one thread', () => {
  it('sends a slow backend far less than its fair share', () => {
    const clock = manualClock(0);
    const b = new Balancer({ logger, clock: clock.now });
    b.update(specs(4));
    const r = b.router({ policy: 'p2c:latency', seed: 2 });
    const picks = new Map<string, number>();
    for (let i = 0; i < 20_000; i++) {
      clock.advance(1);
      const l = r.acquire();
      picks.set(l.id, (picks.get(l.id) ?? 0) + 1);
      l.release('success', { latencyMs: l.id === 'b3' ? 50 : 5 });
    }
    // Fair share is 1/4 = 5000. Once measured, the slow backend (10× the
    // latency) wins a comparison only when its decayed estimate drops below
    // the others', so it keeps well under half its share.
    expect(picks.get('b3')!).toBeLessThan(2500);
  });
});
