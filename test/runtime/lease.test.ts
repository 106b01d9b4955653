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
