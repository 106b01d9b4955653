import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FlowController } from '../../src/admission/flow-controller.js';

describe('FlowController', () => {
  it('holds back the lowest band first: a lane is admitted while saturation <= its ceiling', () => {
    // capacity 10, ceilings 1.0 / 0.75 / 0.5: held back once saturation exceeds
    // them, so limits min(10, floor(c × 10) + 1) = 10 / 8 / 6 permits.
    const flow = new FlowController({ capacity: 10, bands: [0, 1, 2], minCeiling: 0.5, maxCeiling: 1 });
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

  it('every band flows on an idle pool, even with a ceiling of 0', () => {
    const flow = new FlowController({ capacity: 1, bands: [1, 0], minCeiling: 0 });
    const p = flow.tryAcquire(0);
    expect(p).toBeDefined();
    expect(flow.tryAcquire(0)).toBeUndefined();
    expect(flow.tryAcquire(1)).toBeUndefined(); // the one permit is taken
    p!.release();
    expect(flow.tryAcquire(1)).toBeDefined();
  });

  it('serves queued waiters most important first, FIFO within a band, exactly once per release', async () => {
    // capacity 4, ceilings 1 / 0.5: limits 4 / 3.
    const flow = new FlowController({ capacity: 4, bands: [0, 1], minCeiling: 0.5 });
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

  it('rejects a full queue, a closed controller and an unknown band with clear codes', async () => {
    const flow = new FlowController({ capacity: 1, bands: [5], minCeiling: 0, maxQueue: 1 });
    flow.tryAcquire(5);
    const waiting = flow.acquire(5);
    await expect(flow.acquire(5)).rejects.toMatchObject({ code: 'Overloaded', message: 'band 5: queue full (1 waiting)' });
    flow.close();
    await expect(waiting).rejects.toMatchObject({ code: 'Overloaded' });
    expect(() => flow.tryAcquire(4)).toThrow('band: must be one of the configured bands (5), got 4');
    expect(() => new FlowController({ capacity: 0, bands: [1], minCeiling: 0 })).toThrow(
      'options.capacity: must be an integer >= 1, got 0',
    );
    expect(() => new FlowController({ capacity: 1, bands: [1, 1], minCeiling: 0 })).toThrow('options.bands: must not repeat 1');
    expect(() => new FlowController({ capacity: 1, bands: [1, Number.NaN], minCeiling: 0 })).toThrow(
      'options.bands[1]: must be a finite number, got NaN',
    );
    expect(() => new FlowController(undefined as never)).toThrow('options: must be an object, got undefined');
  });

  it('an aborted waiter leaves the queue and rejects with the reason', async () => {
    const flow = new FlowController({ capacity: 1, bands: [0], minCeiling: 0 });
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
        const flow = new FlowController({ capacity: 8, bands: [0, 1, 2], minCeiling: 0.25 });
        const limits = new Map(flow.ceilings().map((c) => [c.band, c.limit]));
        const held: { release(): void }[] = [];
        for (const [band, release] of ops) {
          if (release && held.length > 0) held.pop()!.release();
          else {
            const before = flow.inUse;
            const p = flow.tryAcquire(band);
            if (p !== undefined) {
              expect(before + 1).toBeLessThanOrEqual(limits.get(band)!);
              held.push(p);
            } else expect(before + 1).toBeGreaterThan(limits.get(band)!);
          }
          expect(flow.inUse).toBe(held.length);
          expect(flow.inUse).toBeLessThanOrEqual(8);
        }
      }),
    );
  });
});
