import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EwmaSeries, LeaseKind, LoadTable, SlotState, type LeaseKindCode } from '../../src/load/load-table.js';

describe('LoadTable layout and options', () => {
  it('names a bad option with a PoiseError InvalidConfig', () => {
    expect(() => LoadTable.create({ capacity: -1 })).toThrow(expect.objectContaining({ code: 'InvalidConfig', field: 'options.capacity' }));
    expect(() => LoadTable.create({ capacity: -1 })).toThrow('options.capacity: must be an integer in [1, 65536], got -1');
    expect(() => LoadTable.create({ maxThreads: 256 })).toThrow('options.maxThreads: must be an integer in [1, 255], got 256');
    expect(() => LoadTable.create({ initialMs: Number.NaN })).toThrow(/^options\.initialMs: must be a number in \[0, /);
    expect(() => LoadTable.create({ layout: 'tight' as 'padded' })).toThrow('options.layout: must be "padded" or "unaligned", got "tight"');
  });

  it('attaches to the same memory and refuses a foreign buffer', () => {
    const t = LoadTable.create({ capacity: 4, maxThreads: 2, tauMs: 500, initialMs: 20 });
    const u = LoadTable.attach(t.buffer);
    expect([u.capacity, u.maxThreads, u.tauMs, u.initialMs]).toEqual([4, 2, 500, 20]);
    t.setTag(2, 5, SlotState.Draining);
    expect(u.stats(2)).toMatchObject({ generation: 5, state: SlotState.Draining });
    expect(() => LoadTable.attach(new SharedArrayBuffer(64))).toThrow(expect.objectContaining({ code: 'InvalidConfig', field: 'buffer' }));
    expect(() => LoadTable.attach(new SharedArrayBuffer(64))).toThrow(/is not a LoadTable of layout version/);
    expect(() => LoadTable.attach(new ArrayBuffer(64) as unknown as SharedArrayBuffer)).toThrow(
      expect.objectContaining({ code: 'InvalidConfig' }),
    );
  });

  it('stores weights up to 2^32 − 1 exactly', () => {
    const t = LoadTable.create({ capacity: 1 });
    t.writeFields(0, { weight: 0xffffffff, priority: 0xfffffffe, locality: 3, localityWeight: 0x80000000 });
    expect(t.stats(0)).toMatchObject({ weight: 0xffffffff, priority: 0xfffffffe, locality: 3, localityWeight: 0x80000000 });
  });

  it('round-trips the spec blob under its seqlock and refuses an oversized one', () => {
    const t = LoadTable.create({ capacity: 2, specBytes: 1024 });
    expect(t.readSpecs().length).toBe(0);
    const bytes = new TextEncoder().encode('{"v":1,"s":[]}');
    t.publishSpecs(bytes);
    expect(new TextDecoder().decode(LoadTable.attach(t.buffer).readSpecs())).toBe('{"v":1,"s":[]}');
    expect(t.specSeq() % 2).toBe(0);
    expect(() => t.publishSpecs(new Uint8Array(2000))).toThrow(
      expect.objectContaining({ code: 'CapacityExhausted', message: 'spec blob of 2000 bytes exceeds options.specBytes (1024)' }),
    );
  });
});

describe('PeakEWMA words', () => {
  it('stores microseconds, decays on read with τ, and applies the peak rule', () => {
    const t = LoadTable.create({ capacity: 1, tauMs: 1000, initialMs: 50 });
    t.resetHealth(0, 0);
    expect(t.estimateUs(0, EwmaSeries.Latency, 0)).toBe(50_000);
    expect(t.estimateUs(0, EwmaSeries.Latency, 1000)).toBe(Math.round(50_000 / Math.E));
    expect(t.observe(0, EwmaSeries.Latency, 200, 1000, 0)).toBe(true);
    expect(t.stats(0).latencyEstimateUs).toBe(200_000);
    expect(t.stats(0).connectEstimateUs).toBe(50_000);
    // EWMA branch: 200 decayed over 1 s, blended with 10.
    t.observe(0, EwmaSeries.Latency, 10, 2000, 0);
    const w = Math.exp(-1);
    expect(t.stats(0).latencyEstimateUs).toBe(Math.round((200 * w + 10 * (1 - w)) * 1000));
  });

  it('decays by exactly Math.exp(-dt/τ) for every whole-ms dt, inside and past the lookup table', () => {
    for (const tauMs of [1, 7, 1000, 86_400_000]) {
      const t = LoadTable.create({ capacity: 1, tauMs, initialMs: 50 });
      t.resetHealth(0, 0);
      for (const dt of [1, 2, 3, 17, 999, 1000, 1001, 4094, 4095, 4096, 4097, 10_000, 123_456]) {
        expect(t.estimateUs(0, EwmaSeries.Latency, dt)).toBe(Math.round(50_000 * Math.exp(-dt / tauMs)) | 0);
      }
    }
  });

  it('a writer that died holding the lock is unlocked by reclaimRow; readers never block on it', () => {
    const t = LoadTable.create({ capacity: 2, maxThreads: 4 });
    t.resetHealth(1, 0);
    const row = t.claimRow(41);
    // Simulate death inside observe(): take the lock by hand (low byte = row + 1).
    const i32 = new Int32Array(t.buffer);
    const lockIndex = findWord(i32, t, 1);
    Atomics.store(i32, lockIndex, row + 1);
    expect(t.observe(1, EwmaSeries.Latency, 500, 10, 0)).toBe(false);
    expect(t.estimateUs(1, EwmaSeries.Latency, 0)).toBe(50_000);
    t.reclaimRow(41);
    expect(Atomics.load(i32, lockIndex) & 0xff).toBe(0);
    expect(t.observe(1, EwmaSeries.Latency, 500, 10, 0)).toBe(true);
  });
});

/** The index of slot `slot`'s EWMA lock word, found by the observable effect of a write. */
function findWord(i32: Int32Array, t: LoadTable, slot: number): number {
  const before = Int32Array.from(i32);
  t.observe(slot, EwmaSeries.ConnectTime, 1, 1, 0);
  for (let k = 0; k < i32.length; k++) if (i32[k] !== before[k] && (i32[k]! & 0xff) === 0 && i32[k]! - before[k]! === 0x100) return k;
  throw new Error('lock word not found');
}

describe('counters: random operation sequences equal a model', () => {
  type Op = { op: 'up'; slot: number; kind: LeaseKindCode; row: number } | { op: 'down'; pick: number } | { op: 'reclaim'; row: number };
  const CAP = 4;
  const ROWS = 3;
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({
      op: fc.constant('up' as const),
      slot: fc.nat(CAP - 1),
      kind: fc.constantFrom(LeaseKind.Request, LeaseKind.Connection),
      row: fc.nat(ROWS - 1),
    }),
    fc.record({ op: fc.constant('down' as const), pick: fc.nat() }),
    fc.record({ op: fc.constant('reclaim' as const), row: fc.nat(ROWS - 1) }),
  );

  it('leaseUp / leaseDown / reclaimRow keep slot counters = Σ rows = the model, and the pool totals = Σ slots', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 300 }), (ops) => {
        const t = LoadTable.create({ capacity: CAP, maxThreads: ROWS });
        for (let r = 0; r < ROWS; r++) expect(t.claimRow(100 + r)).toBe(r);
        const open: { slot: number; kind: LeaseKindCode; row: number }[] = [];
        const model = new Int32Array(CAP * 2);
        for (const o of ops) {
          if (o.op === 'up') {
            t.leaseUp(o.slot, o.kind, o.row);
            model[o.slot * 2 + o.kind]!++;
            open.push(o);
          } else if (o.op === 'down') {
            if (open.length === 0) continue;
            const [l] = open.splice(o.pick % open.length, 1);
            t.leaseDown(l!.slot, l!.kind, l!.row);
            model[l!.slot * 2 + l!.kind]!--;
          } else {
            // The thread of row o.row "dies": its leases vanish from the model.
            const mine = open.filter((l) => l.row === o.row);
            const n = t.reclaimRow(100 + o.row);
            expect(n).toBe(mine.length);
            for (const l of mine) model[l.slot * 2 + l.kind]!--;
            open.splice(0, open.length, ...open.filter((l) => l.row !== o.row));
            expect(t.claimRow(100 + o.row)).toBe(o.row);
          }
          for (let s = 0; s < CAP; s++) {
            expect(t.requests(s)).toBe(model[s * 2 + LeaseKind.Request]);
            expect(t.connections(s)).toBe(model[s * 2 + LeaseKind.Connection]);
            for (const kind of [LeaseKind.Request, LeaseKind.Connection] as const) {
              let sum = 0;
              for (let r = 0; r < ROWS; r++) sum += t.rowLeases(r, s, kind);
              expect(sum).toBe(model[s * 2 + kind]);
            }
          }
          let req = 0;
          let conn = 0;
          for (let s = 0; s < CAP; s++) {
            req += model[s * 2 + LeaseKind.Request]!;
            conn += model[s * 2 + LeaseKind.Connection]!;
          }
          expect(t.totalLeases(LeaseKind.Request)).toBe(req);
          expect(t.totalLeases(LeaseKind.Connection)).toBe(conn);
          expect(t.totalOutstanding()).toBe(req + conn);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('claimRow gives distinct rows, finds a thread its own row again, and fails when full', () => {
    const t = LoadTable.create({ capacity: 1, maxThreads: 2 });
    expect(t.claimRow(7)).toBe(0);
    expect(t.claimRow(9)).toBe(1);
    expect(t.claimRow(7)).toBe(0);
    expect(() => t.claimRow(11)).toThrow(
      expect.objectContaining({ code: 'CapacityExhausted', message: 'LoadTable: all 2 thread rows are taken (raise options.maxThreads)' }),
    );
    expect(t.rowsInUse()).toBe(2);
    expect(t.reclaimRow(7)).toBe(0);
    expect(t.claimRow(11)).toBe(0);
    // Rows in use only ever rise: the freed and reclaimed row 0 is below it.
    expect(t.rowsInUse()).toBe(2);
  });

  it('a count covers a row claimed after the reader attached, and no row beyond those in use', () => {
    const t = LoadTable.create({ capacity: 2, maxThreads: 40 });
    const reader = LoadTable.attach(t.buffer);
    expect(reader.rowsInUse()).toBe(0);
    for (let tid = 0; tid < 20; tid++) {
      const row = t.claimRow(1000 + tid);
      expect(row).toBe(tid);
      t.leaseUp(1, LeaseKind.Connection, row);
      t.leaseUp(1, LeaseKind.Request, row);
      t.leaseUp(1, LeaseKind.Request, row);
      // Rows past the first 8 live on the slot's next cache lines: still summed.
      expect([reader.connections(1), reader.requests(1), reader.outstanding(1), reader.rowsInUse()]).toEqual([
        tid + 1,
        2 * (tid + 1),
        3 * (tid + 1),
        tid + 1,
      ]);
      expect(reader.outstanding(0)).toBe(0);
    }
    expect(t.reclaimRow(1007)).toBe(3);
    expect([reader.connections(1), reader.requests(1)]).toEqual([19, 38]);
  });

  it('failures, ejection and wrap-around time', () => {
    const t = LoadTable.create({ capacity: 1 });
    expect(t.addFailure(0)).toBe(1);
    expect(t.addFailure(0)).toBe(2);
    // Times are kept modulo 2^30 and compared by wrapping difference.
    t.eject(0, 2 ** 30 + 50);
    expect(t.stats(0)).toMatchObject({ failures: 0, ejections: 1, ejectedUntilMs: 50 });
    expect(t.ejectedForMs(0, 2 ** 30 - 50)).toBe(100);
    expect(t.ejectedForMs(0, 2 ** 30 + 60)).toBe(0);
    t.clearFailures(0);
    expect(t.ejections(0)).toBe(0);
  });
});
