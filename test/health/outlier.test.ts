// Outlier detection decided by the owner from the interval counters routers
// write, with an injected clock (sweeps driven by hand).
import { describe, expect, it } from 'vitest';
import { resolveOutlier, type OutlierOptions } from '../../src/health/config.js';
import { ejectionTimeMs, findOutliers } from '../../src/health/outlier.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { captureLog } from '../helpers/log-capture.js';

const ids = ['b0', 'b1', 'b2', 'b3', 'b4', 'b5'];

function cluster(outlier: OutlierOptions): { b: Balancer; r: Router; clock: { now: number }; log: ReturnType<typeof captureLog> } {
  const clock = { now: 1000 };
  const log = captureLog();
  // 20 % of six hosts is one host (the default 10 % is less than one: nobody could be ejected).
  const b = new Balancer({
    capacity: 16,
    clock: () => clock.now,
    logger: log.logger,
    health: { outlier: { maxEjectionPercent: 20, ...outlier } },
  });
  b.update(ids.map((id, i) => ({ id, address: `127.0.0.1:${10000 + i}` })));
  // Consecutive-failure ejection out of the way: only the detector ejects here.
  const r = b.router({ policy: 'round-robin', seed: 3, ejection: { consecutiveFailures: 1_000_000 } });
  return { b, r, clock, log };
}

/** `n` requests; a backend in `failing` fails exactly 3 of every 10 of its requests. Returns requests per id. */
function traffic(r: Router, n: number, failing: ReadonlySet<string>): Map<string, number> {
  const per = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const lease = r.acquire();
    const k = per.get(lease.id) ?? 0;
    per.set(lease.id, k + 1);
    lease.release(failing.has(lease.id) && k % 10 < 3 ? 'failure' : 'success');
  }
  return per;
}

describe('findOutliers (Envoy success rate and failure percentage)', () => {
  // Failure percentage judged only with 100 hosts here, so these cases test success rate alone.
  const o = resolveOutlier(
    { successRateStdevFactor: 1900, successRateRequestVolume: 100, successRateMinimumHosts: 5, failurePercentageMinimumHosts: 100 },
    'outlier',
  );
  it('ejects the one host whose success rate is below mean − 1.9σ', () => {
    const s = [1, 2, 3, 4, 5].map(() => ({ successes: 200, failures: 0 }));
    const out = findOutliers([...s, { successes: 140, failures: 60 }], o);
    // rates 100 ×5 and 70: mean 95, σ = √125 ≈ 11.18, threshold ≈ 73.76 > 70.
    expect(out).toEqual([undefined, undefined, undefined, undefined, undefined, 'successRate']);
  });
  it('judges nothing below the minimum host count or request volume', () => {
    const four = [1, 2, 3, 4].map(() => ({ successes: 200, failures: 0 }));
    // Only four hosts reach 100 requests: fewer than successRateMinimumHosts, so nobody is judged.
    expect(findOutliers([...four, { successes: 70, failures: 29 }, { successes: 10, failures: 89 }], o)).toEqual(
      new Array(6).fill(undefined),
    );
  });
  it('failure percentage: at or above the threshold, with enough volume and hosts', () => {
    const fp = resolveOutlier(
      {
        successRateMinimumHosts: 100,
        failurePercentageThreshold: 50,
        failurePercentageRequestVolume: 10,
        failurePercentageMinimumHosts: 2,
      },
      'outlier',
    );
    // 50 % fails (at the threshold), 40 % does not, 8 of 9 is below the volume.
    expect(
      findOutliers(
        [
          { successes: 5, failures: 5 },
          { successes: 6, failures: 4 },
          { successes: 1, failures: 8 },
        ],
        fp,
      ),
    ).toEqual(['failurePercentage', undefined, undefined]);
    // Two judged hosts are needed: with one of them below the volume, nothing is judged.
    expect(
      findOutliers(
        [
          { successes: 5, failures: 5 },
          { successes: 5, failures: 4 },
        ],
        fp,
      ),
    ).toEqual([undefined, undefined]);
  });
  it('ejection time is base × n, capped at max', () => {
    const e = resolveOutlier({ baseEjectionTimeMs: 1000, maxEjectionTimeMs: 3500 }, 'outlier');
    expect([1, 2, 3, 4, 9].map((n) => ejectionTimeMs(n, e))).toEqual([1000, 2000, 3000, 3500, 3500]);
  });
});

