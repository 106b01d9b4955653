/**
 * The cold start (issue 39): 4 backends, one 10× slower (4 ms against 40 ms
 * of service, ±25 % jitter), 32 closed-loop callers on an injected clock,
 * each keeping one request in flight on a real Router's lease and sending
 * the next the moment the last one answers. The caller warms up as a fresh
 * process does (connections opening, code not yet optimised: bench:http
 * measured 30–45 ms more for every backend alike in its first 100 ms): a
 * request sent at t pays 40 ms · e^(−t / 0.8 s) more, ±25 %, whatever its
 * backend. The law: the slow backend's share of each 250 ms after the
 * first second stays under 0.2 %. Beside it, the LoadTable laws of the
 * design (ewma-region.ts): the first sample replaces the prior, a young
 * series blends as a mean over its age, a series τ old is the kernel's.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { EwmaSeries } from '../../src/load/ewma-region.js';
import { LoadTable } from '../../src/load/load-table.js';
import { peakEwmaNext } from '../../src/load/peak-ewma.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import { manualClock } from '../helpers/runtime.js';

const CLIENTS = 32;
const BIN_MS = 250;

/** The slow backend's share of the picks in each 250 ms of the first `simMs`. */
function slowShares(seed: number, simMs = 5000, warmupMs = 800): number[] {
  const clock = manualClock(1000);
  const balancer = new Balancer({ capacity: 8, clock: clock.now });
  onTestFinished(() => balancer.close());
  balancer.update(['s', 'a', 'b', 'c'].map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })));
  const router = balancer.router({ policy: 'p2c:latency', seed });
  const rng = new Rng(BigInt(seed) + 1n);
  const leases: Lease[] = [];
  const started = new Float64Array(CLIENTS);
  const done = new Float64Array(CLIENTS);
  const bins = Math.ceil(simMs / BIN_MS);
  const picks = new Float64Array(bins);
  const slow = new Float64Array(bins);
  const t0 = clock.now();
  let now = t0;
  const send = (c: number): void => {
    const lease = router.acquire();
    leases[c] = lease;
    started[c] = now;
    const service = (lease.id === 's' ? 40 : 4) * (0.75 + 0.5 * rng.float());
    const cold = 40 * Math.exp(-(now - t0) / warmupMs) * (0.75 + 0.5 * rng.float());
    done[c] = now + service + cold;
    const bin = Math.floor((now - t0) / BIN_MS);
    if (bin < bins) {
      picks[bin]!++;
      if (lease.id === 's') slow[bin]!++;
    }
  };
  for (let c = 0; c < CLIENTS; c++) send(c);
  while (now - t0 < simMs) {
    let c = 0;
    for (let k = 1; k < CLIENTS; k++) if (done[k]! < done[c]!) c = k;
    clock.advance(done[c]! - now);
    now = clock.now();
    leases[c]!.release('success', { latencyMs: now - started[c]! });
    send(c);
  }
  for (const lease of leases) lease.release('cancelled');
  router.close();
  return Array.from(picks, (n, i) => slow[i]! / n);
}

describe('a cold start routes like a warm process after its first second (closed-loop simulation, injected clock)', () => {
  // Measured, seeds 1–10, the slow share per 250 ms (docs/policies.md, "The
  // cold start"): before (a 50 ms prior blended into the PeakEWMA, τ from
  // the first sample) 0.22–3.7 % in 750–1000 ms and 0.17–0.35 % in the
  // worst bin of 1–5 s; now 0.22–0.44 % and 0.14–0.18 % (one request in a
  // bin: the tail rule's one try at a time). Before, seed 3 fails the law.
  it('p2c:latency: from the first second on, the slow backend gets under 0.2 % of every 250 ms (10 seeds)', () => {
    for (let seed = 1; seed <= 10; seed++) {
      const shares = slowShares(seed);
      for (let bin = 4; bin < shares.length; bin++) expect(shares[bin], `seed ${seed}, ${bin * BIN_MS} ms`).toBeLessThan(0.002);
    }
  });

  it('over 1–5 s the slow backend gets under 0.1 % in all (a warm process: one try per gate)', () => {
    for (let seed = 1; seed <= 10; seed++) {
      const shares = slowShares(seed);
      const late = shares.slice(4);
      expect(late.reduce((a, b) => a + b, 0) / late.length, `seed ${seed}`).toBeLessThan(0.001);
    }
  });
});

