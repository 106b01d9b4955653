// balancer.table is a read-only view: every read agrees with the owner's
// table word for word, and no writer is reachable from it at run time.
import { Worker, threadId } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { EwmaSeries, LeaseKind, LoadTable } from '../../../src/load/load-table.js';
import { Balancer } from '../../../src/runtime/balancer.js';
import { Router } from '../../../src/runtime/router.js';
import { createLogger } from '../../../src/log.js';
import { Rng } from '../../../src/core/rng.js';

const logger = createLogger({ level: 'silent' });

/** The view's data members (the table's dimensions). */
const VIEW_FIELDS = ['capacity', 'maxThreads', 'tauMs', 'initialMs'];

/** Every method, accessor and field a LoadTable has (its region objects included): the view must expose exactly the read subset. */
function tableMembers(): string[] {
  const methods = Object.getOwnPropertyNames(LoadTable.prototype).filter((n) => n !== 'constructor');
  const fields = Object.keys(LoadTable.create({ capacity: 1, maxThreads: 1 })).filter((n) => !VIEW_FIELDS.includes(n));
  return [...methods, ...fields];
}

const VIEW_METHODS = [
  'connections',
  'ejectedForMs',
  'estimateUs',
  'healthEpoch',
  'membershipEpoch',
  'outstanding',
  'requests',
  'rowLeases',
  'totalLeases',
  'totalOutstanding',
  'rowOf',
  'rowsInUse',
  'stats',
];

