// Two worker threads dispatching HTTP through their own routers over one
// shared table: each sees the other's in-flight requests. A thread pins 30
// held requests on one backend (rendezvous, one key); the other thread's
// p2c:requests then never picks that backend (30 in flight there, at most 10
// anywhere else, so it loses every comparison) — it would send it about a
// quarter of its requests if it could not see them. Then the roles swap.
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { fleet, type Fleet } from '../helpers/http-backends.js';
import { until } from '../helpers/until.js';

const WORKER = new URL('../fixtures/http-dispatch-worker.mjs', import.meta.url);
const logger = createLogger({ level: 'silent' });

interface Thread {
  worker: Worker;
  /** Sends n requests; resolves once they are all dispatched, with the promise of their bodies (wrapped: a promise resolved with a promise would wait for it). */
  send(via: 'keyed' | 'p2c', n: number, key?: string): Promise<{ done: Promise<string[]> }>;
}

function thread(balancer: Balancer): Thread {
  const worker = new Worker(WORKER, { workerData: { attachment: balancer.attachment() } });
  balancer.watchWorker(worker);
  return {
    worker,
    send: (via, n, key) =>
      new Promise((resolveSent, reject) => {
        let resolveDone: (b: string[]) => void;
        const done = new Promise<string[]>((r) => {
          resolveDone = r;
        });
        const onMessage = (m: { op: string; bodies?: string[] }): void => {
          if (m.op === 'sent') resolveSent({ done });
          else if (m.op === 'done') {
            worker.off('message', onMessage);
            resolveDone(m.bodies!);
          }
        };
        worker.on('message', onMessage);
        worker.once('error', reject);
        worker.postMessage({ op: 'send', via, n, key });
      }),
  };
}

const threads: Thread[] = [];
let f: Fleet | undefined;
afterAll(async () => {
  await Promise.all(threads.map((t) => t.worker.terminate()));
  await f?.close();
});

describe('PoiseDispatcher in two worker threads over one table', () => {
  it("each thread sees the other's in-flight requests: p2c:requests never picks the backend the other thread loaded", async () => {
    f = await fleet(4);
    const balancer = new Balancer({ logger });
    balancer.update(f.specs());
    const [a, b] = [thread(balancer), thread(balancer)];
    threads.push(a, b);
    const inFlight = (): number =>
      f!.backends.reduce((s, x) => s + balancer.table.requests(balancer.slotEntries().find((e) => e.id === x.id)!.slot), 0);
    for (const [pinner, other, key] of [
      [a, b, 'tenant-1'],
      [b, a, 'tenant-2'],
    ] as const) {
      for (const x of f.backends) x.hold = true;
      const before = new Map(f.backends.map((x) => [x.id, x.seen.length]));
      const pinned = await pinner.send('keyed', 30, key);
      await until(() => f!.backends.reduce((s, x) => s + x.held.length, 0) === 30, '30 requests held');
      const target = f.backends.find((x) => x.held.length === 30)!;
      expect(target).toBeDefined();
      expect(inFlight()).toBe(30);
      const spread = await other.send('p2c', 30);
      await until(() => f!.backends.reduce((s, x) => s + x.held.length, 0) === 60, '60 requests held');
      const got = Object.fromEntries(f.backends.map((x) => [x.id, x.seen.length - before.get(x.id)!]));
      // The pinned backend got exactly the other thread's 30, and none of these.
      expect(got[target.id]).toBe(30);
      const rest = f.backends.filter((x) => x !== target).map((x) => got[x.id]!);
      expect(rest.reduce((s, x) => s + x, 0)).toBe(30);
      for (const x of f.backends) x.release();
      expect((await pinned.done).every((body) => body === target.id)).toBe(true);
      expect((await spread.done).every((body) => body !== target.id)).toBe(true);
      await until(() => inFlight() === 0, 'every lease of both threads released');
    }
  });
});
