import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DbRole, type DbRoleCode } from '../../src/load/db-state.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { parseLsnInto } from '../../src/db/lsn.js';
import { manualClock } from '../helpers/runtime.js';

const logger = createLogger({ level: 'silent' });

/** A primary p0 and replicas r1..r{n}, roles from the spec; the test writes lag and LSN as a roles check would. */
function fleet(replicas: number, opts: { readFallback?: 'primary' | 'refuse'; maxLagMs?: number; seed?: number } = {}) {
  const clock = manualClock();
  const b = new Balancer({ logger, clock: clock.now });
  b.update([
    { id: 'p0', address: '127.0.0.1:7000', role: 'primary' },
    ...Array.from({ length: replicas }, (_, i) => ({ id: `r${i + 1}`, address: `127.0.0.1:${7001 + i}`, role: 'replica' as const })),
  ]);
  const r = b.router({ policy: 'p2c:latency', seed: opts.seed ?? 7, clock: clock.now, ...opts });
  const slotOf = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
  /** Writes what a check read; bumps the health epoch on a role change, as the checker does. */
  const check = (id: string, role: DbRoleCode, lagMs: number, lsn: [number, number] = [0, 0]): void => {
    if (b.ownerTable.db.write(slotOf(id), role, lagMs, lsn[0], lsn[1])) b.ownerTable.epochs.bumpHealth();
  };
  return { b, r, check, slotOf };
}

/** The ids of `n` reads (each released at once). */
function reads(r: Router, n: number, opts: object = {}): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const l = r.acquire({ intent: 'read', ...opts });
    out.push(l.id);
    l.release('success', { latencyMs: 5 });
  }
  return out;
}