function balancer(clock: () => number): Balancer {
  const b = new Balancer({ logger, capacity: 8, maxThreads: 4, clock });
  b.update(Array.from({ length: 5 }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${7100 + i}` })));
  return b;
}

describe('LoadTableView (balancer.table)', () => {
  it('has no writer at run time: not the LoadTable, frozen, and every LoadTable member beyond the reads is absent', () => {
    const b = balancer(() => 1000);
    const view = b.table as unknown as Record<string, unknown>;
    expect(b.table).not.toBeInstanceOf(LoadTable);
    expect(Object.isFrozen(b.table)).toBe(true);
    const writers = tableMembers().filter((n) => !VIEW_METHODS.includes(n));
    // The LoadTable really has writers to hide (so this test cannot pass vacuously).
    for (const w of ['epochs', 'tags', 'leases', 'ewma', 'health', 'specs', 'admission', 'words', 'layout', 'resetHealth', 'reclaimRow']) {
      expect(writers).toContain(w);
    }
    for (const w of writers) expect({ member: w, value: view[w] }).toEqual({ member: w, value: undefined });
    expect(view['buffer']).toBeUndefined();
    // Frozen: a user cannot bolt a writer on either.
    expect(() => {
      view['setTag'] = () => undefined;
    }).toThrow(TypeError);
    for (const m of VIEW_METHODS) expect(typeof view[m]).toBe('function');
  });

  it('every read equals the owner table, word for word, after random leases, samples and failures from a router', () => {
    let now = 1000;
    const b = balancer(() => now);
    const owner = b.ownerTable;
    const router = b.router({ policy: 'random', seed: 11, ejection: { consecutiveFailures: 3 } });
    const rng = new Rng(5);
    const open: ReturnType<Router['acquire']>[] = [];
    const kinds: ('request' | 'connection')[] = [];
    for (let step = 0; step < 4000; step++) {
      now += rng.below(3);
      if (open.length > 0 && rng.below(2) === 0) {
        const at = rng.below(open.length);
        const lease = open.splice(at, 1)[0]!;
        kinds.splice(at, 1);
        lease.release(rng.below(4) === 0 ? 'failure' : 'success', { latencyMs: rng.below(200) });
      } else {
        const kind = rng.below(2) === 0 ? 'request' : 'connection';
        open.push(router.acquire({ kind }));
        kinds.push(kind);
      }
      if (step % 97 !== 0) continue;
      expect(b.table.rowsInUse()).toBe(owner.rowsInUse());
      expect(b.table.membershipEpoch()).toBe(owner.membershipEpoch());
      expect(b.table.healthEpoch()).toBe(owner.healthEpoch());
      expect(b.table.rowOf(threadId)).toBe(router.row);
      expect(b.table.rowOf(threadId + 1000)).toBe(-1);
      expect(b.table.totalLeases(LeaseKind.Request)).toBe(kinds.filter((k) => k === 'request').length);
      expect(b.table.totalLeases(LeaseKind.Connection)).toBe(kinds.filter((k) => k === 'connection').length);
      expect(b.table.totalOutstanding()).toBe(owner.totalOutstanding());
      for (let s = 0; s < b.table.capacity; s++) {
        expect(b.table.stats(s)).toEqual(owner.stats(s));
        expect(b.table.connections(s)).toBe(owner.connections(s));
        expect(b.table.requests(s)).toBe(owner.requests(s));
        expect(b.table.outstanding(s)).toBe(owner.outstanding(s));
        expect(b.table.estimateUs(s, EwmaSeries.Latency, now)).toBe(owner.estimateUs(s, EwmaSeries.Latency, now));
        expect(b.table.estimateUs(s, EwmaSeries.ConnectTime, now)).toBe(owner.estimateUs(s, EwmaSeries.ConnectTime, now));
        expect(b.table.ejectedForMs(s, now)).toBe(owner.ejectedForMs(s, now));
        // Without a time, the view reads at now on the Balancer's (here injected) clock.
        expect(b.table.estimateUs(s, EwmaSeries.Latency)).toBe(owner.estimateUs(s, EwmaSeries.Latency, now));
        expect(b.table.ejectedForMs(s)).toBe(owner.ejectedForMs(s, now));
        expect(b.table.rowLeases(router.row, s, LeaseKind.Request)).toBe(owner.rowLeases(router.row, s, LeaseKind.Request));
      }
    }
    // The walk really moved the table (leases open, some samples and failures recorded).
    const total = Array.from({ length: 5 }, (_, s) => b.table.outstanding(s)).reduce((x, y) => x + y, 0);
    expect(total).toBe(open.length);
    expect(b.table.healthEpoch()).toBeGreaterThan(0);
    // ... and the estimates decay between a sample and a read, so a default time other than the clock's would differ.
    const raw = Array.from({ length: 5 }, (_, s) => owner.stats(s).latencyEstimateUs);
    const decayed = Array.from({ length: 5 }, (_, s) => b.table.estimateUs(s, EwmaSeries.Latency, now + 500));
    expect(decayed).not.toEqual(raw);
    expect({ capacity: b.table.capacity, maxThreads: b.table.maxThreads, tauMs: b.table.tauMs, initialMs: b.table.initialMs }).toEqual({
      capacity: owner.capacity,
      maxThreads: owner.maxThreads,
      tauMs: owner.tauMs,
      initialMs: owner.initialMs,
    });
    for (const l of open) l.release('cancelled');
    for (let s = 0; s < 5; s++) expect(b.table.outstanding(s)).toBe(0);
    expect(b.table.totalOutstanding()).toBe(0);
  });
});

describe('Balancer.attachment()', () => {
  it('is the RouterAttachment itself: buffer, layout version and clock, nothing else, and it survives a trip to a worker', async () => {
    const b = balancer(() => 1000);
    const a = b.attachment();
    expect(Object.keys(a).sort()).toEqual(['buffer', 'clock', 'layoutVersion']);
    expect(a.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(a.clock).toBeInstanceOf(SharedArrayBuffer);
    // Attaching from it directly works in this thread ...
    const r = Router.attach(a, { logger, policy: 'round-robin' });
    const lease = r.acquire();
    expect(Array.from({ length: 5 }, (_, s) => b.table.requests(s)).reduce((x, y) => x + y, 0)).toBe(1);
    lease.release('success');
    r.close();
    // ... and as workerData, with no transfer list: the worker sees the same memory.
    const w = new Worker(
      `const { workerData, parentPort } = require('node:worker_threads');
       const i32 = new Int32Array(workerData.buffer);
       parentPort.postMessage({ shared: workerData.buffer instanceof SharedArrayBuffer, words: i32.length, version: Atomics.load(i32, 0) });`,
      { eval: true, workerData: a },
    );
    const seen = await new Promise<{ shared: boolean; words: number; version: number }>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await w.terminate();
    expect(seen).toEqual({ shared: true, words: a.buffer.byteLength / 4, version: a.layoutVersion });
  });
});
