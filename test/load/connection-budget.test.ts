/**
 * The connection budget's table side: the share word and its enforcement on
 * the lease path (one thread here; test/integration/connection-budget-workers
 * races threads).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import { PoiseError } from '../../src/core/errors.js';
import { LeaseKind } from '../../src/load/leases.js';
import { LoadTable } from '../../src/load/load-table.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { specs } from '../helpers/runtime.js';

function balancerOf(n: number): Balancer {
  const b = new Balancer({ capacity: 8 });
  onTestFinished(() => b.close());
  b.update(specs(n));
  return b;
}

describe('ConnectionBudget region', () => {
  it('encodes none as undefined, zero as 0, n as n, and counts refusals until taken', () => {
    const t = LoadTable.create({ capacity: 2, maxThreads: 2 });
    expect(t.budget.share(0)).toBeUndefined();
    expect(t.budget.setShare(0, 0)).toBe(true);
    expect(t.budget.share(0)).toBe(0);
    expect(t.budget.word(0)).toBe(-1);
    expect(t.budget.setShare(0, 0)).toBe(false);
    t.budget.setShare(0, 7);
    expect(t.budget.share(0)).toBe(7);
    t.budget.setShare(0, undefined);
    expect(t.budget.word(0)).toBe(0);
    for (let k = 0; k < 5; k++) t.budget.refused(1);
    expect(t.budget.takeRefusals(1)).toBe(5);
    expect(t.budget.takeRefusals(1)).toBe(0);
    expect(t.budget.share(1)).toBeUndefined();
  });

  it('a new occupant starts at the owner-side start share and forgets the old refusals', () => {
    const t = LoadTable.create({ capacity: 2, maxThreads: 2 });
    t.budget.setShare(0, 9);
    t.budget.refused(0);
    t.budget.startShare = 0;
    t.resetHealth(0, 0);
    expect(t.budget.share(0)).toBe(0);
    expect(t.budget.takeRefusals(0)).toBe(0);
    t.budget.startShare = undefined;
    t.resetHealth(0, 0);
    expect(t.budget.share(0)).toBeUndefined();
  });
});

describe('share enforcement on the lease path', () => {
  it('grants exactly the share of connection leases, then refuses with Overloaded and counts each refusal', () => {
    const b = balancerOf(1);
    b.ownerTable.budget.setShare(0, 3);
    const r = b.router({ policy: 'round-robin', leaseKind: 'connection' });
    const held: Lease[] = [];
    for (let k = 0; k < 3; k++) held.push(r.acquire());
    expect(b.ownerTable.connections(0)).toBe(3);
    for (let k = 0; k < 4; k++) {
      let err: unknown;
      try {
        r.acquire();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(PoiseError);
      expect((err as PoiseError).code).toBe('Overloaded');
    }
    // The refused adds were undone: the count is the share, not share + refusals.
    expect(b.ownerTable.connections(0)).toBe(3);
    expect(b.ownerTable.budget.takeRefusals(0)).toBe(4);
    held.pop()!.release('success');
    held.push(r.acquire());
    expect(b.ownerTable.connections(0)).toBe(3);
    for (const l of held) l.release('success');
  });

  it('request leases are not capped by the connection share', () => {
    const b = balancerOf(1);
    b.ownerTable.budget.setShare(0, 1);
    const r = b.router({ policy: 'round-robin', leaseKind: 'request' });
    const held = Array.from({ length: 5 }, () => r.acquire());
    expect(b.table.stats(0).requests).toBe(5);
    expect(() => r.acquire({ kind: 'connection' })).not.toThrow();
    expect(() => r.acquire({ kind: 'connection' })).toThrow(expect.objectContaining({ code: 'Overloaded' }));
    for (const l of held) l.release('success');
  });

  it('a zero share refuses every connection lease; a backend at its share is skipped for one with room', () => {
    const b = balancerOf(2);
    b.ownerTable.budget.setShare(0, 0);
    b.ownerTable.budget.setShare(1, 2);
    const r = b.router({ policy: 'p2c:connections' });
    const a = r.acquire();
    const c = r.acquire();
    expect([a.id, c.id]).toEqual(['b1', 'b1']);
    expect(() => r.acquire()).toThrow(expect.objectContaining({ code: 'Overloaded' }));
    expect(b.ownerTable.connections(0)).toBe(0);
    a.release('success');
    c.release('success');
  });

  it('a shrunk share takes nothing away: new leases wait until the count is below it', () => {
    const b = balancerOf(1);
    b.ownerTable.budget.setShare(0, 4);
    const r = b.router({ policy: 'round-robin', leaseKind: 'connection' });
    const held = Array.from({ length: 4 }, () => r.acquire());
    b.ownerTable.budget.setShare(0, 2);
    expect(() => r.acquire()).toThrow(expect.objectContaining({ code: 'Overloaded' }));
    held.pop()!.release('success');
    held.pop()!.release('success');
    expect(() => r.acquire()).toThrow(expect.objectContaining({ code: 'Overloaded' }));
    held.pop()!.release('success');
    held.push(r.acquire());
    expect(b.ownerTable.connections(0)).toBe(2);
    for (const l of held) l.release('success');
  });

  it('the gauge capacity of a connection router is Σ min(maxInflight, share) after the health epoch moves', () => {
    const b = new Balancer({ capacity: 8 });
    onTestFinished(() => b.close());
    b.update([
      { id: 'x', address: '127.0.0.1:7000', maxInflight: 10 },
      { id: 'y', address: '127.0.0.1:7001', maxInflight: 3 },
    ]);
    const r = b.router({ policy: 'round-robin', leaseKind: 'connection' });
    expect(r.gauge.capacity()).toBe(13);
    b.ownerTable.budget.setShare(0, 4);
    b.ownerTable.budget.setShare(1, 5);
    b.ownerTable.epochs.bumpHealth();
    expect(r.gauge.capacity()).toBe(7);
    const q = b.router({ policy: 'round-robin', leaseKind: 'request' });
    expect(q.gauge.capacity()).toBe(13);
    expect(LeaseKind.Connection).toBe(1);
  });
});

describe('the share with an AdmissionGate', () => {
  it('acquireAsync waits at the share instead of failing, and takes the lease when a connection is returned or the share grows', async () => {
    const b = balancerOf(1);
    const t = b.ownerTable;
    t.budget.setShare(0, 2);
    t.epochs.bumpHealth();
    const r = b.router({ policy: 'round-robin', leaseKind: 'connection' });
    const timers = new ManualTimers();
    const gate = new AdmissionGate(r, { bands: [1], minCeiling: 0, timers });
    const held = [await r.acquireAsync(), await r.acquireAsync()];
    expect(gate.saturation()).toBe(1);
    const third = r.acquireAsync({ timeoutMs: 5000 });
    expect(gate.admissionStats().waiting).toBe(1);
    held.pop()!.release('success');
    held.push(await third);
    expect(t.connections(0)).toBe(2);
    // The owner grows the share (as the fleet budget's round does: set, bump the health epoch, wake the gates).
    const fourth = r.acquireAsync({ timeoutMs: 5000 });
    expect(gate.admissionStats().waiting).toBe(1);
    t.budget.setShare(0, 3);
    t.epochs.bumpHealth();
    t.admission.wake();
    held.push(await fourth);
    expect(t.connections(0)).toBe(3);
    // At the share again: a bounded wait ends in QueueTimeout, never a fourth connection.
    const late = r.acquireAsync({ timeoutMs: 30 }).catch((e: unknown) => e);
    await timers.advance(30);
    expect((await late) as PoiseError).toMatchObject({ code: 'QueueTimeout' });
    expect(t.connections(0)).toBe(3);
    for (const l of held) l.release('success');
  });
});

describe('the connectionBudget option and document block', () => {
  it('a Balancer takes the option, a snapshot with the block replaces it, false removes it; bad values name the field', () => {
    const b = new Balancer({ capacity: 4, connectionBudget: { limitPerBackend: 40, reserve: 5 } });
    onTestFinished(() => b.close());
    expect(b.connectionBudget).toEqual({ limitPerBackend: 40, reserve: 5, ttlMs: 10_000 });
    b.apply({ version: 1, backends: specs(1), connectionBudget: { limitPerBackend: 100, ttlMs: 3000 } });
    expect(b.connectionBudget).toEqual({ limitPerBackend: 100, reserve: 0, ttlMs: 3000 });
    // A snapshot without the block keeps the one in force.
    b.apply({ version: 2, backends: specs(1) });
    expect(b.connectionBudget?.limitPerBackend).toBe(100);
    expect(() => b.apply({ version: 3, backends: specs(1), connectionBudget: { limitPerBackend: 0 } })).toThrow(
      'membership.connectionBudget.limitPerBackend: must be an integer in [1, 1000000], got 0',
    );
    expect(b.version).toBe(2);
    expect(b.connectionBudget?.limitPerBackend).toBe(100);
    b.apply({ version: 4, backends: specs(1), connectionBudget: false });
    expect(b.connectionBudget).toBeUndefined();
    expect(() => new Balancer({ connectionBudget: { limitPerBackend: 10, reserve: 12 } })).toThrow(
      'options.connectionBudget.reserve: must be below options.connectionBudget.limitPerBackend (10), got 12',
    );
  });
});
