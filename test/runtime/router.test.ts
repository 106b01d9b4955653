import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { POLICY_NAMES, type PolicyName } from '../../src/runtime/policies.js';
import { Router } from '../../src/runtime/router.js';
import { SlotState } from '../../src/load/load-table.js';
import { createLogger } from '../../src/log.js';
import { counters, manualClock, specs } from '../helpers/runtime.js';

const logger = createLogger({ level: 'silent' });

describe('Router options and errors', () => {
  it('rejects an unknown policy and a bad ejection option', () => {
    const b = new Balancer({ logger });
    expect(() => b.router({ policy: 'fastest' as PolicyName })).toThrow(/^options\.policy: must be one of round-robin, .*, got "fastest"$/);
    expect(() => b.router({ ejection: { consecutiveFailures: 0 } })).toThrow(
      'options.ejection.consecutiveFailures: must be an integer >= 1, got 0',
    );
    expect(() =>
      Router.attach({ buffer: new ArrayBuffer(8) as unknown as SharedArrayBuffer, layoutVersion: 1, clock: new SharedArrayBuffer(8) }),
    ).toThrow(/^attachment\.buffer: must be a SharedArrayBuffer/);
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

describe('membership changes', () => {
  it('a drained backend gets no new leases while its old ones finish', () => {
    const b = new Balancer({ logger });
    b.update(specs(2));
    const r = b.router({ policy: 'round-robin' });
    const old = [r.acquire(), r.acquire(), r.acquire(), r.acquire()].filter((l) => l.id === 'b0');
    expect(old.length).toBe(2);
    b.update([
      { id: 'b0', address: '127.0.0.1:7000', status: 'draining' },
      { id: 'b1', address: '127.0.0.1:7001' },
    ]);
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
    b.update([
      { id: 'b0', address: '127.0.0.1:7000', weight: 3 },
      { id: 'b1', address: '127.0.0.1:7001' },
    ]);
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
    expect(() =>
      b.update([
        { id: 'b1', address: '127.0.0.1:7001' },
        { id: 'c', address: '127.0.0.1:7009' },
      ]),
    ).toThrow(/only 0 are free/);
    expect(counters(b, 0)).toEqual({ c: 0, r: 1 });
    held.release('success');
    b.update([
      { id: 'b1', address: '127.0.0.1:7001' },
      { id: 'c', address: '127.0.0.1:7009' },
    ]);
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
    b.ownerTable.tags.setTag(0, 7, SlotState.Ready);
    b.ownerTable.leases.up(0, 0, r.row);
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
