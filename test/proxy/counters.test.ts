/** ProxyCounters: 64-bit counters from two 32-bit words, per-worker rows, histogram placement (summed across real threads: test/integration/proxy-counters-threads). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { DURATION_BUCKETS_SECONDS, ProxyCounter, ProxyCounters, REFUSAL_REASONS } from '../../src/proxy/counters.js';

describe('ProxyCounters', () => {
  it('a counter carries past 2^32 into its high word: the sum of any additions reads back exactly', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffffffff }), { minLength: 1, maxLength: 12 }), (adds) => {
        const c = ProxyCounters.create();
        for (const n of adds) c.bytes(0, ProxyCounter.BytesOut, n);
        expect(c.value(0, ProxyCounter.BytesOut)).toBe(adds.reduce((a, n) => a + n, 0));
      }),
      { numRuns: 200 },
    );
  });

  it('refusals count by reason; active is opened minus closed', () => {
    const c = ProxyCounters.create({ workers: 2 });
    REFUSAL_REASONS.forEach((r, i) => {
      for (let k = 0; k <= i; k++) c.refused(1, r);
    });
    REFUSAL_REASONS.forEach((r, i) => {
      expect(c.refusals(r)).toBe(i + 1);
    });
    c.opened(0);
    c.opened(0);
    c.opened(1);
    c.closed(0, 5, false);
    expect([c.active(0), c.active(1), c.active()]).toEqual([1, 1, 2]);
  });

  it('stats() is a fold of the events: any sequence of accepts, holds, refusals, header timeouts, bytes and splices reads back as the model says, per row and summed', () => {
    type Ev =
      | { k: 'accept' | 'hold' | 'unhold' | 'open' | 'headerTimeout'; w: number }
      | { k: 'refuse'; w: number; r: (typeof REFUSAL_REASONS)[number] }
      | { k: 'close'; w: number; idle: boolean }
      | { k: 'in' | 'out'; w: number; n: number };
    const w = fc.integer({ min: 0, max: 2 });
    const ev: fc.Arbitrary<Ev> = fc.oneof(
      fc.record({
        k: fc.constantFrom('accept' as const, 'hold' as const, 'unhold' as const, 'open' as const, 'headerTimeout' as const),
        w,
      }),
      fc.record({ k: fc.constant('refuse' as const), w, r: fc.constantFrom(...REFUSAL_REASONS) }),
      fc.record({ k: fc.constant('close' as const), w, idle: fc.boolean() }),
      fc.record({ k: fc.constantFrom('in' as const, 'out' as const), w, n: fc.integer({ min: 0, max: 0xffffffff }) }),
    );
    fc.assert(
      fc.property(fc.array(ev, { maxLength: 60 }), (events) => {
        const c = ProxyCounters.create({ workers: 3 });
        const zero = { accepted: 0, held: 0, active: 0, failed: 0, localErrors: 0, timeouts: 0, badHeaders: 0, bytesIn: 0, bytesOut: 0 };
        const model = [0, 1, 2].map(() => ({ ...zero }));
        for (const e of events) {
          const m = model[e.w]!;
          switch (e.k) {
            case 'accept':
              c.accepted(e.w);
              m.accepted++;
              break;
            case 'hold':
              c.held(e.w, 1);
              m.held++;
              break;
            case 'unhold':
              c.held(e.w, -1);
              m.held--;
              break;
            case 'open':
              c.opened(e.w);
              m.active++;
              break;
            case 'headerTimeout':
              c.headerTimeout(e.w);
              m.timeouts++;
              break;
            case 'close':
              c.closed(e.w, 3, e.idle);
              m.active--;
              if (e.idle) m.timeouts++;
              break;
            case 'in':
              c.bytes(e.w, ProxyCounter.BytesIn, e.n);
              m.bytesIn += e.n;
              break;
            case 'out':
              c.bytes(e.w, ProxyCounter.BytesOut, e.n);
              m.bytesOut += e.n;
              break;
            case 'refuse':
              c.refused(e.w, e.r);
              // `failed`: the refusals of a connect or of admission (not a bad header, the client's abort, an internal error or the shutdown).
              if (['no_backend', 'local_error', 'max_connections', 'timeout'].includes(e.r)) m.failed++;
              if (e.r === 'local_error') m.localErrors++;
              if (e.r === 'bad_header') m.badHeaders++;
              break;
          }
        }
        for (const [i, m] of model.entries()) expect(c.stats(i, 1), `row ${i}`).toEqual(m);
        const sum = { ...zero };
        for (const m of model) for (const k of Object.keys(zero) as (keyof typeof zero)[]) sum[k] += m[k];
        expect(c.stats()).toEqual(sum);
        expect(c.stats(1, 2)).toEqual(
          Object.fromEntries(Object.keys(zero).map((k) => [k, model[1]![k as keyof typeof zero] + model[2]![k as keyof typeof zero]])),
        );
      }),
      { numRuns: 300 },
    );
  });

  it('a duration lands in the first bucket whose bound is >= it (bounds inclusive, le semantics); past the last it is +Inf', () => {
    const c = ProxyCounters.create();
    const bounds = DURATION_BUCKETS_SECONDS;
    for (const s of bounds) c.closed(0, s * 1000, false); // exactly on each bound
    c.closed(0, (bounds[bounds.length - 1]! + 1) * 1000, false);
    c.closed(0, 0, false);
    const counts = c.durationBuckets();
    expect(counts[0]).toBe(2); // 0 and the first bound
    for (let k = 1; k < bounds.length; k++) expect(counts[k], `bucket ${k}`).toBe(1);
    expect(counts[bounds.length]).toBe(1);
    expect(c.total(ProxyCounter.DurationSumUs)).toBe(
      Math.round(bounds.reduce((a, s) => a + s, 0) * 1e6) + (bounds[bounds.length - 1]! + 1) * 1e6,
    );
  });

  it('TcpProxy counts into the counters and row it is given, and refuses anything else naming the option', () => {
    const b = new Balancer({ logger: createLogger({ level: 'silent' }) });
    b.update([{ id: 'a', address: '127.0.0.1:1' }]);
    const router = b.router();
    const counters = ProxyCounters.create({ workers: 2 });
    const p = new TcpProxy({ router, counters, worker: 1 });
    expect(p.counters).toBe(counters);
    expect(p.worker).toBe(1);
    expect(new TcpProxy({ router }).counters.workers).toBe(1);
    expect(() => new TcpProxy({ router, counters: {} as ProxyCounters })).toThrow('options.counters: must be a ProxyCounters');
    expect(() => new TcpProxy({ router, counters, worker: 2 })).toThrow('options.worker');
    expect(() => new TcpProxy({ router, worker: 1 })).toThrow('options.worker');
    b.close();
  });

  it('refuses a bad row count, a row out of range and a foreign buffer, naming them', () => {
    expect(() => ProxyCounters.create({ workers: 0 })).toThrow('options.workers');
    expect(() => ProxyCounters.create({ workers: 2 }).checkWorker(2, 'options.worker')).toThrow('options.worker');
    expect(() => ProxyCounters.attach(new SharedArrayBuffer(64))).toThrow('buffer: is not a ProxyCounters buffer');
    expect(() => ProxyCounters.attach(new ArrayBuffer(64) as unknown as SharedArrayBuffer)).toThrow('must be a SharedArrayBuffer');
  });
});