describe('acquire({ intent }): role sets', () => {
  it('writes go to the primary only, reads to replicas only, no intent to everyone', () => {
    const { r, check } = fleet(2);
    check('r1', DbRole.Replica, 0);
    check('r2', DbRole.Replica, 0);
    const writes = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const l = r.acquire({ intent: 'write' });
      writes.add(l.id);
      l.release('success', { latencyMs: 5 });
    }
    expect([...writes]).toEqual(['p0']);
    const counts = new Map<string, number>();
    for (const id of reads(r, 2000)) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect(counts.get('p0')).toBeUndefined();
    // p2c over two equal replicas: each gets half; 2000 draws, sd ≈ 22, band ±150 (~7 sd).
    expect(Math.abs(counts.get('r1')! - 1000)).toBeLessThan(150);
    const any = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const l = r.acquire();
      any.add(l.id);
      l.release('success', { latencyMs: 5 });
    }
    expect([...any].sort()).toEqual(['p0', 'r1', 'r2']);
  });

  it('an exact seeded sequence: the same seed replays the same reads', () => {
    const a = fleet(3, { seed: 42 });
    const b = fleet(3, { seed: 42 });
    const c = fleet(3, { seed: 43 });
    const sa = reads(a.r, 64).join(',');
    expect(reads(b.r, 64).join(',')).toBe(sa);
    expect(reads(c.r, 64).join(',')).not.toBe(sa);
    expect(sa).not.toContain('p0');
  });

  it('reads avoid a replica over maxLagMs, and return to it when it catches up (no epoch needed for lag)', () => {
    const { r, check } = fleet(2);
    check('r1', DbRole.Replica, 2500);
    check('r2', DbRole.Replica, 20);
    expect(new Set(reads(r, 500, { maxLagMs: 1000 }))).toEqual(new Set(['r2']));
    // The router default (10 s) admits 2.5 s.
    expect(new Set(reads(r, 500))).toEqual(new Set(['r1', 'r2']));
    check('r1', DbRole.Replica, 0);
    expect(new Set(reads(r, 500, { maxLagMs: 1000 }))).toEqual(new Set(['r1', 'r2']));
  });

  it('every replica behind: the primary (default) or ReplicaLag (readFallback: refuse)', () => {
    const { r, check } = fleet(2);
    check('r1', DbRole.Replica, 5000);
    check('r2', DbRole.Replica, 5000);
    expect(new Set(reads(r, 200, { maxLagMs: 1000 }))).toEqual(new Set(['p0']));
    const strict = fleet(2, { readFallback: 'refuse', maxLagMs: 1000 });
    strict.check('r1', DbRole.Replica, 5000);
    strict.check('r2', DbRole.Replica, 1000);
    // Exactly at the bound qualifies; over it does not.
    expect(new Set(reads(strict.r, 200))).toEqual(new Set(['r2']));
    strict.check('r2', DbRole.Replica, 1001);
    expect(() => strict.r.acquire({ intent: 'read' })).toThrow(expect.objectContaining({ code: 'ReplicaLag' }));
    expect(strict.r.openLeases).toBe(0);
  });

  it('minLsn: only replicas that replayed it, else the primary', () => {
    const { r, check } = fleet(2);
    check('p0', DbRole.Primary, 0, [0x16, 0xb374d900]);
    check('r1', DbRole.Replica, 0, [0x16, 0xb374d848]);
    check('r2', DbRole.Replica, 0, [0x15, 0xffffffff]);
    expect(new Set(reads(r, 200, { minLsn: '16/B374D848' }))).toEqual(new Set(['r1']));
    expect(new Set(reads(r, 200, { minLsn: (0x16n << 32n) | 0xb374d849n }))).toEqual(new Set(['p0']));
    expect(new Set(reads(r, 400, { minLsn: '15/0' }))).toEqual(new Set(['r1', 'r2']));
  });

  it('property: a read with minLsn never returns a replica whose LSN is below it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.nat({ max: 0xffffffff })), { minLength: 1, maxLength: 6 }),
        fc.tuple(fc.integer({ min: 0, max: 3 }), fc.nat({ max: 0xffffffff })),
        fc.integer({ min: 1, max: 1000 }),
        (lsns, min, seed) => {
          const { r, check } = fleet(lsns.length, { seed });
          for (const [i, lsn] of lsns.entries()) check(`r${i + 1}`, DbRole.Replica, 0, lsn);
          const minBig = (BigInt(min[0]) << 32n) | BigInt(min[1]);
          const text = `${min[0].toString(16)}/${min[1].toString(16).toUpperCase()}`;
          for (const id of reads(r, 20, { minLsn: seed % 2 === 0 ? text : minBig })) {
            if (id === 'p0') continue;
            const [hi, lo] = lsns[Number(id.slice(1)) - 1]!;
            expect((BigInt(hi) << 32n) | BigInt(lo)).toBeGreaterThanOrEqual(minBig);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a role change (promotion) moves writes at the next pick; a failed check (unknown role) leaves both sets', () => {
    const { r, check } = fleet(1);
    expect(r.acquire({ intent: 'write' }).id).toBe('p0');
    check('p0', DbRole.Unknown, 0);
    check('r1', DbRole.Primary, 0);
    const l = r.acquire({ intent: 'write' });
    expect(l.id).toBe('r1');
    l.release('success');
    // No replica left: a read falls back to the new primary.
    expect(new Set(reads(r, 50))).toEqual(new Set(['r1']));
    check('r1', DbRole.Unknown, 0);
    expect(() => r.acquire({ intent: 'write' })).toThrow(expect.objectContaining({ code: 'NoEligibleCandidates' }));
    expect(() => r.acquire({ intent: 'read' })).toThrow(expect.objectContaining({ code: 'ReplicaLag' }));
    // No intent: today's behaviour, every backend.
    expect(['p0', 'r1']).toContain(r.acquire().id);
  });

  it('refuses bad intent options, naming the field', () => {
    const { r } = fleet(1);
    expect(() => r.acquire({ intent: 'scan' as 'read' })).toThrow('acquire(options).intent: must be "read" or "write", got "scan"');
    expect(() => r.acquire({ minLsn: '0/1' })).toThrow('acquire(options).minLsn: applies only with intent: "read"');
    expect(() => r.acquire({ intent: 'read', minLsn: '0/' })).toThrow(/^acquire\(options\)\.minLsn: must be an LSN "X\/Y"/);
    expect(() => r.acquire({ intent: 'read', minLsn: '123456789/0' })).toThrow(/^acquire\(options\)\.minLsn/);
    expect(() => r.acquire({ intent: 'read', maxLagMs: -1 })).toThrow(
      'acquire(options).maxLagMs: must be a finite number of ms >= 0, got -1',
    );
    expect(() => r.acquire({ intent: 'write', priority: 0 })).toThrow(/^acquire\(options\)\.priority: cannot be combined with intent/);
    const b = new Balancer({ logger });
    expect(() => b.router({ readFallback: 'replica' as 'primary' })).toThrow(
      'options.readFallback: must be "primary" or "refuse", got "replica"',
    );
    expect(() => b.router({ maxLagMs: Number.NaN })).toThrow(/^options\.maxLagMs: must be a finite number/);
  });

  it('parses LSN text without slicing: halves, bounds, malformed forms', () => {
    const out = new Uint32Array(2);
    expect(parseLsnInto('16/B374D848', out)).toBe(true);
    expect([...out]).toEqual([0x16, 0xb374d848]);
    expect(parseLsnInto('FFFFFFFF/ffffffff', out)).toBe(true);
    expect([...out]).toEqual([0xffffffff, 0xffffffff]);
    for (const bad of ['', '/', '1/', '/1', '1//2', 'G/1', '1/2 ', '100000000/0', '0/100000000'])
      expect(parseLsnInto(bad, out)).toBe(false);
  });
  // Allocation per read with intent, maxLagMs and a text minLsn: test/integration/hot-path-allocation.test.ts (fresh threads).
});
