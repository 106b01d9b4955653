/** ConnectionLimit: `maxConnections` across threads (real threads terminated at random moments: test/integration/proxy/connection-limit-threads.test.ts; the CAS across proxy workers: test/integration/proxy/workers.test.ts). */
import { describe, expect, it } from 'vitest';
import { ConnectionLimit } from '../../src/proxy/connection-limit.js';

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

describe('ConnectionLimit: a dead row caught between its mark and the shared count', () => {
  // Words: 0 count (low 20 bits), 16 + r the rows; bit 30 marks a row whose thread was changing count.
  const PENDING = 1 << 30;
  const setup = (count: number, rows: number[]): ConnectionLimit => {
    const limit = new ConnectionLimit(8, undefined, 0, rows.length);
    const w = new Int32Array(limit.buffer);
    w[0] = count;
    for (const [r, v] of rows.entries()) w[16 + r] = v;
    return limit;
  };

  it('is settled exactly by the other rows when nothing else moves: a take that landed, a take that did not, a give that landed, one that did not', () => {
    // Row 0 holds 2 (still). Row 1 marked with 1 (the lower of before and after) in each of the four states.
    expect(setup(2 + 2, [2, 1 | PENDING]).reclaim(1)).toBe(2); // take from 1 landed: count has 1 + 1
    expect(setup(2 + 1, [2, 1 | PENDING]).reclaim(1)).toBe(1); // take from 1 not yet
    expect(setup(2 + 1, [2, 1 | PENDING]).reclaim(1)).toBe(1); // give from 2 landed
    const notYet = setup(2 + 2, [2, 1 | PENDING]); // give from 2 not yet
    expect(notYet.reclaim(1)).toBe(2);
    expect([notYet.count, notYet.held(1)]).toEqual([2, 0]);
  });

  it('left unsettled (another row marked for good) takes the lower value: at worst one slot leaks, none is freed twice', () => {
    // Row 2 is marked forever (a second dead thread not reclaimed yet): no collect can settle row 1.
    const gaveAlready = setup(2 + 1, [2, 1 | PENDING, 0 | PENDING]);
    expect(gaveAlready.reclaim(1)).toBe(1);
    expect(gaveAlready.count).toBe(2);
    const notYet = setup(2 + 2, [2, 1 | PENDING, 0 | PENDING]);
    expect(notYet.reclaim(1)).toBe(1);
    expect(notYet.count).toBe(3); // one leaked (row 0 holds 2): never below what the living hold
  });
});
