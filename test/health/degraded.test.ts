// The degraded state set by membership, and priority planning that counts
// unhealthy and degraded hosts.
import { describe, expect, it } from 'vitest';
import { resolveDocument } from '../../src/membership/document.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';
import type { BackendSpec } from '../../src/core/spec.js';
import { thrown } from '../helpers/thrown.js';

const quiet = createLogger({ level: 'silent' });

function picks(b: Balancer, n: number, policy: 'priority' | 'p2c:latency' | 'round-robin'): Record<string, number> {
  const r = b.router({ policy, seed: 11 });
  const seen: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const lease = r.acquire();
    seen[lease.id] = (seen[lease.id] ?? 0) + 1;
    lease.release('success');
  }
  r.close();
  return seen;
}

describe('membership status "degraded"', () => {
  const specs = (aStatus: BackendSpec['status']): BackendSpec[] => [
    { id: 'a', address: '127.0.0.1:1', priority: 0, status: aStatus },
    { id: 'd', address: '127.0.0.1:2', priority: 0, status: 'degraded' },
    { id: 'p1', address: '127.0.0.1:3', priority: 1 },
  ];

  for (const policy of ['priority', 'round-robin', 'p2c:latency'] as const) {
    it(`${policy}: a degraded backend gets nothing while its priority has a healthy host`, () => {
      const b = new Balancer({ capacity: 8, logger: quiet });
      b.update(specs('ready'));
      const seen = picks(b, policy === 'priority' ? 20_000 : 1000, policy);
      expect(seen['d']).toBeUndefined();
      if (policy === 'priority') {
        // As Envoy: a degraded host is not healthy capacity, so p0 is 1 of 2
        // available = 50 % × 1.4 = 70 % to a, and the 30 % overflow goes to p1's
        // healthy host before any degraded one. Binomial(20000, 0.7): σ ≈ 65, band ±5σ.
        expect(Object.keys(seen).sort()).toEqual(['a', 'p1']);
        expect(Math.abs(seen['a']! - 14_000)).toBeLessThan(325);
      }
    });
  }

  it("priority: once its priority has no healthy host left, the degraded backend takes that priority's traffic", () => {
    const b = new Balancer({ capacity: 8, logger: quiet });
    b.update(specs('unavailable'));
    // p0 has a (unavailable) and d (degraded, now eligible): 1 of 2 available
    // = 50 %, × 1.4 = 70 % to p0, all of it to d; the rest to p1.
    const seen = picks(b, 20_000, 'priority');
    expect(Object.keys(seen).sort()).toEqual(['d', 'p1']);
    // Binomial(20000, 0.7): σ ≈ 65; a band of ±5σ.
    expect(Math.abs(seen['d']! - 14_000)).toBeLessThan(325);
  });

  it('healthStats reports it and a status change to ready clears it', () => {
    const b = new Balancer({ capacity: 8, logger: quiet });
    b.update(specs('ready'));
    expect(b.healthStats().backends.find((x) => x.id === 'd')!.degraded).toBe(true);
    b.update(specs('ready').map((s) => (s.id === 'd' ? { ...s, status: 'ready' as const } : s)));
    expect(b.healthStats().backends.find((x) => x.id === 'd')!.degraded).toBe(false);
    // p1 is priority 1: every policy runs inside the priority layer, so it gets nothing while priority 0 is fully available.
    expect(picks(b, 600, 'round-robin')).toEqual({ a: 300, d: 300 });
  });
});

