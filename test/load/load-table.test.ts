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
    t.tags.setTag(2, 5, SlotState.Draining);
    expect(u.stats(2)).toMatchObject({ generation: 5, state: SlotState.Draining });
    expect(() => LoadTable.attach(new SharedArrayBuffer(64))).toThrow(expect.objectContaining({ code: 'InvalidConfig', field: 'buffer' }));
    expect(() => LoadTable.attach(new SharedArrayBuffer(64))).toThrow(/is not a LoadTable of layout version/);
    expect(() => LoadTable.attach(new ArrayBuffer(64) as unknown as SharedArrayBuffer)).toThrow(
      expect.objectContaining({ code: 'InvalidConfig' }),
    );
  });

  it('stats(slot) refuses a slot outside the table instead of reading other words', () => {
    const t = LoadTable.create({ capacity: 4 });
    expect(t.stats(3)).toMatchObject({ generation: 0, state: SlotState.Free });
    for (const bad of [4, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => t.stats(bad)).toThrow(expect.objectContaining({ code: 'InvalidConfig', field: 'slot' }));
    }
    expect(() => t.stats(4)).toThrow('slot: must be an integer in [0, 3], got 4');
  });

  it('round-trips the spec blob under its seqlock and refuses an oversized one', () => {
    const t = LoadTable.create({ capacity: 2, specBytes: 1024 });
    expect(t.specs.read().length).toBe(0);
    const bytes = new TextEncoder().encode('{"v":1,"s":[]}');
    t.specs.publish(bytes);
    expect(new TextDecoder().decode(LoadTable.attach(t.buffer).specs.read())).toBe('{"v":1,"s":[]}');
    expect(t.specs.seq() % 2).toBe(0);
    expect(() => t.specs.publish(new Uint8Array(2000))).toThrow(
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
    expect(t.ewma.observe(0, EwmaSeries.Latency, 200, 1000, 0)).toBe(true);
    expect(t.stats(0).latencyEstimateUs).toBe(200_000);
    expect(t.stats(0).connectEstimateUs).toBe(50_000);
    // EWMA branch: 200 decayed over 1 s, blended with 10.
    t.ewma.observe(0, EwmaSeries.Latency, 10, 2000, 0);
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
    const row = t.leases.claimRow(41);
    // Simulate death inside observe(): take the lock by hand (low byte = row + 1).
    const i32 = new Int32Array(t.buffer);
    const lockIndex = findWord(i32, t, 1);
    Atomics.store(i32, lockIndex, row + 1);
    expect(t.ewma.observe(1, EwmaSeries.Latency, 500, 10, 0)).toBe(false);
    expect(t.estimateUs(1, EwmaSeries.Latency, 0)).toBe(50_000);
    t.reclaimRow(41);
    expect(Atomics.load(i32, lockIndex) & 0xff).toBe(0);
    expect(t.ewma.observe(1, EwmaSeries.Latency, 500, 10, 0)).toBe(true);
  });
});

/** The index of slot `slot`'s EWMA lock word, found by the observable effect of a write. */
function findWord(i32: Int32Array, t: LoadTable, slot: number): number {
  const before = Int32Array.from(i32);
  t.ewma.observe(slot, EwmaSeries.ConnectTime, 1, 1, 0);
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
        for (let r = 0; r < ROWS; r++) expect(t.leases.claimRow(100 + r)).toBe(r);
        const open: { slot: number; kind: LeaseKindCode; row: number }[] = [];
        const model = new Int32Array(CAP * 2);
        for (const o of ops) {
          if (o.op === 'up') {
            t.leases.up(o.slot, o.kind, o.row);
            model[o.slot * 2 + o.kind]!++;
            open.push(o);
          } else if (o.op === 'down') {
            if (open.length === 0) continue;
            const [l] = open.splice(o.pick % open.length, 1);
            t.leases.down(l!.slot, l!.kind, l!.row);
            model[l!.slot * 2 + l!.kind]!--;
          } else {
            // The thread of row o.row "dies": its leases vanish from the model.
            const mine = open.filter((l) => l.row === o.row);
            const n = t.reclaimRow(100 + o.row);
            expect(n).toEqual({ leases: mine.length, pending: 0, uncertain: 0 });
            for (const l of mine) model[l.slot * 2 + l.kind]!--;
            open.splice(0, open.length, ...open.filter((l) => l.row !== o.row));
            expect(t.leases.claimRow(100 + o.row)).toBe(o.row);
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
    expect(t.leases.claimRow(7)).toBe(0);
    expect(t.leases.claimRow(9)).toBe(1);
    expect(t.leases.claimRow(7)).toBe(0);
    expect(() => t.leases.claimRow(11)).toThrow(
      expect.objectContaining({ code: 'CapacityExhausted', message: 'LoadTable: all 2 thread rows are taken (raise options.maxThreads)' }),
    );
    expect(t.rowsInUse()).toBe(2);
    expect(t.reclaimRow(7).leases).toBe(0);
    expect(t.leases.claimRow(11)).toBe(0);
    // Rows in use only ever rise: the freed and reclaimed row 0 is below it.
    expect(t.rowsInUse()).toBe(2);
  });

  it('a count covers a row claimed after the reader attached, and no row beyond those in use', () => {
    const t = LoadTable.create({ capacity: 2, maxThreads: 40 });
    const reader = LoadTable.attach(t.buffer);
    expect(reader.rowsInUse()).toBe(0);
    for (let tid = 0; tid < 20; tid++) {
      const row = t.leases.claimRow(1000 + tid);
      expect(row).toBe(tid);
      t.leases.up(1, LeaseKind.Connection, row);
      t.leases.up(1, LeaseKind.Request, row);
      t.leases.up(1, LeaseKind.Request, row);
      // Rows past the first 8 live on the slot's next cache lines: still summed.
      expect([reader.connections(1), reader.requests(1), reader.outstanding(1), reader.rowsInUse()]).toEqual([
        tid + 1,
        2 * (tid + 1),
        3 * (tid + 1),
        tid + 1,
      ]);
      expect(reader.outstanding(0)).toBe(0);
    }
    expect(t.reclaimRow(1007).leases).toBe(3);
    expect([reader.connections(1), reader.requests(1)]).toEqual([19, 38]);
  });

  it('failures, ejection and wrap-around time', () => {
    const t = LoadTable.create({ capacity: 1 });
    expect(t.health.addFailure(0)).toBe(1);
    expect(t.health.addFailure(0)).toBe(2);
    // Times are kept modulo 2^30 and compared by wrapping difference.
    t.health.eject(0, 2 ** 30 + 50);
    expect(t.stats(0)).toMatchObject({ failures: 0, ejections: 1, ejectedUntilMs: 50 });
    expect(t.ejectedForMs(0, 2 ** 30 - 50)).toBe(100);
    expect(t.ejectedForMs(0, 2 ** 30 + 60)).toBe(0);
    t.health.clearFailures(0);
    expect(t.health.ejections(0)).toBe(0);
  });
});

