/**
 * Failure-percentage outlier detection (Envoy's `failure_percentage_*`,
 * issue 39): the defence against a backend whose failures are interleaved
 * with successes, which consecutive-failure ejection misses. Seeded traffic
 * through a real Router into the LoadTable's interval words, sweeps driven by
 * hand on an injected clock.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import type { OutlierOptions } from '../../src/health/config.js';
import { parseDocument } from '../../src/membership/document.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { captureLog } from '../helpers/log-capture.js';

const SIX = ['b0', 'b1', 'b2', 'b3', 'b4', 'b5'];

function cluster(
  ids: readonly string[],
  outlier: OutlierOptions | undefined,
  consecutiveFailures = 5,
): { b: Balancer; r: Router; clock: { now: number }; log: ReturnType<typeof captureLog> } {
  const clock = { now: 1000 };
  const log = captureLog();
  const b = new Balancer({
    capacity: 32,
    clock: () => clock.now,
    logger: log.logger,
    ...(outlier === undefined ? {} : { health: { outlier } }),
  });
  onTestFinished(() => b.close());
  b.update(ids.map((id, i) => ({ id, address: `127.0.0.1:${10000 + i}` })));
  const r = b.router({ policy: 'round-robin', seed: 3, ejection: { consecutiveFailures } });
  return { b, r, clock, log };
}

/** `n` requests; each one on `bad` fails with probability `rate` (seeded). Returns the requests `bad` received. */
function traffic(r: Router, n: number, bad: string, rate: number, rng: Rng): number {
  let got = 0;
  for (let i = 0; i < n; i++) {
    const lease = r.acquire();
    const fails = lease.id === bad && rng.float() < rate;
    if (lease.id === bad) got++;
    lease.release(fails ? 'failure' : 'success');
  }
  return got;
}

/** Failure percentage alone (success rate judges nobody), enforced, one host of six allowed out. */
const FP: OutlierOptions = {
  baseEjectionTimeMs: 1000,
  maxEjectionPercent: 20,
  successRateMinimumHosts: 65_536,
  failurePercentageThreshold: 7,
  failurePercentageRequestVolume: 50,
  failurePercentageMinimumHosts: 5,
  enforcingFailurePercentage: 100,
};

describe('failure percentage catches interleaved failures that consecutive failures miss', () => {
  it('10 % failures on one backend of six: ejected by failure percentage every interval, never by 5 consecutive failures', () => {
    const { b, r, clock, log } = cluster(SIX, FP);
    const rng = new Rng(39n);
    for (let round = 0; round < 20; round++) {
      // 6,000 requests: 1,000 on b5, ~100 failures (sd 9.5); the threshold, 70, is 3 sd below.
      expect(traffic(r, 6000, 'b5', 0.1, rng)).toBe(1000);
      expect(b.sweepOutliers(), `round ${round}`).toEqual(['b5']);
      // The ejection (base × n, n ejections in a row) ends exactly now.
      clock.now += b.healthStats().backends.find((x) => x.id === 'b5')!.ejectedForMs;
    }
    expect(b.healthStats().counters.ejectedFailurePercentage).toBe(20);
    expect(log.find('ejected after consecutive failures')).toHaveLength(0);
  });

  it('the same traffic without the detector ejects nothing (consecutive failures alone)', () => {
    const { b, r, log } = cluster(SIX, undefined);
    const rng = new Rng(39n);
    for (let round = 0; round < 20; round++) traffic(r, 6000, 'b5', 0.1, rng);
    expect(log.find('ejected after consecutive failures')).toHaveLength(0);
    expect(b.healthStats().backends.every((x) => x.ejectedForMs === 0)).toBe(true);
  });

  it('below the request volume nothing is ejected: 49 requests on b5 in an interval, even all failing', () => {
    const { b, r } = cluster(SIX, FP, 1_000_000);
    const rng = new Rng(1n);
    // 294 requests: 49 per backend (round robin).
    for (let round = 0; round < 10; round++) {
      expect(traffic(r, 294, 'b5', 1, rng)).toBe(49);
      expect(b.sweepOutliers()).toEqual([]);
    }
    // One more request each reaches the volume: b5 goes.
    traffic(r, 300, 'b5', 1, rng);
    expect(b.sweepOutliers()).toEqual(['b5']);
  });

  it('below the host minimum nothing is ejected: 6 judged hosts where 7 are required', () => {
    const { b, r } = cluster(SIX, { ...FP, failurePercentageMinimumHosts: 7 }, 1_000_000);
    const rng = new Rng(2n);
    for (let round = 0; round < 10; round++) {
      traffic(r, 6000, 'b5', 1, rng);
      expect(b.sweepOutliers()).toEqual([]);
    }
    expect(b.healthStats().counters.ejectedFailurePercentage).toBe(0);
  });
});

describe('enforcingFailurePercentage defaults to 100 (Envoy: 0)', () => {
  it('the defaults eject hosts that fail everything where success rate cannot: 6 of 20, two out (max ejection 10 %)', () => {
    const ids = Array.from({ length: 20 }, (_, i) => `h${i}`);
    const { b, r } = cluster(ids, {}, 1_000_000);
    const bad = new Set(ids.slice(14));
    // 2,000 requests: 100 per host (the success-rate volume). Rates 100 ×14, 0 ×6: mean 70, σ ≈ 45.8, so
    // mean − 1.9σ < 0 and success rate flags nobody; every bad host fails 100 % ≥ 85 %.
    for (let i = 0; i < 2000; i++) {
      const lease = r.acquire();
      lease.release(bad.has(lease.id) ? 'failure' : 'success');
    }
    const out = b.sweepOutliers();
    expect(out).toHaveLength(2);
    for (const id of out) expect(bad.has(id)).toBe(true);
    expect(b.healthStats().counters.ejectedFailurePercentage).toBe(2);
    expect(b.healthStats().counters.ejectedSuccessRate).toBe(0);
  });

  it('enforcingFailurePercentage: 0 turns it off (Envoy’s default)', () => {
    const ids = Array.from({ length: 20 }, (_, i) => `h${i}`);
    const { b, r } = cluster(ids, { enforcingFailurePercentage: 0 }, 1_000_000);
    const bad = new Set(ids.slice(14));
    for (let i = 0; i < 2000; i++) {
      const lease = r.acquire();
      lease.release(bad.has(lease.id) ? 'failure' : 'success');
    }
    expect(b.sweepOutliers()).toEqual([]);
  });
});

describe('the membership document’s health.outlier block', () => {
  const doc = (outlier: Record<string, unknown>): string =>
    JSON.stringify({ cluster: 'c', backends: [{ id: 'a', address: '127.0.0.1:1' }], health: { outlier } });

  it('accepts the failure-percentage fields', () => {
    const fields = {
      failurePercentageThreshold: 10,
      failurePercentageRequestVolume: 20,
      failurePercentageMinimumHosts: 3,
      enforcingFailurePercentage: 50,
    };
    expect(parseDocument(doc(fields)).health).toEqual({ outlier: fields });
  });

  it.each([
    ['failurePercentageThreshold', 101, 'must be an integer in [0, 100]'],
    ['failurePercentageRequestVolume', 0, 'must be an integer in [1, 2147483647]'],
    ['failurePercentageMinimumHosts', 1.5, 'must be an integer in [1, 65536]'],
    ['enforcingFailurePercentage', -1, 'must be an integer in [0, 100]'],
  ])('a bad %s is refused naming the field', (field, value, reason) => {
    expect(() => parseDocument(doc({ [field]: value }))).toThrow(`health.outlier.${field}: ${reason}`);
  });
});