describe('priority failover follows active checks', () => {
  it('priority 1 takes the traffic when every priority-0 host fails its check', async () => {
    let p0Up = true;
    const b = new Balancer({
      capacity: 8,
      logger: quiet,
      health: {
        check: {
          kind: 'custom',
          intervalMs: 10,
          jitterPercent: 0,
          rise: 1,
          fall: 2,
          check: async (t) => (t.id.startsWith('p0') ? p0Up : true),
        },
      },
    });
    b.update([
      { id: 'p0a', address: '127.0.0.1:1', priority: 0 },
      { id: 'p0b', address: '127.0.0.1:2', priority: 0 },
      { id: 'p1a', address: '127.0.0.1:3', priority: 1 },
    ]);
    try {
      expect(Object.keys(picks(b, 500, 'priority')).sort()).toEqual(['p0a', 'p0b']);
      p0Up = false;
      await expect.poll(() => b.healthStats().backends.filter((x) => x.check === 'down').length, { timeout: 10_000 }).toBe(2);
      expect(picks(b, 500, 'priority')).toEqual({ p1a: 500 });
      p0Up = true;
      await expect.poll(() => b.healthStats().backends.filter((x) => x.check === 'up').length, { timeout: 10_000 }).toBe(3);
      expect(Object.keys(picks(b, 500, 'priority')).sort()).toEqual(['p0a', 'p0b']);
    } finally {
      b.close();
    }
  });
});

describe('health configuration is validated, naming the field', () => {
  const cases: [unknown, string][] = [
    [{ check: { kind: 'ftp' } }, 'health.check.kind: must be one of "tcp", "http", "redis", "postgres", "mysql", "custom", "agent"'],
    [{ check: { kind: 'agent', agentSend: 'é' } }, 'health.check.agentSend: must be a string of printable ASCII'],
    [{ orca: { blackoutMs: -1 } }, 'health.orca.blackoutMs: must be an integer in [0, 86400000]'],
    [{ orca: { path: 'load' } }, 'health.orca.path: must be a path starting with "/"'],
    [{ check: { kind: 'tcp', rise: 0 } }, 'health.check.rise: must be an integer in [1, 1000]'],
    [{ check: { kind: 'tcp', path: '/x' } }, 'health.check.path: applies only to kind "http"'],
    [{ check: { kind: 'http', path: 'healthz' } }, 'health.check.path: must be a path starting with "/"'],
    [{ check: { kind: 'http', expectedStatus: [300, 200] } }, 'health.check.expectedStatus[1]: must be an integer in [300, 599]'],
    [{ check: { kind: 'custom' } }, 'health.check.check'],
    [{ outlier: { maxEjectionPercent: 101 } }, 'health.outlier.maxEjectionPercent: must be an integer in [0, 100]'],
    [{ outlier: { alwaysEjectOneHost: 'yes' } }, 'health.outlier.alwaysEjectOneHost: must be a boolean'],
    [{ outlier: { consecutive5xx: 5 } }, 'health.outlier.consecutive5xx'],
    [{ probes: {} }, 'health.probes'],
  ];
  for (const [health, message] of cases) {
    it(`${JSON.stringify(health)} → ${message}`, () => {
      const err = thrown(() => resolveDocument({ cluster: 'db', backends: [{ id: 'a', address: '127.0.0.1:1' }], health }));
      expect(err.code).toBe('InvalidConfig');
      expect(err.message).toContain(message);
    });
  }

  it('a bad health block in a snapshot leaves the last good membership and health in force', () => {
    const b = new Balancer({ capacity: 8, logger: quiet });
    b.apply({ version: 1, backends: [{ id: 'a', address: '127.0.0.1:1' }], health: { outlier: { intervalMs: 1000 } } });
    expect(() => b.apply({ version: 2, backends: [{ id: 'z', address: '127.0.0.1:9' }], health: { outlier: { intervalMs: 1 } } })).toThrow(
      'membership.health.outlier.intervalMs: must be an integer in [10, 86400000]',
    );
    expect(b.version).toBe(1);
    expect(b.healthStats().backends.map((x) => x.id)).toEqual(['a']);
    expect(b.sweepOutliers()).toEqual([]);
    b.close();
  });

  it('a document function field is refused (a document is data)', () => {
    expect(() => resolveDocument({ cluster: 'db', backends: [], health: { check: { kind: 'postgres', client: {} } } })).toThrow(
      'health.check.client: unknown',
    );
  });
});
