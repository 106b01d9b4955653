// 10,000 hedged requests, seeded, on a manual clock, through backend pools
// that play undici's handler protocol (a start, then headers, body and end,
// or an error; an abort ends an attempt with onResponseError at once): 1 %
// of attempts stall a second, 2 % fail, a tenth of the callers abort at a
// random time. Laws: every caller hears exactly one final event, every
// attempt's lease is released exactly once (the outcomes counted equal the
// attempts dispatched), and every lease counter is back at 0.
import { afterEach, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { HttpCounters } from '../../src/http/counters.js';
import { PoiseDispatcher } from '../../src/http/dispatcher.js';
import type { BackendDispatcher } from '../../src/http/pools.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { ManualTimers } from '../helpers/manual-timers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A uniform draw in [0, 1) from the seeded generator. */
function uniform(rng: Rng): number {
  return rng.nextU32() / 2 ** 32;
}

interface Handler {
  onRequestStart(c: unknown, ctx: unknown): void;
  onResponseStart(c: unknown, status: number, headers: Record<string, string>, message: string): void;
  onResponseData(c: unknown, chunk: Buffer): void;
  onResponseEnd(c: unknown, trailers: Record<string, string>): void;
  onResponseError(c: unknown, err: Error): void;
}

/** A backend pool on the manual clock, in undici's new handler API. */
function scriptedPool(timers: ManualTimers, rng: Rng, dispatched: { n: number }): BackendDispatcher {
  return {
    dispatch(_opts: object, h: object): boolean {
      dispatched.n++;
      const handler = h as Handler;
      let finished = false;
      const controller = {
        aborted: false,
        paused: false,
        reason: null as Error | null,
        abort(reason?: Error): void {
          if (finished) return;
          finished = true;
          controller.aborted = true;
          handler.onResponseError(controller, reason ?? new Error('aborted'));
        },
        pause(): void {},
        resume(): void {},
      };
      const stall = uniform(rng) < 0.01;
      const latency = stall ? 1000 : 1 + Math.floor(uniform(rng) * 8);
      const fail = uniform(rng) < 0.02;
      timers.setTimeout(() => {
        if (finished) return;
        handler.onRequestStart(controller, {});
        timers.setTimeout(() => {
          if (finished) return;
          if (fail) {
            finished = true;
            handler.onResponseError(controller, Object.assign(new Error('reset'), { code: 'ECONNRESET' }));
            return;
          }
          handler.onResponseStart(controller, 200, {}, 'OK');
          if (finished) return;
          handler.onResponseData(controller, Buffer.from('ok'));
          if (finished) return;
          finished = true;
          handler.onResponseEnd(controller, {});
        }, latency);
      }, 0);
      return true;
    },
    close: () => Promise.resolve(),
    destroy: () => Promise.resolve(),
    on: () => undefined,
  };
}

describe('hedges, aborts and failures: every lease back once', () => {
  it.each([
    ['a fixed delay', { delayMs: 12 }],
    ['the adaptive delay', { minDelayMs: 2, minSamples: 5 }],
  ] as const)('10,000 seeded requests with %s', async (_name, hedge) => {
    const timers = new ManualTimers();
    const rng = new Rng(0x39);
    const balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
    cleanups.push(() => balancer.close());
    balancer.update(Array.from({ length: 8 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7000 + i}` })));
    const counters = HttpCounters.create({ capacity: balancer.table.capacity });
    const dispatched = { n: 0 };
    const dispatcher = new PoiseDispatcher({
      router: balancer.router({ ejection: { consecutiveFailures: 1_000_000 } }),
      origin: 'http://api',
      counters,
      timers,
      hedge,
      attempts: 3,
      factory: () => scriptedPool(timers, rng, dispatched),
    });
    cleanups.push(() => dispatcher.destroy());
    const finals = new Int32Array(10_000);
    let ok = 0;
    for (let i = 0; i < 10_000; i++) {
      let ctrl: { abort(reason?: Error): void } | undefined;
      dispatcher.dispatch({ origin: 'http://api', path: '/', method: i % 50 === 0 ? 'POST' : 'GET' }, {
        onRequestStart: (c: { abort(reason?: Error): void }) => {
          ctrl = c;
        },
        onResponseStart: () => {},
        onResponseData: () => {},
        onResponseEnd: () => {
          finals[i]!++;
          ok++;
        },
        onResponseError: () => {
          finals[i]!++;
        },
      } as never);
      if (uniform(rng) < 0.1) {
        const at = Math.floor(uniform(rng) * 30);
        timers.setTimeout(() => ctrl?.abort(new Error('caller abort')), at);
      }
      // Ten requests per millisecond.
      if (i % 10 === 9) await timers.advance(1);
    }
    await timers.advance(5_000);
    expect(finals.every((n) => n === 1)).toBe(true);
    let outcomes = 0;
    let requests = 0;
    for (const e of balancer.slotEntries()) {
      const f = counters.figures(e.slot, balancer.table.stats(e.slot).generation);
      outcomes += f.outcomes.reduce((a, b) => a + b, 0);
      requests += balancer.table.requests(e.slot);
    }
    expect(requests).toBe(0);
    expect(outcomes).toBe(dispatched.n);
    const h = dispatcher.hedges;
    // The loop did what it is for: hedges sent, won and lost; most requests answered.
    expect(h.sent).toBeGreaterThan(50);
    expect(h.won).toBeGreaterThan(20);
    expect(h.cancelled).toBeGreaterThan(20);
    expect(ok).toBeGreaterThan(8_000);
    expect(timers.pending).toBe(0);
  });
});
