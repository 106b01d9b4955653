// What a failure contributes to a backend's PeakEWMA (runtime/feedback.ts):
// 2x the backend's base once per run of consecutive failures on the
// connect-time series, whose peak rule would otherwise double it at every
// failure (2^k up to the ceiling, and tau * ln 2^k to come back).
import { describe, expect, it, onTestFinished } from 'vitest';
import { EwmaSeries } from '../../src/load/ewma-region.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';
import { manualClock } from '../helpers/runtime.js';

describe('a failed connection lease and the connect-time estimate', () => {
  it('ten consecutive failures leave it at 2x its estimate before them, not 2^10 x; a success starts a new run', () => {
    const clock = manualClock();
    const balancer = new Balancer({ capacity: 4, logger: createLogger({ level: 'silent' }), clock: clock.now });
    onTestFinished(() => balancer.close());
    // No ejection in the way: the failures stay consecutive.
    balancer.update([{ id: 'a', address: '127.0.0.1:7001' }]);
    const router = balancer.router({ policy: 'p2c:connections', ejection: { consecutiveFailures: 1_000 } });
    const slot = balancer.slotEntries()[0]!.slot;
    const estimate = (): number => balancer.table.estimateUs(slot, EwmaSeries.ConnectTime);
    for (let i = 0; i < 20; i++) {
      clock.advance(10);
      const lease = router.acquire({ kind: 'connection' });
      lease.connected(4);
      lease.release('success');
    }
    const before = estimate();
    for (let i = 0; i < 10; i++) router.acquire({ kind: 'connection' }).release('failure');
    expect(estimate()).toBe(2 * before);
    // A success ends the run; the next failure doubles again (once).
    clock.advance(1);
    router.acquire({ kind: 'connection' }).release('success');
    const after = estimate();
    router.acquire({ kind: 'connection' }).release('failure');
    router.acquire({ kind: 'connection' }).release('failure');
    expect(estimate()).toBe(2 * after);
  });
});
