/** ConnectionLimit: `maxConnections` across threads (the CAS across real threads: test/net/proxy-workers.test.ts). */
import { describe, expect, it } from 'vitest';
import { ConnectionLimit } from '../../src/net/connection-limit.js';

describe('ConnectionLimit', () => {
  it('without a limit no shared word is ever written: every take succeeds and the buffer stays all zeros', () => {
    const limit = new ConnectionLimit(0, undefined, 1, 2);
    for (let i = 0; i < 1000; i++) expect(limit.tryTake()).toBe(true);
    for (let i = 0; i < 1000; i++) limit.give();
    expect(limit.count).toBe(0);
    expect(limit.reclaim(1)).toBe(0);
    expect([...new Int32Array(limit.buffer)].every((w) => w === 0)).toBe(true);
  });

  it('with a limit the count and the thread row follow takes and gives; a reclaim takes the row back out of the count', () => {
    const buffer = new ConnectionLimit(3, undefined, 0, 2).buffer;
    const a = new ConnectionLimit(3, buffer, 0);
    const b = new ConnectionLimit(3, buffer, 1);
    expect([a.tryTake(), b.tryTake(), b.tryTake(), a.tryTake()]).toEqual([true, true, true, false]);
    expect([a.count, a.held(0), a.held(1)]).toEqual([3, 1, 2]);
    a.give();
    expect(a.count).toBe(2);
    // Thread row 1 died holding 2: the owner takes them back, and the limit admits again.
    expect(a.reclaim(1)).toBe(2);
    expect([a.count, a.held(1)]).toEqual([0, 0]);
    expect([a.tryTake(), a.tryTake(), a.tryTake(), a.tryTake()]).toEqual([true, true, true, false]);
  });
});
