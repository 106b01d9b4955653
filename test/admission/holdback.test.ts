import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { holdbackCeilings } from '../../src/admission/holdback.js';
import { FlowController } from '../../src/admission/flow-controller.js';
import { PoiseError } from '../../src/core/errors.js';

describe('holdbackCeilings', () => {
  it('rank domain: even steps from maxCeiling down to minCeiling (the seed example 0.4..0.9)', () => {
    expect(holdbackCeilings([100, 50, 10], { minCeiling: 0.4, maxCeiling: 0.9 })).toEqual([0.9, 0.65, 0.4]);
    const four = holdbackCeilings([3, 2, 1, 0], { minCeiling: 0.25 });
    expect(four[0]).toBe(1);
    expect(four[1]).toBeCloseTo(0.75, 12);
    expect(four[2]).toBeCloseTo(0.5, 12);
    expect(four[3]).toBe(0.25);
  });

  it('value domain: proportional to the numeric priority within the active range', () => {
    const c = holdbackCeilings([10, 9, 0], { minCeiling: 0, maxCeiling: 1, domain: 'value' });
    expect(c[0]).toBe(1);
    expect(c[1]).toBeCloseTo(0.9, 12);
    expect(c[2]).toBe(0);
  });

  it('one priority gets maxCeiling; none gives an empty list', () => {
    expect(holdbackCeilings([7], { minCeiling: 0.2, maxCeiling: 0.8 })).toEqual([0.8]);
    expect(holdbackCeilings([], { minCeiling: 0.2 })).toEqual([]);
  });

  it('law: ceilings are non-increasing, bounded by [min, max], endpoints exact', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: -1000, max: 1000 }), { minLength: 2, maxLength: 20 }),
        fc.double({ min: 0, max: 0.99, noNaN: true }),
        fc.double({ min: 0.01, max: 1, noNaN: true }),
        (ps, a, b) => {
          const min = Math.min(a, b);
          const max = Math.max(a, b);
          fc.pre(min < 1 && max > 0);
          const desc = [...ps].sort((x, y) => y - x);
          for (const domain of ['rank', 'value'] as const) {
            const c = holdbackCeilings(desc, { minCeiling: min, maxCeiling: max, domain });
            expect(c[0]).toBe(max);
            expect(c[c.length - 1]).toBe(min);
            for (let i = 1; i < c.length; i++) expect(c[i]!).toBeLessThanOrEqual(c[i - 1]! + 1e-12);
            for (const x of c) expect(x >= min - 1e-12 && x <= max + 1e-12).toBe(true);
          }
        },
      ),
    );
  });

  it.each([
    [{ minCeiling: 1 }, 'options.minCeiling: is required and must be a number in [0, 1), got 1'],
    [{} as { minCeiling: number }, 'options.minCeiling: is required and must be a number in [0, 1), got undefined'],
    [{ minCeiling: 0.1, maxCeiling: 0 }, 'options.maxCeiling: must be a number in (0, 1], got 0'],
    [{ minCeiling: 0.6, maxCeiling: 0.5 }, 'options.minCeiling: must not exceed options.maxCeiling (0.5), got 0.6'],
    [{ minCeiling: 0.1, shape: 'cubic' as 'linear' }, 'options.shape: must be "linear", got "cubic"'],
    [{ minCeiling: 0.1, domain: 'log' as 'rank' }, 'options.domain: must be "rank" or "value", got "log"'],
  ])('rejects bad options %#', (opts, message) => {
    expect(() => holdbackCeilings([2, 1], opts)).toThrow(message);
  });

  it('rejects priorities that are not strictly descending, naming the index', () => {
    expect(() => holdbackCeilings([1, 2], { minCeiling: 0 })).toThrow('prioritiesDescending[1]: must be strictly below the previous priority 1, got 2');
    expect(() => holdbackCeilings([3, 3], { minCeiling: 0 })).toThrow(PoiseError);
  });
});

