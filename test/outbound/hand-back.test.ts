/**
 * The hand-back's sweep (src/outbound/hand-back.ts) on fake sockets, a fake
 * router's excess over the share and an injected clock: which sockets it
 * ends. A late joiner's convergence with real sockets and Redis is
 * test/integration/connection-budget-late-joiner.test.ts.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { HandBack, type HandBackSocket } from '../../src/outbound/hand-back.js';
import type { Router } from '../../src/runtime/router.js';
import { manualClock } from '../helpers/runtime.js';

const IDLE = 100;

function fleet(excess: Map<number, number>) {
  const clock = manualClock(0);
  const router = { overShare: (slot: number) => excess.get(slot) ?? 0 } as unknown as Router;
  const hb = new HandBack(router, IDLE, clock.now);
  const ended: string[] = [];
  const all: HandBackSocket[] = [];
  // The last socket out stops the sweep's timer: nothing left running after the test.
  onTestFinished(() => {
    for (const s of all) hb.delete(s);
  });
  const sock = (name: string, slot: number, lastRead: number, lastWrite: number): HandBackSocket & { name: string } => {
    const s = {
      name,
      slot,
      lastRead,
      lastWrite,
      handBack: () => {
        ended.push(name);
      },
    };
    hb.add(s);
    all.push(s);
    return s;
  };
  return { clock, hb, ended, sock };
}

describe('HandBack.sweep', () => {
  it('ends only sockets idle for idleMs whose last move was a read, at most the excess per slot, each once while it closes', () => {
    const excess = new Map([
      [0, 2],
      [1, 0],
    ]);
    const { clock, hb, ended, sock } = fleet(excess);
    const idle1 = sock('idle1', 0, 0, 0);
    sock('busy', 0, 0, 10); // a query written, its answer not read yet: never cut
    sock('idle2', 0, 5, 0);
    sock('idle3', 0, 5, 0);
    sock('within', 1, 0, 0); // its slot is within its share
    clock.advance(IDLE - 1);
    hb.sweep();
    expect(ended).toEqual([]); // idle1 only 99 ms idle
    clock.advance(10);
    hb.sweep();
    expect(ended).toEqual(['idle1', 'idle2']);
    // The two still closing count against the excess: nothing more.
    hb.sweep();
    expect(ended).toEqual(['idle1', 'idle2']);
    // idle1 closed, and the table says one more over: one more goes.
    hb.delete(idle1);
    excess.set(0, 2);
    hb.sweep();
    expect(ended).toEqual(['idle1', 'idle2', 'idle3']);
    hb.delete(idle1); // twice: no effect
  });

  it('ends nothing without a budget or within the share', () => {
    const { clock, hb, ended, sock } = fleet(new Map());
    for (let k = 0; k < 5; k++) sock(`s${k}`, 0, 0, 0);
    clock.advance(10 * IDLE);
    hb.sweep();
    expect(ended).toEqual([]);
  });
});