describe('outlier detection through the LoadTable', () => {
  it('one backend failing 30 % among 5 healthy ones is ejected by success rate and takes no traffic while ejected', () => {
    const { b, r, clock, log } = cluster({ baseEjectionTimeMs: 1000, successRateRequestVolume: 100 });
    const per = traffic(r, 1200, new Set(['b5']));
    expect(per.get('b5')).toBe(200);
    expect(b.sweepOutliers()).toEqual(['b5']);
    expect(log.find('ejected (outlier detection)')).toHaveLength(1);
    expect(log.find('ejected (outlier detection)')[0]).toMatchObject({
      backend: 'b5',
      address: '127.0.0.1:10005',
      reason: 'successRate',
      successes: 140,
      failures: 60,
      ejectMs: 1000,
    });
    // The counters were taken: a second sweep right away finds no volume.
    expect(b.sweepOutliers()).toEqual([]);
    expect(traffic(r, 500, new Set()).get('b5')).toBeUndefined();
    clock.now += 1000;
    expect(traffic(r, 600, new Set()).get('b5')).toBe(100);
    expect(b.healthStats().counters.ejectedSuccessRate).toBe(1);
  });

  it('ejection time grows with each ejection in a row: base × 1, × 2, × 3 (injected clock)', () => {
    const { b, r, clock } = cluster({ baseEjectionTimeMs: 1000, maxEjectionTimeMs: 10_000, successRateRequestVolume: 50 });
    const bad = new Set(['b5']);
    const lengths: number[] = [];
    for (let round = 0; round < 3; round++) {
      traffic(r, 600, bad);
      expect(b.sweepOutliers()).toEqual(['b5']);
      lengths.push(b.healthStats().backends.find((x) => x.id === 'b5')!.ejectedForMs);
      clock.now += lengths[round]!; // the ejection ends exactly now
    }
    expect(lengths).toEqual([1000, 2000, 3000]);
    expect(b.healthStats().backends.find((x) => x.id === 'b5')!.outlierEjections).toBe(3);
    // A clean interval after a full interval back drops the multiplier by one.
    traffic(r, 600, new Set());
    b.sweepOutliers();
    traffic(r, 600, new Set());
    b.sweepOutliers();
    expect(b.healthStats().backends.find((x) => x.id === 'b5')!.outlierEjections).toBe(2);
  });

  it('max ejection percent keeps the configured share routable: two outliers among six', () => {
    // σ factor 1.0 so both 70 % hosts are below mean − σ (mean 90, σ ≈ 14.1).
    const base = { successRateStdevFactor: 1000, successRateRequestVolume: 100 };
    // 10 % of six hosts is less than one host: nobody is ejected (1 of 6 would be 16.7 %).
    const { b, r, log } = cluster({ ...base, maxEjectionPercent: 10 });
    traffic(r, 1200, new Set(['b4', 'b5']));
    expect(b.sweepOutliers()).toEqual([]);
    expect(b.healthStats().counters.ejectionsSkippedMaxPercent).toBe(2);
    const skipped = log.find('not ejected (max ejection percent)');
    expect(skipped).toHaveLength(2);
    for (const s of skipped) {
      expect(s['address']).toBe(`127.0.0.1:${10000 + ids.indexOf(String(s['backend']))}`);
      expect(['b4', 'b5']).toContain(s['backend']);
    }
    expect(new Set(traffic(r, 600, new Set()).keys()).size).toBe(6);

    // alwaysEjectOneHost: the first ejection goes through whatever the limit; the second does not.
    const { b: b1, r: r1 } = cluster({ ...base, maxEjectionPercent: 10, alwaysEjectOneHost: true });
    traffic(r1, 1200, new Set(['b4', 'b5']));
    expect(b1.sweepOutliers()).toHaveLength(1);
    expect(b1.healthStats().counters.ejectionsSkippedMaxPercent).toBe(1);
    expect(new Set(traffic(r1, 600, new Set()).keys()).size).toBe(5);

    // 20 %: one of six (16.7 %) fits, two (33.3 %) do not. 34 %: both fit.
    const { b: b2, r: r2 } = cluster({ ...base, maxEjectionPercent: 20 });
    traffic(r2, 1200, new Set(['b4', 'b5']));
    expect(b2.sweepOutliers()).toHaveLength(1);
    const { b: b3, r: r3 } = cluster({ ...base, maxEjectionPercent: 34 });
    traffic(r3, 1200, new Set(['b4', 'b5']));
    expect(b3.sweepOutliers().sort()).toEqual(['b4', 'b5']);
  });
});

describe('maxEjectionPercent: the share after an ejection never exceeds the limit (Envoy >= 1.28)', () => {
  const sizes = Array.from({ length: 20 }, (_, i) => i + 1);
  const percents = [0, 10, 25, 34, 50, 99, 100];
  const cases = sizes.flatMap((n) => percents.flatMap((p) => [false, true].map((always) => ({ n, p, pct: `${p} %`, always }))));

  /** `n` hosts, every one failing every request; failure percentage judges them all, success rate nobody. */
  function allFailing(n: number, p: number, always: boolean): { b: Balancer; r: Router } {
    const b = new Balancer({
      capacity: 32,
      clock: () => 1000,
      logger: captureLog('error').logger,
      health: {
        outlier: {
          maxEjectionPercent: p,
          alwaysEjectOneHost: always,
          enforcingFailurePercentage: 100,
          failurePercentageThreshold: 50,
          failurePercentageRequestVolume: 1,
          failurePercentageMinimumHosts: 1,
          successRateMinimumHosts: 65_536,
        },
      },
    });
    b.update(Array.from({ length: n }, (_, i) => ({ id: `h${i}`, address: `127.0.0.1:${20000 + i}` })));
    return { b, r: b.router({ policy: 'round-robin', seed: 1, ejection: { consecutiveFailures: 1_000_000 } }) };
  }

  it.each(cases)('$n hosts at $pct (alwaysEjectOneHost $always)', ({ n, p, always }) => {
    const { b, r } = allFailing(n, p, always);
    // The most the limit allows: floor(p × n / 100) hosts; with alwaysEjectOneHost at least one.
    const limit = Math.floor((p * n) / 100);
    const expected = always ? Math.max(1, limit) : limit;
    for (let sweep = 0; sweep < 3; sweep++) {
      // Every routable host fails a few requests, then a sweep judges them (the clock stands still, so ejections last).
      for (let i = 0; i < 4 * n; i++) {
        const lease = r.acquire();
        lease.release('failure');
      }
      b.sweepOutliers();
      const ejected = b.healthStats().backends.filter((x) => x.ejectedForMs > 0).length;
      expect(ejected).toBe(expected);
      if (!(always && ejected === 1)) expect(100 * ejected).toBeLessThanOrEqual(p * n);
    }
    expect(b.healthStats().counters.ejectedFailurePercentage).toBe(expected);
  });
});