describe('the request latency estimates of a young slot (LoadTable, injected times)', () => {
  it("the first sample replaces the prior in the PeakEWMA and in the mean whatever Δt, above or below it, in the reset's own millisecond too", () => {
    const t = LoadTable.create({ capacity: 3, tauMs: 1000, initialMs: 50 });
    for (let s = 0; s < 3; s++) t.resetHealth(s, 0);
    // Below the 50 ms prior, 30 ms later (a blend with e^(−0.03) read 48.6 ms).
    t.ewma.observe(0, EwmaSeries.Latency, 4, 30, 0);
    expect(t.estimateUs(0, EwmaSeries.Latency, 30)).toBe(4000);
    expect(t.ewma.meanRecordedUs(0)).toBe(4000);
    // 1 ms later, 20 ms: not a blend 50·½ + 20·½ (a prior weighing 1 ms read 35 ms).
    t.ewma.observe(1, EwmaSeries.Latency, 20, 1, 0);
    expect(t.estimateUs(1, EwmaSeries.Latency, 1)).toBe(20_000);
    expect(t.ewma.meanRecordedUs(1)).toBe(20_000);
    // In the reset's own millisecond (Δt = 0, w = 1 for a warm series): replaced as well — a backend answering
    // within a millisecond of joining must not read the 50 ms prior against its peers' 1 ms.
    t.ewma.observe(2, EwmaSeries.Latency, 0.5, 0, 0);
    expect(t.estimateUs(2, EwmaSeries.Latency, 0)).toBe(500);
    expect(t.ewma.meanRecordedUs(2)).toBe(500);
    // Above the prior: replaced too (the peak rule), and a second sample in the same millisecond is the kernel's (w = 1).
    t.resetHealth(1, 10);
    t.ewma.observe(1, EwmaSeries.Latency, 70, 10, 0);
    t.ewma.observe(1, EwmaSeries.Latency, 7, 10, 0);
    expect(t.estimateUs(1, EwmaSeries.Latency, 10)).toBe(70_000);
    expect(t.ewma.meanRecordedUs(1)).toBe(70_000);
    // The connect time's series is not the cold start's: its first sample blends (the kernel, w = e^(−Δt/τ)).
    t.ewma.observe(0, EwmaSeries.ConnectTime, 4, 30, 0);
    expect(t.estimateUs(0, EwmaSeries.ConnectTime, 30)).toBe(Math.round(peakEwmaNext(50, Math.exp(-0.03), 4) * 1000));
  });

  it('until τ old, a sample blends as a mean over the series age (first sample 1 ms), when that outweighs e^(−Δt/τ)', () => {
    const t = LoadTable.create({ capacity: 1, tauMs: 1000, initialMs: 50 });
    t.resetHealth(0, 0);
    t.ewma.observe(0, EwmaSeries.Latency, 40, 100, 0);
    // 99 ms later (age 99, before it 0): weight 1 − 1/100 on the new sample.
    t.ewma.observe(0, EwmaSeries.Latency, 4, 199, 0);
    const w1 = 1 / 100;
    const m1 = Math.round(40_000 * w1 + 4000 * (1 - w1));
    expect(t.ewma.meanRecordedUs(0)).toBe(m1);
    expect(t.estimateUs(0, EwmaSeries.Latency, 199)).toBe(Math.round(peakEwmaNext(40, w1, 4) * 1000));
    // 100 ms later (age 199, before it 99): w = 100 / 200.
    t.ewma.observe(0, EwmaSeries.Latency, 8, 299, 0);
    expect(t.ewma.meanRecordedUs(0)).toBe(Math.round(m1 * 0.5 + 8000 * 0.5));
  });

  it('a series τ old blends exactly as the kernel does (a warm process is unchanged), 2,000 seeded samples', () => {
    const t = LoadTable.create({ capacity: 1, tauMs: 1000, initialMs: 50 });
    const rng = new Rng(7n);
    t.resetHealth(0, 0);
    t.ewma.observe(0, EwmaSeries.Latency, 10, 5, 0);
    // τ after the first sample: the next one clears the cold-start word and already uses e^(−Δt/τ).
    let now = 1005;
    let est = 10_000;
    let mean = 10_000;
    let last = 5;
    for (let k = 0; k < 2000; k++) {
      const sample = Math.round(1000 * 60 * rng.float()) / 1000;
      t.ewma.observe(0, EwmaSeries.Latency, sample, now, 0);
      const w = Math.exp(-(now - last) / 1000);
      est = Math.round(peakEwmaNext(est / 1000, w, sample) * 1000);
      mean = Math.round(mean * w + sample * 1000 * (1 - w));
      last = now;
      expect(t.estimateUs(0, EwmaSeries.Latency, now)).toBe(est);
      expect(t.ewma.meanRecordedUs(0)).toBe(mean);
      now += 1 + Math.floor(20 * rng.float());
    }
  });
});
