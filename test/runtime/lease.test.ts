import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';
import { counters, manualClock, specs } from '../helpers/runtime.js';

const logger = createLogger({ level: 'silent' });

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
    expect(() => l.release('ok' as 'success')).toThrow(
      'release(outcome): must be one of "success", "failure", "overload", "cancelled", got "ok"',
    );
    expect(() => l.release('success', { latencyMs: -1 })).toThrow(
      'release(options).latencyMs: must be a finite number >= 0 (milliseconds), got -1',
    );
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

describe('what a lease and a router tell a side table (the HTTP dispatcher keys its pools and counters on them)', () => {
  it("lease.slot / lease.generation are the slot's and its generation's, and a reused slot shows the next generation", () => {
    const b = new Balancer({ logger, capacity: 1 });
    b.update([{ id: 'old', address: '127.0.0.1:7000' }]);
    const r = b.router({ policy: 'round-robin' });
    const first = r.acquire();
    expect([first.slot, first.generation]).toEqual([0, b.table.stats(0).generation]);
    first.release('success');
    b.update([]);
    b.update([{ id: 'new', address: '127.0.0.1:7001' }]);
    const second = r.acquire();
    expect(second.id).toBe('new');
    expect(second.slot).toBe(0);
    expect(second.generation).toBe(first.generation + 1);
    expect(second.generation).toBe(b.table.stats(0).generation);
    second.release('success');
  });

  it('router.member(id) is the spec in force in its view: undefined once the view no longer lists the id, a new object after a change', () => {
    const b = new Balancer({ logger });
    b.update([
      { id: 'a', address: '127.0.0.1:7000' },
      { id: 'b', address: '127.0.0.1:7001' },
    ]);
    const r = b.router();
    expect(r.member('a')?.address).toBe('127.0.0.1:7000');
    expect(r.member('nope')).toBeUndefined();
    b.update([{ id: 'a', address: '127.0.0.1:7002' }]);
    // A pure read: the view changes at the next acquire or refresh.
    expect(r.member('b')?.address).toBe('127.0.0.1:7001');
    r.refresh();
    expect(r.member('b')).toBeUndefined();
    expect(r.member('a')?.address).toBe('127.0.0.1:7002');
    b.update([{ id: 'a', address: '127.0.0.1:7002', status: 'draining' }]);
    r.refresh();
    // A draining backend is still a member (its leases finish).
    expect(r.member('a')?.status).toBe('draining');
  });
});
