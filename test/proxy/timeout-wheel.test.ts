import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TimeoutWheel, type WheelEntry } from '../../src/proxy/timeout-wheel.js';
import { ManualTimers } from '../helpers/manual-timers.js';

function entry(due: () => number, fired: Array<[number, number]>, id: number): WheelEntry {
  return { wheelBucket: -1, deadline: due, expire: (now) => void fired.push([id, now]) };
}

describe('TimeoutWheel', () => {
  it('fires every entry once, between its deadline and its deadline plus one tick, for any deadlines and activity (hand-driven clock)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 3000 })), { minLength: 1, maxLength: 40 }),
        (tick, specs) => {
          let now = 0;
          let running = 0;
          const wheel = new TimeoutWheel({ tickMs: tick, buckets: 8, clock: () => now, schedule: () => (running++, () => running--) });
          const fired: Array<[number, number]> = [];
          // Each entry: a deadline, pushed later once by "activity" at `bump` ms.
          const dues = specs.map(([d]) => d + 1);
          specs.forEach((_spec, i) => {
            wheel.add(entry(() => dues[i]!, fired, i));
          });
          expect(running).toBe(1);
          for (now = 0; now <= 9000; now += tick) {
            specs.forEach(([d, bump], i) => {
              if (now === Math.floor(bump / tick) * tick && bump < d) dues[i] = d + 1 + bump;
            });
            wheel.tick();
          }
          expect(fired.map(([i]) => i).sort((a, b) => a - b)).toEqual(specs.map((_, i) => i));
          for (const [i, at] of fired) {
            expect(at).toBeGreaterThanOrEqual(dues[i]!);
            expect(at).toBeLessThan(dues[i]! + tick);
          }
          expect(wheel.count).toBe(0);
          expect(running).toBe(0); // the interval stops when the wheel empties
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a removed entry never fires; an Infinity deadline waits until it becomes finite', () => {
    let now = 0;
    const wheel = new TimeoutWheel({ tickMs: 10, buckets: 4, clock: () => now, schedule: () => () => {} });
    const fired: Array<[number, number]> = [];
    const gone = entry(() => 50, fired, 1);
    let later = Infinity;
    const waiting = entry(() => later, fired, 2);
    wheel.add(gone);
    wheel.add(waiting);
    wheel.remove(gone);
    for (now = 0; now <= 500; now += 10) wheel.tick();
    expect(fired).toEqual([]);
    later = 600;
    for (; now <= 700; now += 10) wheel.tick();
    expect(fired).toEqual([[2, 600]]);
  });

  it('on an injected TimerSource: its clock and its timers drive the wheel, one timer armed while the wheel holds an entry', async () => {
    const timers = new ManualTimers(1000);
    const wheel = new TimeoutWheel({ tickMs: 10, buckets: 8, timers });
    const fired: Array<[number, number]> = [];
    expect(timers.pending).toBe(0);
    wheel.add(entry(() => 1095, fired, 1));
    wheel.add(entry(() => 1200, fired, 2));
    expect(timers.pending).toBe(1);
    await timers.advance(94);
    expect(fired).toEqual([]);
    await timers.advance(6);
    expect(fired).toEqual([[1, 1100]]);
    expect(wheel.now).toBe(1100);
    await timers.advance(100);
    expect(fired).toEqual([
      [1, 1100],
      [2, 1200],
    ]);
    // Empty again: the tick timer is cleared, nothing is pending.
    expect(wheel.count).toBe(0);
    expect(timers.pending).toBe(0);
    await timers.advance(10_000);
    expect(fired).toHaveLength(2);
  });
});
