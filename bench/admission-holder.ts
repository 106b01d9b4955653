/**
 * A router in a worker thread that holds request leases on command, to set
 * the pool's saturation from another thread (the admission tests and the
 * wake-up measurement of bench/admission.ts): `{ hold: n }` takes n more,
 * `{ release: n }` returns n (oldest first). Each reply carries the number
 * held and `at`, the absolute time (`performance.timeOrigin + now()`, ms)
 * just before the first release.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '../src/log.js';
import type { Lease } from '../src/runtime/lease.js';
import { Router, type RouterAttachment } from '../src/runtime/router.js';

const router = Router.attach((workerData as { attachment: RouterAttachment }).attachment, {
  policy: 'round-robin',
  leaseKind: 'request',
  logger: createLogger({ level: 'silent' }),
});
const held: Lease[] = [];
parentPort!.on('message', (msg: { hold?: number; release?: number }) => {
  let at = 0;
  try {
    for (let i = 0; i < (msg.hold ?? 0); i++) held.push(router.acquire());
    at = performance.timeOrigin + performance.now();
    for (let i = 0; i < (msg.release ?? 0); i++) held.shift()?.release('success');
    parentPort!.postMessage({ held: held.length, at });
  } catch (err) {
    parentPort!.postMessage({ error: String((err as { code?: string }).code ?? err), held: held.length, at });
  }
});
