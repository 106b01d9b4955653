// The publication window: the owner has written a membership's slot tags but
// not yet bumped the change epoch that announces them. A router in another
// thread that draws a slot whose tag just changed must not fail the acquire
// ("none of the 1 candidates"): it waits (Atomics.wait on the epoch word,
// at most `publishWaitMs` in all: 5 ms by default, 2 s here so that a loaded
// machine cannot make the window unobservable) for the bump, then rebuilds
// its view and leases.
//
// The window is reproduced exactly, not by timing: the owner's epoch bump is
// held back until the router is seen blocked in that wait (Atomics.notify
// returns how many waiters it woke), and only then released; every round
// caught that way must lease the new member. Before the fix the router
// refused at once ("pick: none of the 1 candidates is eligible").
// Workers run the compiled build (test/fixtures/*.mjs import dist/).
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Balancer, createLogger } from '../../dist/src/runtime.js';
import type { LoadTable } from '../../src/load/load-table.js';

const logger = createLogger({ level: 'silent' });
const FIXTURE = new URL('../fixtures/worker-publish-wait.mjs', import.meta.url);
const workers: Worker[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.terminate()));
});

interface Pick {
  round: number;
  id?: string;
  version?: number;
  error?: string;
}

describe('an acquire inside the owner’s publication window', () => {
  it('waits for the epoch bump and leases the new member, 200 rounds', async () => {
    const ROUNDS = 200;
    const b = new Balancer({ logger, capacity: 8 });
    b.update([{ id: 'm0', address: '127.0.0.1:7000' }]);
    // The owner side of the table (internal: the build strips it from the public types).
    const table = (b as unknown as { ownerTable: LoadTable }).ownerTable;
    const epochs = table.epochs;
    const bump = epochs.bumpMembership.bind(epochs);
    const control = new Int32Array(new SharedArrayBuffer(8));
    /** Per round: whether the router was seen blocked on the epoch before the bump. */
    const seenWaiting: boolean[] = [];
    let round = 0;
    // The owner, held between its tag stores (done) and its epoch bump: tell
    // the router to acquire now, and bump only once it is blocked waiting for
    // the bump (or after 3 s: a late round).
    epochs.bumpMembership = (): number => {
      if (round > 0) {
        Atomics.store(control, 0, round);
        Atomics.notify(control, 0);
        // Poll without sleeping until the router is seen waiting (its wait
        // is bounded at 2 s here).
        let woke = 0;
        const until = performance.now() + 3000;
        while (woke === 0 && performance.now() < until) woke = table.epochs.wake();
        seenWaiting[round] = woke > 0;
      }
      return bump();
    };

    const w = new Worker(FIXTURE, { workerData: { attachment: b.attachment(), control: control.buffer } });
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
    // Round 1 builds the router's view of m0.
    round = 0;
    Atomics.store(control, 0, 1);
    Atomics.notify(control, 0);
    await next(1);
    expect(picks[0]).toMatchObject({ round: 1, id: 'm0' });

    let waited = 0;
    for (let r = 2; r <= ROUNDS + 1 && errors.length === 0; r++) {
      // Replace the one member: its slot's tag changes, then (held back) the epoch.
      round = r;
      const version = b.update([{ id: `m${r}`, address: `127.0.0.1:${7000 + (r % 1000)}` }]);
      await next(r);
      const pick = picks[r - 1]!;
      if (seenWaiting[r] === true) {
        // The law: a router caught inside the window leases the new member.
        waited++;
        expect(pick, `round ${r}`).toEqual({ round: r, id: `m${r}`, version });
      } else {
        // Not caught waiting within 3 s (a loaded machine descheduled one
        // side): either its wait ran out — refused, as bounded — or it
        // drew after the bump.
        expect(
          [
            { round: r, error: 'NoEligibleCandidates' },
            { round: r, id: `m${r}`, version },
          ],
          `round ${r}`,
        ).toContainEqual(pick);
      }
    }
    expect(errors).toEqual([]);
    expect(picks).toHaveLength(ROUNDS + 1);
    // Before the fix a router never waited (it refused at once): no round was caught waiting.
    // With a 2 s bound nearly every round is caught; more than half is far below that.
    expect(waited, `rounds caught waiting, of ${ROUNDS}`).toBeGreaterThan(ROUNDS / 2);
    Atomics.store(control, 1, 1);
    Atomics.store(control, 0, ROUNDS + 2);
    Atomics.notify(control, 0);
  }, 120_000);
});
