import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { DbRole, MAX_LAG_MS } from '../../../src/load/db-state.js';
import { S_LSN_SEQ } from '../../../src/load/layout.js';
import { LoadTable } from '../../../src/load/load-table.js';
import { until } from '../../helpers/until.js';

const mix = (k: number): number => Math.imul(k, 0x9e3779b1) >>> 0;

describe('db-state: role, lag and the LSN seqlock', () => {
  it('write reports a role change once; lag saturates; reachedMin compares unsigned halves', () => {
    const t = LoadTable.create({ capacity: 2 });
    expect(t.db.write(1, DbRole.Replica, 12.4, 0x16, 0xb374d848)).toBe(true);
    expect(t.db.write(1, DbRole.Replica, 99, 0x16, 0xb374d849)).toBe(false);
    expect([t.db.role(1), t.db.lagMs(1), t.db.lsn(1)]).toEqual([DbRole.Replica, 99, (0x16n << 32n) | 0xb374d849n]);
    t.db.write(1, DbRole.Replica, Number.POSITIVE_INFINITY, 0, 0);
    expect(t.db.lagMs(1)).toBe(MAX_LAG_MS);
    t.db.write(1, DbRole.Replica, 0, 0xffffffff, 0x80000000);
    expect(t.db.reachedMin(1, Uint32Array.of(0xffffffff, 0x80000000))).toBe(true);
    expect(t.db.reachedMin(1, Uint32Array.of(0xffffffff, 0x80000001))).toBe(false);
    expect(t.db.reachedMin(1, Uint32Array.of(0x7fffffff, 0xffffffff))).toBe(true);
    expect(t.db.setRole(1, DbRole.Unknown)).toBe(true);
    t.db.clear(1);
    expect([t.db.role(1), t.db.lagMs(1), t.db.lsn(1)]).toEqual([DbRole.Unknown, 0, 0n]);
    // A pair being written (odd sequence) reads as unknown: never reached, whatever the words hold.
    const seqWord = t.layout.slot(1) + S_LSN_SEQ;
    const seq = Atomics.load(t.words, seqWord);
    Atomics.store(t.words, seqWord, seq + 1);
    expect([t.db.lsn(1), t.db.reachedMin(1, Uint32Array.of(0, 0))]).toEqual([undefined, false]);
    Atomics.store(t.words, seqWord, seq + 2);
    expect(t.db.reachedMin(1, Uint32Array.of(0, 0))).toBe(true);
    // The neighbour slot is untouched.
    expect([t.db.role(0), t.db.lsn(0)]).toEqual([DbRole.Unknown, 0n]);
  });

  // A soak, not a proof: the window between the owner's two stores is nanoseconds, so a run without the
  // seqlock also passed once (the reader protocol's own law is the deterministic odd-sequence case above).
  it('a reader thread never sees half of two LSN writes, nor an older one, while the owner writes 300,000', async () => {
    const t = LoadTable.create({ capacity: 1 });
    const stop = new SharedArrayBuffer(8);
    const cells = new Int32Array(stop);
    const w = new Worker(new URL('../../fixtures/db-state-reader.mjs', import.meta.url), { workerData: { buffer: t.buffer, stop } });
    const report = new Promise<{ reads: number; unknown: number; torn: number; backwards: number; last: number }>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    t.db.write(0, DbRole.Replica, 0, 1, mix(1));
    await until(() => Atomics.load(cells, 1) > 0, 'the reader reading');
    const N = 300_000;
    for (let k = 2; k <= N; k++) {
      t.db.write(0, DbRole.Replica, 0, k, mix(k));
      if (k % 10_000 === 0) await new Promise((r) => setImmediate(r));
    }
    await until(() => Atomics.load(cells, 1) === N + 1, 'the reader on the last pair');
    Atomics.store(cells, 0, 1);
    const r = await report;
    await w.terminate();
    expect(r.torn).toBe(0);
    expect(r.backwards).toBe(0);
    expect(r.last).toBe(N);
    expect(r.reads - r.unknown).toBeGreaterThan(1000);
  }, 60_000);
});
