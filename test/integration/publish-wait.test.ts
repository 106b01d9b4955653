// The publication window: the owner has written a membership's slot tags but
// not yet bumped the change epoch that announces them. A router in another
// thread that draws a slot whose tag just changed must not fail the acquire
// ("none of the 1 candidates"): it waits (Atomics.wait on the epoch word,
// at most 5 ms in all) for the bump, then rebuilds its view and leases.
//
// The window is reproduced exactly, not by timing: the owner's epoch bump is
// held back until the router is seen blocked in that wait (Atomics.notify
// returns how many waiters it woke), and only then released. Before the fix
// the router refused at once and was never seen waiting.
// Workers run the compiled build (test/fixtures/*.mjs import dist/).
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Balancer, createLogger } from '../../dist/src/runtime.js';
import type { LoadTable } from '../../src/load/load-table.js';

const logger = createLogger({ level: 'silent' });
const FIXTURE = new URL('../fixtures/worker-hammer.mjs', import.meta.url);
const workers: Worker[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.terminate()));
});

/** Sleeps this (owner) thread for `ms` without spinning. */
const nap = (() => {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  return (ms: number): void => void Atomics.wait(cell, 0, 0, ms);
})();

interface Pick {
  round: number;
  id: string;
  version: number;
}

describe('an acquire inside the owner’s publication window', () => {
  it('waits for the epoch bump and leases the new member, 300 times out of 300', async () => {
    const ROUNDS = 300;
    const b = new Balancer({ logger, capacity: 8 });
    b.update([{ id: 'm0', address: '127.0.0.1:7000' }]);
    // The owner side of the table (internal: the build strips it from the public types).
    const table = (b as unknown as { ownerTable: LoadTable }).ownerTable;
    const bump = table.bumpMembershipEpoch.bind(table);
    const control = new Int32Array(new SharedArrayBuffer(8));
    /** Per round: whether the router was seen blocked on the epoch before the bump. */
    const seenWaiting: boolean[] = [];
    let round = 0;
    // The owner, held between its tag stores (done) and its epoch bump: tell
    // the router to acquire now, and bump only once it is blocked waiting for
    // the bump (or after 2 s, which fails the round).
    table.bumpMembershipEpoch = (): number => {
      if (round > 0) {
        Atomics.store(control, 0, round);
        Atomics.notify(control, 0);
        let woke = 0;
        for (let k = 0; k < 20_000 && woke === 0; k++) {
          nap(0.1);
          woke = table.wakeChangeWaiters();
        }
        seenWaiting[round] = woke > 0;
      }
      return bump();
    };

    const w = new Worker(FIXTURE, { workerData: { attachment: b.attachment(), mode: 'follow', control: control.buffer, policy: 'round-robin' } });
    workers.push(w);
    const picks: Pick[] = [];
    const errors: string[] = [];
    let notify: (() => void) | undefined;
    w.on('message', (m: Pick) => {
      picks.push(m);
      notify?.();
    });
    w.on('error', (err) => {
      errors.push(String(err));
      notify?.();
    });
    const next = (n: number) =>
      new Promise<void>((resolve) => {
        notify = () => {
          if (picks.length >= n || errors.length > 0) resolve();
        };
        notify();
      });
    await new Promise<void>((resolve) => w.once('online', () => resolve()));
    // Round 1 builds the router's view of m0 (the fixture holds this first lease).
    round = 0;
    Atomics.store(control, 0, 1);
    Atomics.notify(control, 0);
    await next(1);
    expect(picks[0]).toMatchObject({ round: 1, id: 'm0' });

    for (let r = 2; r <= ROUNDS + 1 && errors.length === 0; r++) {
      // Replace the one member: its slot's tag changes, then (held back) the epoch.
      round = r;
      const version = b.update([{ id: `m${r}`, address: `127.0.0.1:${7000 + (r % 1000)}` }]);
      await next(r);
      expect(errors).toEqual([]);
      expect(seenWaiting[r], `round ${r}: the router was seen waiting for the bump`).toBe(true);
      expect(picks[r - 1]).toEqual({ round: r, id: `m${r}`, weight: 1, version });
    }
    expect(errors).toEqual([]);
    expect(picks).toHaveLength(ROUNDS + 1);
    Atomics.store(control, 1, 1);
    Atomics.store(control, 0, ROUNDS + 2);
    Atomics.notify(control, 0);
  }, 120_000);
});
