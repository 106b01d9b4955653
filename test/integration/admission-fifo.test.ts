// Admission across worker threads is one queue per band: waiters are
// admitted in the order they queued, whichever thread they wait in and
// whichever thread frees the capacity, and more important bands first —
// woken by releases, not by a timer (the gates' poll fallback is 10 minutes
// here). Workers run the build (test/fixtures/admission-fifo-worker.mjs).
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Rng } from '../../dist/src/core/rng.js';
import { AdmissionGate, Balancer, createLogger } from '../../dist/src/runtime.js';
import { until } from '../helpers/until.js';

const WORKER = new URL('../fixtures/admission-fifo-worker.mjs', import.meta.url);
const silent = createLogger({ level: 'silent' });
const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

interface Gate {
  worker: Worker;
  /** Names in the order this worker reported them admitted. */
  admitted: string[];
  post(m: Record<string, unknown>): void;
  /** Resolves when the worker has queued `name`. */
  enqueue(name: string, band?: number): Promise<void>;
}

async function gateWorker(b: Balancer, order: string[]): Promise<Gate> {
  const worker = new Worker(WORKER, { workerData: { attachment: b.attachment() } });
  b.watchWorker(worker);
  const queued = new Map<string, () => void>();
  const g: Gate = {
    worker,
    admitted: [],
    post: (m) => worker.postMessage(m),
    enqueue: (name, band) =>
      new Promise<void>((resolve) => {
        queued.set(name, resolve);
        worker.postMessage({ enqueue: name, band });
      }),
  };
  worker.on('message', (m: { queued?: string; admitted?: string }) => {
    if (m.queued !== undefined) queued.get(m.queued)?.();
    if (m.admitted !== undefined) {
      g.admitted.push(m.admitted);
      order.push(m.admitted);
    }
  });
  await new Promise<void>((resolve) => worker.once('message', () => resolve()));
  cleanup.push(() => worker.terminate());
  return g;
}

describe('admission across threads: one FIFO queue per band', () => {
  it('50 rounds of 8 waiters queued in a random interleaving over 2 worker threads: admitted exactly in queue order, each woken by a release in another thread', async () => {
    const b = new Balancer({ capacity: 4, maxThreads: 8, logger: silent });
    // One unit of capacity: every admission waits for the one before it to be released.
    b.update([{ id: 'only', address: '127.0.0.1:7000', maxInflight: 1 }]);
    cleanup.push(() => b.close());
    const owner = b.router({ policy: 'round-robin', leaseKind: 'request', logger: silent });
    new AdmissionGate(owner, { bands: [2, 1], minCeiling: 0 });
    const order: string[] = [];
    const gates = [await gateWorker(b, order), await gateWorker(b, order)];
    const rng = new Rng(2024);
    for (let round = 0; round < 50; round++) {
      order.length = 0;
      // The owner thread holds the unit while the waiters queue.
      const blocker = owner.acquire();
      const queuedOrder: string[] = [];
      const names: string[] = [];
      for (let k = 0; k < 8; k++) {
        const at = rng.below(2);
        const name = `r${round}-${k}-w${at}`;
        await gates[at]!.enqueue(name);
        queuedOrder.push(name);
        names.push(name);
      }
      // The release in the owner thread (no queue of its own) must go to the oldest waiter, in whichever worker.
      blocker.release('success');
      for (let k = 0; k < 8; k++) {
        await until(() => order.length === k + 1, `admission ${k + 1} of round ${round}`);
        const name = order[k]!;
        const at = Number(name.slice(-1));
        // Released by its own worker: the next one must still be the oldest, in either thread.
        gates[at]!.post({ release: name });
      }
      expect(order).toEqual(queuedOrder);
      await until(() => b.table.requests(0) === 0, 'the unit back');
    }
  }, 120_000);

  it('a waiter of the more important band goes first whichever thread queued it, then the older of the less important band', async () => {
    const b = new Balancer({ capacity: 4, maxThreads: 8, logger: silent });
    b.update([{ id: 'only', address: '127.0.0.1:7000', maxInflight: 1 }]);
    cleanup.push(() => b.close());
    const owner = b.router({ policy: 'round-robin', leaseKind: 'request', logger: silent });
    const order: string[] = [];
    const [a, c] = [await gateWorker(b, order), await gateWorker(b, order)];
    const blocker = owner.acquire();
    await a!.enqueue('low-1', 1);
    await c!.enqueue('low-2', 1);
    await a!.enqueue('low-3', 1);
    await c!.enqueue('high-1', 2);
    blocker.release('success');
    const expected = ['high-1', 'low-1', 'low-2', 'low-3'];
    for (let k = 0; k < expected.length; k++) {
      await until(() => order.length === k + 1, `admission ${k + 1}`);
      const name = order[k]!;
      (a!.admitted.includes(name) ? a! : c!).post({ release: name });
    }
    expect(order).toEqual(expected);
  });
});