describe('a thread that dies inside a lease operation: reclaim settles it exactly', () => {
  /**
   * One lease operation of row `row` cut after `steps` of its writes, done by
   * hand on the words as leases.ts does them: (0) the row total, (1) the cell
   * with PENDING, (2) the slot word's add, (3) the cell without PENDING. A
   * terminated worker can stop between any two of them.
   */
  function partial(t: LoadTable, row: number, slot: number, kind: number, delta: 1 | -1, steps: number): void {
    const i = t.words;
    const c = t.layout.cell(row, slot, kind);
    const w = t.layout.slot(slot) + 1 + kind;
    const v = i[c]! + delta;
    if (steps >= 1) i[t.layout.total(row, kind)] = i[t.layout.total(row, kind)]! + delta;
    if (steps >= 2) i[c] = v | (1 << 30);
    if (steps >= 3) Atomics.add(i, w, (1 << 20) + delta);
    if (steps >= 4) Atomics.store(i, c, v);
  }

  it('whatever step it died after, with other rows holding leases on the same slot, the counts are the living rows’ (2,000 cases)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(2), fc.nat(1), fc.constantFrom(LeaseKind.Request, LeaseKind.Connection)), { maxLength: 40 }),
        fc.nat(1),
        fc.constantFrom(LeaseKind.Request, LeaseKind.Connection),
        fc.boolean(),
        fc.nat(4),
        (held, slot, kind, taking, steps) => {
          const t = LoadTable.create({ capacity: 2, maxThreads: 4 });
          for (let r = 0; r < 4; r++) t.leases.claimRow(500 + r);
          // Rows 0–2 live, row 3 will die; every row holds some leases first.
          for (const [row, s, k] of held) t.leases.up(s, k, row);
          t.leases.up(slot, kind, 3);
          t.leases.up(1 - slot, kind, 3);
          const living = (s: number, k: number): number => held.filter(([, hs, hk]) => hs === s && hk === k).length;
          // Row 3 dies part-way through one more take, or through returning one it holds.
          partial(t, 3, slot, kind, taking ? 1 : -1, steps);
          const r = t.reclaimRow(503);
          for (let s = 0; s < 2; s++) {
            for (const k of [LeaseKind.Request, LeaseKind.Connection]) {
              const count = k === LeaseKind.Request ? t.requests(s) : t.connections(s);
              expect(count, `slot ${s} kind ${k}`).toBe(living(s, k));
            }
          }
          expect(r.pending).toBe(steps === 2 || steps === 3 ? 1 : 0);
          expect(r.uncertain).toBe(0);
          // The totals of the living rows are exactly what they hold.
          expect(t.totalOutstanding()).toBe(held.length);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('a cell left PENDING by a second dead row that is not reclaimed yet: counted as done, reported uncertain', () => {
    const t = LoadTable.create({ capacity: 1, maxThreads: 3 });
    for (let r = 0; r < 3; r++) t.leases.claimRow(600 + r);
    t.leases.up(0, LeaseKind.Request, 0);
    partial(t, 1, 0, LeaseKind.Request, 1, 3); // died after its add, before clearing PENDING
    partial(t, 2, 0, LeaseKind.Request, 1, 2); // died before its add
    const r1 = t.reclaimRow(601);
    expect(r1).toEqual({ leases: 1, pending: 1, uncertain: 1 });
    // Row 2 is reclaimed next: now row 1 is gone and row 2 settles exactly.
    expect(t.reclaimRow(602)).toEqual({ leases: 0, pending: 1, uncertain: 0 });
    expect(t.requests(0)).toBe(1);
  });
});
