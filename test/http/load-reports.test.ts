// ORCA load reports on responses: backends answer every request with an
// `endpoint-load-metrics` header, the dispatcher records it in the slot's
// report words, and the owner's A58 computation (health.orca, source
// "responses") turns it into weights — against real loopback HTTP servers,
// on an injected clock (time moves by request, so every figure is exact).
import { afterEach, describe, expect, it } from 'vitest';
import { ReportScan, newLoadReportScan, scanDecimal, scanLoadReport } from '../../src/core/load-report.js';
import { HttpCounters } from '../../src/http/counters.js';
import { PoiseDispatcher } from '../../src/http/dispatcher.js';
import { createLogger } from '../../src/log.js';
import { createProbeServer } from '../../src/probe-server/middleware.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { type HttpBackend, fleet } from '../helpers/http-backends.js';
import { slotOf } from '../helpers/http-rig.js';
import { manualClock } from '../helpers/runtime.js';
import { undiciVariants } from '../helpers/undici-variants.js';

const variants = await undiciVariants();
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('the load report scanner (no allocation beyond the header string)', () => {
  it.each([
    ['TEXT cpu_utilization=0.3, rps_fractional=10.0, eps=0.1', 0.3, 10, 0.1],
    ['  TEXT\tcpu_utilization = 0.3 ,rps_fractional=1e2,  eps=2E-1 ', 0.3, 100, 0.2],
    ['application_utilization=0.75,cpu_utilization=0.1,rps_fractional=3,named_metrics.q=9,mem_utilization=0.5', 0.75, 3, 0],
    ['cpu_utilization=1.5, rps_fractional=0.25,,', 1.5, 0.25, 0],
  ])('%j reads as utilization %d, qps %d, eps %d', (text, utilization, qps, eps) => {
    const s = newLoadReportScan();
    expect(scanLoadReport(text, s)).toBe(ReportScan.Ok);
    expect([s.utilization, s.qps, s.eps]).toEqual([utilization, qps, eps]);
  });

  it.each([
    ['TEXT cpu_utilization=0.3', ReportScan.Missing],
    ['rps_fractional=4', ReportScan.Missing],
    ['TEXT cpu=0.3, rps_fractional=1', ReportScan.UnknownKey],
    ['TEXTcpu_utilization=0.3, rps_fractional=1', ReportScan.UnknownKey],
    ['cpu_utilization=-1, rps_fractional=1', ReportScan.BadNumber],
    ['cpu_utilization=0x10, rps_fractional=1', ReportScan.BadNumber],
    ['cpu_utilization=Infinity, rps_fractional=1', ReportScan.BadNumber],
    ['cpu_utilization=, rps_fractional=1', ReportScan.BadNumber],
    ['cpu_utilization=1e999, rps_fractional=1', ReportScan.BadNumber],
    ['cpu_utilization 0.3, rps_fractional=1', ReportScan.NotKeyValue],
    ['=0.3', ReportScan.NotKeyValue],
  ])('%j is refused with code %i', (text, code) => {
    expect(scanLoadReport(text, newLoadReportScan())).toBe(code);
  });

  it('reads every decimal 0.000 .. 1.999 exactly as Number() does', () => {
    for (let k = 0; k < 2000; k++) {
      const text = (k / 1000).toFixed(3);
      expect(scanDecimal(text, 0, text.length)).toBe(Number(text));
    }
  });
});

/**
 * A backend of `capacity` requests per second: each response reports the
 * requests it served in the last second of test time (qps) and qps /
 * capacity as its utilization, so A58's qps / utilization is its capacity
 * whatever share it gets.
 */
function reportLoad(b: HttpBackend, capacity: number, now: () => number): void {
  const times: number[] = [];
  b.respond = (_req, res) => {
    const t = now();
    times.push(t);
    while (times.length > 0 && times[0]! <= t - 1000) times.shift();
    const qps = times.length;
    res.writeHead(200, { 'endpoint-load-metrics': `TEXT cpu_utilization=${qps / capacity}, rps_fractional=${qps}, eps=0` });
    res.end('ok');
  };
}

