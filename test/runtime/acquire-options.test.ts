// The one reader of acquire options (src/runtime/acquire-options.ts): every acquire path reads them the same
// way, and a call's options never leak into the next call of the router's reused request.
import { describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import type { PoiseError } from '../../src/core/errors.js';
import { LeaseKind } from '../../src/load/leases.js';
import { createLogger } from '../../src/log.js';
import { AcquireRequest, Intent } from '../../src/runtime/acquire-options.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { manualClock, specs } from '../helpers/runtime.js';
import { rejection } from '../helpers/thrown.js';

const logger = createLogger({ level: 'silent' });

describe('acquire options: one reader', () => {
  it('acquireAsync with and without a gate refuses the same bad options with the same field and message', async () => {
    const b = new Balancer({ logger });
    try {
      b.update(specs(2));
      const bare = b.router();
      const gated = b.router();
      new AdmissionGate(gated, { bands: [1, 0], minCeiling: 0.5 });
      const bad: unknown[] = [
        5,
        { timeotMs: 5 },
        { timeoutMs: -1 },
        { timeoutMs: Number.NaN },
        { signal: 'soon' },
        { priority: -1 },
        { priority: 1.5 },
        { priority: { admission: 1 } },
      ];
      for (const opts of bad) {
        const a = await rejection(bare.acquireAsync(opts as never));
        const g = await rejection(gated.acquireAsync(opts as never));
        expect([a.code, a.field, a.message]).toEqual([g.code, g.field, g.message]);
        expect(a.code).toBe('InvalidConfig');
        expect(a.field).toMatch(/^acquireAsync\(options\)/);
      }
      // Nothing was leased by either.
      expect(b.table.totalOutstanding()).toBe(0);
    } finally {
      b.close();
    }
  });

  it('the reused request starts every call from the defaults: no option of one call reaches the next', () => {
    const req = new AcquireRequest();
    req.read({ key: 'k', kind: 'connection', priority: 2, exclude: ['a'] }, LeaseKind.Request, 10_000);
    expect([req.key, req.kind, req.priority, req.exclude, req.intent]).toEqual(['k', LeaseKind.Connection, 2, ['a'], Intent.None]);
    req.read({ intent: 'read', maxLagMs: 50, minLsn: '1/2' }, LeaseKind.Request, 10_000);
    expect([req.key, req.kind, req.priority, req.exclude, req.intent]).toEqual([undefined, LeaseKind.Request, -1, undefined, Intent.Read]);
    expect([req.bounds.maxLagMs, req.bounds.hasMin, [...req.bounds.minLsn]]).toEqual([50, true, [1, 2]]);
    req.read({ intent: 'read' }, LeaseKind.Connection, 700);
    expect([req.kind, req.bounds.maxLagMs, req.bounds.hasMin]).toEqual([LeaseKind.Connection, 700, false]);
    req.read(undefined, LeaseKind.Request, 10_000);
    expect([req.key, req.kind, req.priority, req.exclude, req.intent]).toEqual([undefined, LeaseKind.Request, -1, undefined, Intent.None]);
  });

  it('names the bad field of an acquire', () => {
    const req = new AcquireRequest();
    const field = (opts: unknown): string | undefined => {
      try {
        req.read(opts as never, LeaseKind.Request, 10_000);
      } catch (err) {
        return (err as PoiseError).field;
      }
      return 'accepted';
    };
    expect(field({ exlcude: [] })).toBe('acquire(options).exlcude');
    expect(field({ kind: 'stream' })).toBe('acquire(options).kind');
    expect(field({ intent: 'write', priority: 0 })).toBe('acquire(options).priority');
    expect(field({ intent: 'sideways' })).toBe('acquire(options).intent');
    expect(field({ minLsn: '1/2' })).toBe('acquire(options).minLsn');
    expect(field({ priority: -1 })).toBe('acquire(options).priority');
    expect(field({ exclude: 'a' })).toBe('acquire(options).exclude');
    expect(field({ intent: 'read', minLsn: 'x' })).toBe('acquire(options).minLsn');
    expect(field({ exclude: new Set(['a']), priority: 0 })).toBe('accepted');
  });
});

describe('load reports go through the lease', () => {
  it("records on the lease's backend, stamped with the router's clock, and not after release", () => {
    const clock = manualClock(5000);
    const b = new Balancer({ logger, clock: clock.now });
    try {
      b.update(specs(2));
      const r = b.router({ policy: 'round-robin', clock: clock.now });
      const lease = r.acquire();
      expect(lease.reportLoad(0.25, 40, 2)).toBe(true);
      const got = { utilization: 0, qps: 0, eps: 0, at: 0, since: 0 };
      expect(b.ownerTable.reported.readReport(lease.slot, 5000, 180_000, got)).toBe(true);
      expect(got).toEqual({ utilization: 0.25, qps: 40, eps: 2, at: 5000, since: 5000 });
      const other = b.slotEntries().find((e) => e.id !== lease.id)!.slot;
      expect(b.ownerTable.reported.readReport(other, 5000, 180_000, got)).toBe(false);
      lease.release('success');
      clock.advance(10);
      expect(lease.reportLoad(0.9, 1, 1)).toBe(false);
      expect(b.ownerTable.reported.readReport(lease.slot, 5010, 180_000, got)).toBe(true);
      expect([got.utilization, got.at]).toEqual([0.25, 5000]);
    } finally {
      b.close();
    }
  });
});
