/**
 * One benchmark worker of bench/workers.ts. Modes:
 * - `router`: warm up, meet the others at a barrier, then time `ops`
 *   acquireHandle + releaseHandle pairs on its own Router;
 * - `slot`: the same barrier, then `ops` acquire + release shaped sequences
 *   on one fixed slot (the false-sharing probe of the padding comparison);
 * - `spin`: take `hold` leases, report, then acquire/release until terminated;
 * - `heap`: heap bytes per acquire + release after warm-up, in this fresh
 *   thread (so other policies' code has not made the call sites polymorphic).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { EwmaSeries, LeaseKind, LoadTable } from '../src/load/load-table.js';
import { clockReader } from '../src/runtime/clock.js';
import { createLogger } from '../src/log.js';
import { Router, type PolicyName, type RouterAttachment } from '../src/runtime/router.js';
import { KEYED_POLICY_NAMES } from '../src/runtime/policies.js';
import { heapBytesPerOp } from './lib/harness.js';

interface Data {
  attachment: RouterAttachment;
  mode: 'router' | 'slot' | 'spin' | 'heap';
  chunks: number;
  policy: PolicyName;
  ops: number;
  hold: number;
  slot: number;
  barrier: SharedArrayBuffer;
}

const d = workerData as Data;
const logger = createLogger({ level: 'silent' });
const now = clockReader(d.attachment.clock);
const KEYS = Array.from({ length: 256 }, (_, i) => ({ key: `user-${i}` }));

function routerLoop(r: Router, ops: number, keyed: boolean): number {
  let sink = 0;
  for (let i = 0; i < ops; i++) {
    const h = keyed ? r.acquireHandle(KEYS[i & 255]) : r.acquireHandle();
    sink ^= h;
    r.releaseHandle(h, 'success', 1 + (i & 7));
  }
  return sink;
}

/**
 * What one acquire + release of a fixed backend does to its slot: the
 * lease cell up, the tag check, the cell down, a latency sample (the
 * PeakEWMA fast path: reads the estimate words, writes nothing) and a success
 * (reads the failures word). The tag sits in the first half of the slot, the
 * estimates and failures in the second: with unaligned slots the second half
 * of slot s shares a cache line with the first half of slot s + 1. (The lease
 * cells live in their own line-aligned region, slot-major.)
 */
function slotLoop(t: LoadTable, slot: number, row: number, ops: number): number {
  let sink = 0;
  for (let i = 0; i < ops; i++) {
    t.leases.up(slot, LeaseKind.Request, row);
    sink ^= t.tag(slot);
    t.leases.down(slot, LeaseKind.Request, row);
    t.ewma.observe(slot, EwmaSeries.Latency, 0, now(), row);
    t.health.clearFailures(slot);
  }
  return sink;
}

/** Every worker increments ready, then waits for go (the owner's store + notify). */
function barrier(): void {
  const ctl = new Int32Array(d.barrier);
  Atomics.add(ctl, 0, 1);
  Atomics.notify(ctl, 0);
  // Atomics.wait returns when go (word 1) is no longer 0; the loop covers spurious wake-ups.
  while (Atomics.load(ctl, 1) === 0) Atomics.wait(ctl, 1, 0);
}

if (d.mode === 'heap') {
  const r = Router.attach(d.attachment, { policy: d.policy, logger });
  const keyed = KEYED_POLICY_NAMES.includes(d.policy);
  const handle = heapBytesPerOp(
    (i) => r.releaseHandle(keyed ? r.acquireHandle(KEYS[i & 255]) : r.acquireHandle(), 'success', 1 + (i & 7)),
    10_000,
    d.chunks,
  );
  const lease = heapBytesPerOp((i) => (keyed ? r.acquire(KEYS[i & 255]) : r.acquire()).release('success'), 10_000, d.chunks);
  parentPort!.postMessage({ handle, lease });
} else if (d.mode === 'spin') {
  const r = Router.attach(d.attachment, { policy: 'p2c', logger });
  for (let i = 0; i < d.hold; i++) r.acquireHandle();
  parentPort!.postMessage({ holding: d.hold });
  for (;;) routerLoop(r, 1000, false);
} else if (d.mode === 'slot') {
  const t = LoadTable.attach(d.attachment.buffer);
  const r = Router.attach(d.attachment, { logger });
  slotLoop(t, d.slot, r.row, Math.min(d.ops, 200_000));
  barrier();
  const t0 = process.hrtime.bigint();
  const sink = slotLoop(t, d.slot, r.row, d.ops);
  parentPort!.postMessage({ ns: Number(process.hrtime.bigint() - t0), ops: d.ops, sink });
} else {
  const r = Router.attach(d.attachment, { policy: d.policy, logger });
  const keyed = KEYED_POLICY_NAMES.includes(d.policy);
  routerLoop(r, Math.min(d.ops, 200_000), keyed);
  barrier();
  const t0 = process.hrtime.bigint();
  const sink = routerLoop(r, d.ops, keyed);
  parentPort!.postMessage({ ns: Number(process.hrtime.bigint() - t0), ops: d.ops, sink });
}