describe.each(variants)('load reports through PoiseDispatcher with $name', ({ u, factory }) => {
  it('four backends, one with half the capacity (reporting twice the utilization for the same traffic): equal shares in the blackout, then its capacity share, 1/7, from the first computation after it', async () => {
    const clock = manualClock(1000);
    const f = await fleet(4);
    cleanups.push(() => f.close());
    const caps = [50, 50, 50, 25];
    for (const [i, b] of f.backends.entries()) reportLoad(b, caps[i]!, clock.now);
    const balancer = new Balancer({
      logger: createLogger({ level: 'silent' }),
      clock: clock.now,
      health: { orca: { source: 'responses', blackoutMs: 10_000, intervalMs: 1000 } },
    });
    cleanups.push(async () => balancer.close());
    balancer.update(f.specs());
    const counters = HttpCounters.create({ capacity: balancer.table.capacity });
    const dispatcher = new PoiseDispatcher({
      router: balancer.router({ policy: 'weighted', seed: 3 }),
      origin: 'http://api',
      counters,
      ...(factory === undefined ? {} : { factory }),
    });
    cleanups.push(() => dispatcher.destroy());
    // 100 requests per second of test time (10 ms each, one at a time); the
    // owner computes the weights once a second, as its timer would.
    // Counted by the backends themselves (what they really served).
    const served = async (n: number): Promise<Record<string, number>> => {
      const before = f.counts();
      for (let i = 0; i < n; i++) {
        clock.advance(10);
        const res = await u.request('http://api/x', { dispatcher });
        await res.body.dump();
        if (i % 100 === 99) await balancer.pollLoadReports();
      }
      const after = f.counts();
      return Object.fromEntries(Object.keys(after).map((k) => [k, (after[k]! - before[k]!) / n]));
    };
    // The blackout: 10 s of reports = 1,000 requests; no weight in force yet
    // (4,000 draws at p = 0.25: sd 0.0068, band ±0.03).
    const during = await served(1000);
    expect(Math.abs(during['h3']! - 0.25)).toBeLessThan(0.04);
    expect(balancer.ownerTable.reported.orcaWeight(slotOf(balancer, 'h3'))).toBeUndefined();
    // 100 more requests (one more computation, at 11 s): the weights are in
    // force — 50, 50, 50, 25 relative to their mean 43.75.
    await served(100);
    for (let i = 0; i < 4; i++) {
      expect(balancer.ownerTable.reported.orcaMultiplier(slotOf(balancer, `h${i}`))).toBeCloseTo(caps[i]! / 43.75, 2);
    }
    // From here on h3 takes its capacity's share, 1/7 (4,000 requests: sd
    // 0.0055, band ±0.025 ≈ 4.5 sd; equal shares would be 0.25).
    const after = await served(4000);
    expect(Math.abs(after['h3']! - 1 / 7)).toBeLessThan(0.025);
    for (const id of ['h0', 'h1', 'h2']) expect(Math.abs(after[id]! - 2 / 7)).toBeLessThan(0.03);
    expect(dispatcher.loadReports.malformed).toBe(0);
    expect(dispatcher.loadReports.read).toBe(5100);
    const h3 = slotOf(balancer, 'h3');
    expect(counters.figures(h3, balancer.table.stats(h3).generation).loadReports).toBe(f.backends[3]!.seen.length);
  }, 60_000);

  it("the probe-server's poise-load header refreshes the backend's probe answer (busy backends report for free)", async () => {
    const clock = manualClock(3000);
    const f = await fleet(1);
    cleanups.push(() => f.close());
    const probes = createProbeServer({ now: () => clock.now() });
    f.backends[0]!.respond = (req, res) => probes.handle(req, res, () => res.end('ok'));
    const balancer = new Balancer({ logger: createLogger({ level: 'silent' }), clock: clock.now });
    cleanups.push(async () => balancer.close());
    balancer.update(f.specs());
    const dispatcher = new PoiseDispatcher({
      router: balancer.router({ policy: 'probe' }),
      origin: 'http://api',
      ...(factory === undefined ? {} : { factory }),
    });
    cleanups.push(() => dispatcher.destroy());
    // No probe pool runs: the header is read, but nothing is written to the shared words (no pick would read it).
    await (await u.request('http://api/x', { dispatcher })).body.dump();
    expect(dispatcher.loadReports.probes).toBe(0);
    expect(balancer.ownerTable.probes.counts().headerReports).toBe(0);
    // The owner's prober (health.probe) sets the pool's limits; here without its probes.
    balancer.ownerTable.probes.configure({ maxAgeMs: 1000, maxUses: 32, quantile: 0.5, sample: 5 });
    for (let k = 0; k < 2; k++) {
      clock.advance(4);
      const res = await u.request('http://api/x', { dispatcher });
      await res.body.dump();
    }
    expect(dispatcher.loadReports.probes).toBe(2);
    // The second response said: 1 in flight (itself), latency 0 ms (the clock does not move within a request).
    const got = { inflight: 0, latencyUs: 0, ageMs: 0, uses: 0 };
    expect(balancer.ownerTable.probes.read(slotOf(balancer, 'h0'), 3010, got)).toBe(true);
    expect(got).toMatchObject({ inflight: 1, latencyUs: 0, ageMs: 2 });
    expect(balancer.ownerTable.probes.counts().headerReports).toBe(2);
  });

  it('a malformed header is ignored and counted; the request succeeds and the last good report stays', async () => {
    const clock = manualClock(1000);
    const f = await fleet(1);
    cleanups.push(() => f.close());
    let header = 'TEXT cpu_utilization=0.5, rps_fractional=10';
    f.backends[0]!.respond = (_req, res) => {
      res.writeHead(200, { 'endpoint-load-metrics': header });
      res.end('ok');
    };
    const balancer = new Balancer({ logger: createLogger({ level: 'silent' }), clock: clock.now });
    cleanups.push(async () => balancer.close());
    balancer.update(f.specs());
    const counters = HttpCounters.create({ capacity: balancer.table.capacity });
    const dispatcher = new PoiseDispatcher({
      router: balancer.router(),
      origin: 'http://api',
      counters,
      ...(factory === undefined ? {} : { factory }),
    });
    cleanups.push(() => dispatcher.destroy());
    const slot = slotOf(balancer, 'h0');
    const get = async (): Promise<number> => {
      const res = await u.request('http://api/x', { dispatcher });
      await res.body.dump();
      return res.statusCode;
    };
    expect(await get()).toBe(200);
    const got = { utilization: 0, qps: 0, eps: 0, at: 0, since: 0 };
    expect(balancer.ownerTable.reported.readReport(slot, 1000, 180_000, got)).toBe(true);
    expect(got).toEqual({ utilization: 0.5, qps: 10, eps: 0, at: 1000, since: 1000 });
    for (const bad of ['TEXT cpu_utilization=lots, rps_fractional=10', 'garbage', 'cpu=1, rps_fractional=1', '']) {
      header = bad;
      clock.advance(5);
      expect(await get()).toBe(200);
    }
    expect(dispatcher.loadReports).toEqual({ read: 1, malformed: 4, busy: 0, probes: 0 });
    const fig = counters.figures(slot, balancer.table.stats(slot).generation);
    expect([fig.loadReports, fig.loadReportsMalformed]).toEqual([1, 4]);
    // The last good report is unchanged.
    expect(balancer.ownerTable.reported.readReport(slot, 1020, 180_000, got)).toBe(true);
    expect(got.at).toBe(1000);
  });

  it('a caller on the older handler API: the raw header is found in any case and recorded', async () => {
    const clock = manualClock(7000);
    const f = await fleet(1);
    cleanups.push(() => f.close());
    f.backends[0]!.respond = (_req, res) => {
      res.writeHead(200, { 'Endpoint-Load-Metrics': 'TEXT cpu_utilization=0.25, rps_fractional=40, eps=4' });
      res.end('ok');
    };
    const balancer = new Balancer({ logger: createLogger({ level: 'silent' }), clock: clock.now });
    cleanups.push(async () => balancer.close());
    balancer.update(f.specs());
    const dispatcher = new PoiseDispatcher({
      router: balancer.router(),
      origin: 'http://api',
      ...(factory === undefined ? {} : { factory }),
    });
    cleanups.push(() => dispatcher.destroy());
    const status = await new Promise<number>((resolve, reject) => {
      let code = 0;
      dispatcher.dispatch({ origin: 'http://api', path: '/x', method: 'GET' }, {
        onConnect() {},
        onHeaders(statusCode: number) {
          code = statusCode;
          return true;
        },
        onData() {
          return true;
        },
        onComplete() {
          resolve(code);
        },
        onError: reject,
      } as never);
    });
    expect(status).toBe(200);
    expect(dispatcher.loadReports).toEqual({ read: 1, malformed: 0, busy: 0, probes: 0 });
    const got = { utilization: 0, qps: 0, eps: 0, at: 0, since: 0 };
    expect(balancer.ownerTable.reported.readReport(slotOf(balancer, 'h0'), 7000, 180_000, got)).toBe(true);
    expect(got).toEqual({ utilization: 0.25, qps: 40, eps: 4, at: 7000, since: 7000 });
  });
});
