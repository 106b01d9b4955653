// The hedge delay's figure is the table's, not a router's: latencies a
// router's releases record (request leases, `success` with a latency) are
// read by a lease of any other router attached to the same table; failures,
// connection leases and releases without a latency record nothing.
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { Router } from '../../src/runtime/router.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

describe('Lease.latencyQuantileMs', () => {
  it('reads what another router’s releases recorded; only request successes with a latency count', () => {
    const balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
    cleanups.push(() => balancer.close());
    balancer.update([{ id: 'a', address: '127.0.0.1:7001' }]);
    const writer = balancer.router({ policy: 'round-robin' });
    // Nothing is recorded until a reader asks for quantiles (an adaptive-hedge dispatcher does this).
    writer.acquire({ kind: 'request' }).release('success', { latencyMs: 20 });
    writer.recordLatencyQuantiles();
    const reader = Router.attach(balancer.attachment(), { policy: 'round-robin', logger: createLogger({ level: 'silent' }) });
    const probe = (): number => {
      const lease = reader.acquire({ kind: 'request' });
      const q = lease.latencyQuantileMs(0.5, 10);
      lease.release('cancelled');
      expect(lease.latencyQuantileMs(0.5, 1)).toBe(-1);
      return q;
    };
    for (let i = 0; i < 9; i++) writer.acquire({ kind: 'request' }).release('success', { latencyMs: 20 });
    // Nine samples: below minSamples. Records that are not a request's success with a latency add none.
    writer.acquire({ kind: 'request' }).release('failure');
    writer.acquire({ kind: 'request' }).release('success');
    writer.acquire({ kind: 'connection' }).release('success', { latencyMs: 20 });
    expect(probe()).toBe(-1);
    writer.acquire({ kind: 'request' }).release('success', { latencyMs: 20 });
    const q = probe();
    // 20 ms lies in the bucket (16.4 ms, 32.8 ms].
    expect(q).toBeGreaterThan(16.384);
    expect(q).toBeLessThanOrEqual(32.768);
  });
});
