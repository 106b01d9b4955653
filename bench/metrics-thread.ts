/**
 * One router thread of bench/metrics.ts: acquire + release on its own Router
 * until `stop[0]` is set, counting pairs; posts the count.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '../src/log.js';
import { Router, type RouterAttachment } from '../src/runtime/router.js';

const { attachment, stop } = workerData as { attachment: RouterAttachment; stop: SharedArrayBuffer };
const flag = new Int32Array(stop);
const router = Router.attach(attachment, { policy: 'p2c', logger: createLogger({ level: 'silent' }) });
for (let i = 0; i < 200_000; i++) router.releaseHandle(router.acquireHandle(), 'success', 1 + (i & 7));
parentPort!.postMessage('ready');
parentPort!.once('message', () => {
  let ops = 0;
  // Checks the stop word every 1024 pairs (one Atomics.load per 1024: negligible).
  while (Atomics.load(flag, 0) === 0) {
    for (let k = 0; k < 1024; k++) router.releaseHandle(router.acquireHandle(), 'success', 1 + (k & 7));
    ops += 1024;
  }
  router.close();
  parentPort!.postMessage(ops);
});
