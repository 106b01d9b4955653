/**
 * The hot path allocates nothing after warm-up: acquireHandle + releaseHandle
 * with every runtime policy, each measured in several fresh worker threads
 * (V8 decides inlining per thread, and a number boxed by a call that happened
 * not to be inlined shows only in some threads: a Maglev key hash returned as
 * a uint32 cost 8 bytes per pick in 2 of 8 fresh threads before it was
 * returned as an int32). One boxed number per op is 12–16 bytes (one per
 * two ops 6–8). Below that there is a floor that is not the hot path's: every
 * policy, round-robin included, reads 0.07–0.75 bytes per op on a quiet
 * machine (Node 20 and 26) and more when the thread is slowed, because it is
 * allocated per millisecond, not per op (3 CPU burners beside the probe:
 * 0.14 → 0.35–0.56; a loaded fresh-clone CI run, Node 26: 1.02 for
 * rendezvous in 1 of 8 threads). The bound of 4 bytes sits above that
 * floor and below a boxed number in every other op.
 */
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { DbRole, type DbRoleCode } from '../../src/load/db-state.js';
import { Balancer, createLogger } from '../../src/runtime.js';
import { KEYED_POLICY_NAMES, POLICY_NAMES, type PolicyName } from '../../src/runtime/policies.js';

const logger = createLogger({ level: 'silent' });
/** Bytes per op at or above which an op allocates (the header says why not 1). */
const BOUND = 4;

function probe(b: Balancer, policy: string, latencyRatio?: number, acquireOpts?: object): Promise<number> {
  const w = new Worker(new URL('../fixtures/heap-probe.mjs', import.meta.url), {
    workerData: { attachment: b.attachment(), policy, latencyRatio, chunkOps: 10_000, chunks: 21, acquireOpts },
  });
  return new Promise<number>((resolve, reject) => {
    w.once('message', (m: { bytesPerOp: number }) => resolve(m.bytesPerOp));
    w.once('error', reject);
  }).finally(() => w.terminate());
}

describe('hot path allocation (acquireHandle + releaseHandle, fresh worker threads)', () => {
  // p2c:latency's tail rule (latencyRatio) reads the latency mean too: a case of its own.
  const cases: [PolicyName, number | undefined][] = [
    ...POLICY_NAMES.map((p): [PolicyName, undefined] => [p, undefined]),
    ['p2c:latency', 2],
  ];
  for (const [policy, latencyRatio] of cases) {
    const threads = KEYED_POLICY_NAMES.includes(policy) ? 8 : 2;
    const name = latencyRatio === undefined ? policy : `${policy} latencyRatio ${latencyRatio}`;
    it(`${name}: under ${BOUND} bytes per op in each of ${threads} fresh threads`, { timeout: 120_000 }, async () => {
      const b = new Balancer({ logger, capacity: 64 });
      try {
        b.update(Array.from({ length: 8 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${20_000 + i}`, weight: 1 + (i % 3) })));
        const bytes: number[] = [];
        for (let t = 0; t < threads; t++) bytes.push(await probe(b, policy, latencyRatio));
        expect(bytes.filter((x) => x >= BOUND)).toEqual([]);
        // Every lease was released: the measurement itself left no load behind.
        expect(b.table.totalOutstanding()).toBe(0);
      } finally {
        b.close();
      }
    });
  }

  // A database read: the replica role set, the lag bound and a text minLsn parsed per acquire (moved here from the unit
  // project, whose forks share JIT state across files: a pick made polymorphic by other files boxed numbers there).
  it(`p2c:latency reads with intent, maxLagMs and a text minLsn: under ${BOUND} bytes per op in each of 2 fresh threads`, {
    timeout: 120_000,
  }, async () => {
    const b = new Balancer({ logger, capacity: 64 });
    try {
      b.update([
        { id: 'p0', address: '127.0.0.1:7000', role: 'primary' },
        ...[1, 2, 3].map((i) => ({ id: `r${i}`, address: `127.0.0.1:${7000 + i}`, role: 'replica' as const })),
      ]);
      const slot = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
      const roles: [string, DbRoleCode, number, number, number][] = [
        ['p0', DbRole.Primary, 0, 1, 0],
        ['r1', DbRole.Replica, 50, 1, 0],
        ['r2', DbRole.Replica, 5000, 1, 0],
        ['r3', DbRole.Replica, 0, 0, 5],
      ];
      for (const [id, role, lag, hi, lo] of roles) if (b.ownerTable.db.write(slot(id), role, lag, hi, lo)) b.ownerTable.epochs.bumpHealth();
      const bytes: number[] = [];
      for (let t = 0; t < 2; t++) bytes.push(await probe(b, 'p2c:latency', undefined, { intent: 'read', maxLagMs: 1000, minLsn: '1/0' }));
      expect(bytes.filter((x) => x >= BOUND)).toEqual([]);
      expect(b.table.totalOutstanding()).toBe(0);
    } finally {
      b.close();
    }
  });

  // `probe` above runs without a probe pool (its p2c:latency fallback); here every pick reads answers and runs the hot-cold rule.
  it(`probe with fresh answers (the sample's quantile, no pool threshold): under ${BOUND} bytes per op in each of 2 fresh threads`, {
    timeout: 120_000,
  }, async () => {
    const b = new Balancer({ logger, capacity: 64 });
    try {
      b.update(Array.from({ length: 8 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${20_000 + i}` })));
      const probes = b.ownerTable.probes;
      probes.configure({ maxAgeMs: 86_400_000, maxUses: 1_000_000_000, quantile: 0.75, sample: 5 });
      probes.setColdInflight(-1);
      const now = (b as unknown as { clock: () => number }).clock() & 0x3fffffff;
      for (let s = 0; s < 8; s++) probes.record(s, s % 4, 1000 + 100 * s, now, true);
      const bytes: number[] = [];
      for (let t = 0; t < 2; t++) bytes.push(await probe(b, 'probe'));
      expect(bytes.filter((x) => x >= BOUND)).toEqual([]);
      // The answers were used (the rule ran, not the fallback).
      const reading = { inflight: 0, latencyUs: 0, ageMs: 0, uses: 0 };
      let uses = 0;
      for (let s = 0; s < 8; s++) if (probes.read(s, now, reading)) uses += reading.uses;
      expect(uses).toBeGreaterThan(100_000);
      expect(b.table.totalOutstanding()).toBe(0);
    } finally {
      b.close();
    }
  });

  // The aperture is applied at view builds: a slice with fractional boundary weights changes nothing on the pick path.
  for (const policy of ['weighted', 'p2c', 'smooth-weighted'] as const) {
    it(`${policy} inside an aperture slice (rank 1 of 5, width 0.34): under ${BOUND} bytes per op in each of 2 fresh threads`, {
      timeout: 120_000,
    }, async () => {
      const b = new Balancer({ logger, capacity: 64 });
      try {
        b.update(Array.from({ length: 12 }, (_, i) => ({ id: `b${String(i).padStart(2, '0')}`, address: `127.0.0.1:${20_000 + i}` })));
        b.ownerTable.aperture.configure(0.34);
        b.ownerTable.aperture.setCoordinate(1, 5);
        b.ownerTable.epochs.bumpHealth();
        const bytes: number[] = [];
        for (let t = 0; t < 2; t++) bytes.push(await probe(b, policy));
        expect(bytes.filter((x) => x >= BOUND)).toEqual([]);
        expect(b.table.totalOutstanding()).toBe(0);
      } finally {
        b.close();
      }
    });
  }
});
