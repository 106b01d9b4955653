import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { ejectionBackoff, resolveEjection } from '../../src/runtime/health.js';
import { Rng } from '../../src/core/rng.js';
import { createLogger } from '../../src/log.js';
import { manualClock, specs } from '../helpers/runtime.js';

const logger = createLogger({ level: 'silent' });

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
    const ids = new Set(
      [0, 1, 2, 3].map(() => {
        const l = r.acquire();
        l.release('cancelled');
        return l.id;
      }),
    );
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
    const expected = ejectionBackoff(
      resolveEjection(ejection),
      new Rng(BigInt.asUintN(64, 11n * 0x9e3779b97f4a7c15n + 0xbf58476d1ce4e5b9n + 1n)),
    ).delayMs(0);
    expect(s.ejectedUntilMs).toBe(Math.trunc(1000 + expected));
    for (let i = 0; i < 20; i++) {
      const l = r.acquire();
      expect(l.id).toBe('b1');
      l.release('cancelled');
    }
    clock.advance(Math.ceil(expected));
    const ids = new Set(
      [0, 1, 2, 3].map(() => {
        const l = r.acquire();
        l.release('cancelled');
        return l.id;
      }),
    );
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
