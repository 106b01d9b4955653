import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RatioRetryBudget } from '../../src/runtime/retry-budget.js';
import { manualClock } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';

describe('RatioRetryBudget', () => {
  it('grants one retry per 1 / ratio requests, and none before (no reserve)', () => {
    const clock = manualClock(0);
    const budget = new RatioRetryBudget({ ratio: 0.2, minRetriesPerSecond: 0, clock: clock.now });
    const granted: boolean[] = [];
    for (let i = 1; i <= 20; i++) {
      budget.onRequest();
      granted.push(budget.tryRetry());
    }
    // 5 requests deposit one retry: the 5th, 10th, 15th and 20th ask succeed.
    expect(granted.map((g, i) => (g ? i + 1 : 0)).filter((i) => i > 0)).toEqual([5, 10, 15, 20]);
    expect(budget.available()).toBe(0);
  });

  it('the floor allows minRetriesPerSecond × ttl retries with no traffic, and no more', () => {
    const clock = manualClock(0);
    const budget = new RatioRetryBudget({ minRetriesPerSecond: 3, ttlMs: 2000, clock: clock.now });
    expect(budget.available()).toBe(6);
    const granted = Array.from({ length: 10 }, () => budget.tryRetry()).filter(Boolean).length;
    expect(granted).toBe(6);
  });

  it('requests and retries expire after ttlMs: a burst of failures later gets the floor back, not old requests', () => {
    const clock = manualClock(0);
    const budget = new RatioRetryBudget({ ratio: 0.5, minRetriesPerSecond: 1, ttlMs: 1000, clock: clock.now });
    for (let i = 0; i < 100; i++) budget.onRequest();
    // max(floor 1, 100 × 0.5): the floor is a minimum, not added (Envoy's and the rule)
    expect(budget.available()).toBe(50);
    for (let i = 0; i < 50; i++) expect(budget.tryRetry()).toBe(true);
    expect(budget.tryRetry()).toBe(false);
    clock.advance(999);
    expect(budget.tryRetry()).toBe(false);
    // The bucket of those requests and retries is a full ttl old: only the floor is left.
    clock.advance(100);
    expect(budget.available()).toBe(1);
  });

  it('in every window, retries granted = what the model of the window allows (property, exact model)', () => {
    // The model keeps every event with its bucket (ttl / 10) and, for each
    // ask, grants iff max(floor, ratio × requests) − retries over the last
    // 10 buckets allows one more retry: the budget must answer the same.
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 }).map((r) => r / 10),
        fc.integer({ min: 0, max: 5 }),
        fc.array(fc.oneof(fc.constant<'req'>('req'), fc.constant<'retry'>('retry'), fc.integer({ min: 1, max: 700 })), { maxLength: 400 }),
        (ratio, perSecond, ops) => {
          const clock = manualClock(0);
          const ttlMs = 1000;
          const budget = new RatioRetryBudget({ ratio, minRetriesPerSecond: perSecond, ttlMs, clock: clock.now });
          const events: { bucket: number; kind: 'req' | 'retry' }[] = [];
          const floor = perSecond * (ttlMs / 1000);
          for (const op of ops) {
            const bucket = Math.floor(clock.now() / (ttlMs / 10));
            if (typeof op === 'number') clock.advance(op);
            else if (op === 'req') {
              budget.onRequest();
              events.push({ bucket, kind: 'req' });
            } else {
              const live = events.filter((e) => e.bucket > bucket - 10);
              const requests = live.filter((e) => e.kind === 'req').length;
              const retries = live.length - requests;
              // In tenths of a retry, integers only: max(10 × floor, 10 × ratio × requests) − 10 × retries ≥ 10.
              const expected = Math.max(10 * floor, Math.round(ratio * 10) * requests) - 10 * retries >= 10;
              expect(budget.tryRetry()).toBe(expected);
              if (expected) events.push({ bucket, kind: 'retry' });
            }
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('refuses bad options naming the field', () => {
    expect(thrown(() => new RatioRetryBudget({ ratio: 1.5 })).message).toBe('retryBudget.ratio: must be a number in [0, 1], got 1.5');
    expect(thrown(() => new RatioRetryBudget({ minRetriesPerSecond: -1 })).message).toBe(
      'retryBudget.minRetriesPerSecond: must be a finite number >= 0, got -1',
    );
    expect(thrown(() => new RatioRetryBudget({ ttlMs: 5 })).message).toBe('retryBudget.ttlMs: must be an integer in [10, 3600000], got 5');
    expect(thrown(() => new RatioRetryBudget({ ratoi: 0.1 } as never)).message).toBe(
      'retryBudget.ratoi: unknown option (accepted: ratio, minRetriesPerSecond, ttlMs, clock)',
    );
  });
});
