// A late release racing the owner's slot reuse, with real timing.
// With the release order reversed (load returned before health written) this
// test saw 3 contaminated rounds in 300 on a 2-core VM; 1,000 rounds make a
// regression show with probability > 0.99.
// A worker holds a lease on the only backend; the owner removes it (a
// tombstone) and then tries, in a tight loop, to put a new backend into the
// same slot while the worker releases with a 5,000 ms sample (and, every
// other round, a failure that ejects at the first one). The reuse can only
// succeed once the release has returned its load; the new backend must never
// carry the old one's sample, failure or ejection.
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { Balancer, createLogger } from '../../dist/src/runtime.js';

const logger = createLogger({ level: 'silent' });
const FIXTURE = new URL('../fixtures/worker-late-release.mjs', import.meta.url);
const workers: Worker[] = [];

afterAll(async () => {
  for (const w of workers) await w.terminate();
});

function reply<T>(w: Worker): Promise<T> {
  return new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  });
}

/**
 * Applies `specs` the instant the tombstone's count reads zero (capacity 1: until then the update is refused
 * `CapacityExhausted`); returns how many refusals it spun through.
 */
function updateWhenDrained(b: Balancer, specs: Parameters<Balancer['update']>[0]): number {
  let spins = 0;
  for (;;) {
    try {
      b.update(specs);
      return spins;
    } catch (err) {
      expect(err).toMatchObject({ code: 'CapacityExhausted' });
      if (++spins > 50_000_000) throw new Error('the tombstone never drained');
    }
  }
}

describe('late release vs slot reuse (real threads)', () => {
  it("1,000 races (the issue asks for 300): the slot's next occupant never inherits the old backend's health", async () => {
    const b = new Balancer({ logger, capacity: 1 });
    b.update([{ id: 'r0', address: '127.0.0.1:7000' }]);
    const w = new Worker(FIXTURE, { workerData: { attachment: b.attachment() } });
    workers.push(w);
    b.watchWorker(w);
    const contaminated: string[] = [];
    let spinsTotal = 0;
    for (let round = 0; round < 1000; round++) {
      w.postMessage('acquire');
      expect(await reply<{ id: string }>(w)).toEqual({ id: `r${round}` });
      // Remove it: the slot is a tombstone while the worker's lease is out.
      b.update([]);
      const released = reply<string>(w);
      w.postMessage({ release: round % 2 === 0 ? 'success' : 'failure' });
      // Reuse the slot the instant the tombstone's count reads zero.
      spinsTotal += updateWhenDrained(b, [{ id: `r${round + 1}`, address: `127.0.0.1:${7001 + (round % 100)}` }]);
      expect(await released).toBe('released');
      const st = b.table.stats(0);
      if (st.latencyEstimateUs !== 50_000 || st.failures !== 0 || st.ejections !== 0 || st.ejectedUntilMs !== 0) {
        contaminated.push(`round ${round}: ${JSON.stringify(st)}`);
      }
    }
    expect(contaminated).toEqual([]);
    // The owner really raced the release (it spun while the lease was out).
    expect(spinsTotal).toBeGreaterThan(0);
  }, 120_000);

  // The same race with the same id coming back (a restarted pod, issue 35):
  // a rejoin is a new backend, so with one slot it waits for the tombstone
  // to drain like any newcomer and then starts clean. (Before, the id resumed
  // its tombstone at once, lease and health included.)
  it('1,000 rejoins of the same id racing the late release: the rejoined backend never inherits the old lease', async () => {
    const b = new Balancer({ logger, capacity: 1 });
    const spec = { id: 'r', address: '127.0.0.1:7000' };
    b.update([spec]);
    const w = new Worker(FIXTURE, { workerData: { attachment: b.attachment() } });
    workers.push(w);
    b.watchWorker(w);
    const contaminated: string[] = [];
    let spinsTotal = 0;
    for (let round = 0; round < 1000; round++) {
      w.postMessage('acquire');
      expect(await reply<{ id: string }>(w)).toEqual({ id: 'r' });
      const generation = b.table.stats(0).generation;
      b.update([]);
      const released = reply<string>(w);
      w.postMessage({ release: round % 2 === 0 ? 'success' : 'failure' });
      spinsTotal += updateWhenDrained(b, [spec]);
      expect(await released).toBe('released');
      const st = b.table.stats(0);
      if (
        st.generation === generation ||
        st.latencyEstimateUs !== 50_000 ||
        st.failures !== 0 ||
        st.ejections !== 0 ||
        st.ejectedUntilMs !== 0 ||
        st.connections + st.requests !== 0
      ) {
        contaminated.push(`round ${round}: ${JSON.stringify(st)}`);
      }
    }
    expect(contaminated).toEqual([]);
    expect(spinsTotal).toBeGreaterThan(0);
  }, 120_000);
});