describe('FlowController', () => {
  it('holds back the lowest priority first: a lane is admitted while saturation <= its ceiling', () => {
    // capacity 10, ceilings 1.0 / 0.75 / 0.5: held back once saturation exceeds
    // them, so limits min(10, floor(c × 10) + 1) = 10 / 8 / 6 permits.
    const flow = new FlowController({ capacity: 10, priorities: [0, 1, 2], minCeiling: 0.5, maxCeiling: 1 });
    expect(flow.ceilings().map((c) => c.limit)).toEqual([10, 8, 6]);
    for (let i = 0; i < 6; i++) expect(flow.tryAcquire(0)).toBeDefined(); // saturation 0 .. 0.5 before each
    expect(flow.tryAcquire(0)).toBeUndefined(); // 0.6 > 0.5
    expect(flow.tryAcquire(1)).toBeDefined(); // 0.6 <= 0.75
    expect(flow.tryAcquire(1)).toBeDefined(); // 0.7 <= 0.75
    expect(flow.tryAcquire(1)).toBeUndefined(); // 0.8 > 0.75
    for (let i = 0; i < 2; i++) expect(flow.tryAcquire(2)).toBeDefined();
    expect(flow.tryAcquire(2)).toBeUndefined(); // full: never past capacity
    expect(flow.saturation).toBe(1);
  });

  it('every priority flows on an idle pool, even with a ceiling of 0', () => {
    const flow = new FlowController({ capacity: 1, priorities: [1, 0], minCeiling: 0 });
    const p = flow.tryAcquire(0);
    expect(p).toBeDefined();
    expect(flow.tryAcquire(0)).toBeUndefined();
    expect(flow.tryAcquire(1)).toBeUndefined(); // the one permit is taken
    p!.release();
    expect(flow.tryAcquire(1)).toBeDefined();
  });

  it('serves queued waiters most important first, FIFO within a priority, exactly once per release', async () => {
    // capacity 4, ceilings 1 / 0.5: limits 4 / 3.
    const flow = new FlowController({ capacity: 4, priorities: [0, 1], minCeiling: 0.5 });
    const held = [flow.tryAcquire(1)!, flow.tryAcquire(1)!, flow.tryAcquire(1)!, flow.tryAcquire(1)!];
    const order: string[] = [];
    const w1 = flow.acquire(0).then((p) => (order.push('low-1'), p));
    const w2 = flow.acquire(1).then((p) => (order.push('high-1'), p));
    const w3 = flow.acquire(1).then((p) => (order.push('high-2'), p));
    held[0]!.release();
    held[0]!.release(); // exactly once: no second permit freed
    await Promise.resolve();
    await Promise.resolve();
    expect(order).toEqual(['high-1']);
    held[1]!.release();
    await w3;
    expect(order).toEqual(['high-1', 'high-2']);
    (await w3).release();
    // 3 held: the low lane's limit is 3 (saturation 0.75 > 0.5), so it still waits.
    await Promise.resolve();
    expect(order).toEqual(['high-1', 'high-2']);
    (await w2).release();
    const low = await w1;
    expect(order).toEqual(['high-1', 'high-2', 'low-1']);
    low.release();
    held[2]!.release();
    held[3]!.release();
    expect(flow.inUse).toBe(0);
  });

  it('rejects a full queue, a closed controller and an unknown priority with clear codes', async () => {
    const flow = new FlowController({ capacity: 1, priorities: [5], minCeiling: 0, maxQueue: 1 });
    flow.tryAcquire(5);
    const waiting = flow.acquire(5);
    await expect(flow.acquire(5)).rejects.toMatchObject({ code: 'Overloaded', message: 'priority 5: queue full (1 waiting)' });
    flow.close();
    await expect(waiting).rejects.toMatchObject({ code: 'Overloaded' });
    expect(() => flow.tryAcquire(4)).toThrow('priority: must be one of the configured priorities (5), got 4');
    expect(() => new FlowController({ capacity: 0, priorities: [1], minCeiling: 0 })).toThrow('options.capacity: must be an integer >= 1, got 0');
    expect(() => new FlowController({ capacity: 1, priorities: [1, 1], minCeiling: 0 })).toThrow('options.priorities: must not repeat 1');
    expect(() => new FlowController({ capacity: 1, priorities: [1, Number.NaN], minCeiling: 0 })).toThrow('options.priorities[1]: must be a finite number, got NaN');
    expect(() => new FlowController(undefined as never)).toThrow('options: must be an object, got undefined');
  });

  it('an aborted waiter leaves the queue and rejects with the reason', async () => {
    const flow = new FlowController({ capacity: 1, priorities: [0], minCeiling: 0 });
    const held = flow.tryAcquire(0)!;
    const ac = new AbortController();
    const p = flow.acquire(0, { signal: ac.signal });
    ac.abort(new Error('gave up'));
    await expect(p).rejects.toThrow('gave up');
    held.release();
    expect(flow.inUse).toBe(0);
  });

  it('law: held permits never exceed the capacity and every lane respects its limit at admission', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.boolean()), { maxLength: 200 }), (ops) => {
        const flow = new FlowController({ capacity: 8, priorities: [0, 1, 2], minCeiling: 0.25 });
        const limits = new Map(flow.ceilings().map((c) => [c.priority, c.limit]));
        const held: { release(): void }[] = [];
        for (const [priority, release] of ops) {
          if (release && held.length > 0) held.pop()!.release();
          else {
            const before = flow.inUse;
            const p = flow.tryAcquire(priority);
            if (p !== undefined) {
              expect(before + 1).toBeLessThanOrEqual(limits.get(priority)!);
              held.push(p);
            } else expect(before + 1).toBeGreaterThan(limits.get(priority)!);
          }
          expect(flow.inUse).toBe(held.length);
          expect(flow.inUse).toBeLessThanOrEqual(8);
        }
      }),
    );
  });
});
