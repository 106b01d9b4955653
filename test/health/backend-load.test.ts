// Backend-reported load: the agent check (HAProxy's agent protocol) against
// real agents on loopback, and ORCA-style weights (gRFC A58) from real load
// endpoints, with the A58 rules on injected times.
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseLoadReport, resolveOrca, weightsInForce } from '../../src/health/orca.js';
import { LoadTable } from '../../src/load/load-table.js';
import { parseAgentReply } from '../../src/health/probes.js';
import { ReportFlag } from '../../src/load/backend-load.js';
import { S_ORCA_SEQ } from '../../src/load/layout.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { manualClock, pickShares } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

function listen<S extends Server | HttpServer>(s: S): Promise<S> {
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}
const portOf = (s: Server | HttpServer): number => (s.address() as AddressInfo).port;

describe('agent replies (HAProxy agent protocol)', () => {
  it.each([
    ['75%\n', { weightPercent: 75 }],
    ['drain', { admin: 'drain' }],
    ['MAINT', { admin: 'maint' }],
    ['ready 50%', { admin: 'ready', weightPercent: 50 }],
    ['up,80%', { state: 'up', weightPercent: 80 }],
    ['down # disk full', { state: 'down', description: 'disk full' }],
    ['stopped', { state: 'down' }],
    ['maxconn:10 up', { state: 'up' }],
  ])('%j reads as %j', (text, expected) => {
    expect(parseAgentReply(text)).toEqual({
      weightPercent: undefined,
      admin: undefined,
      state: undefined,
      description: undefined,
      ...expected,
    });
  });

  it('refuses a reply without a word, or with a word the protocol does not have', () => {
    expect(() => parseAgentReply('  \n')).toThrow('agent replied "  \\n": no word');
    expect(() => parseAgentReply('up bogus')).toThrow('agent replied "bogus": not an agent word');
  });

  it('a backend whose agent says drain gets no new leases; 50 % halves its share; ready brings it back', async () => {
    const replies = new Map<string, string>([
      ['a', 'up 100%'],
      ['b', 'up 100%'],
      ['c', 'up 50%'],
      ['d', 'up 100%'],
    ]);
    const agents = await Promise.all(
      [...replies.keys()].map(async (id) => {
        const s = await listen(createServer((sock) => sock.end(`${replies.get(id)}\n`)));
        open.push(s);
        return { id, port: portOf(s) };
      }),
    );
    const b = new Balancer({ capacity: 8, health: { check: { kind: 'agent', intervalMs: 20, jitterPercent: 0, rise: 1, fall: 1 } } });
    open.push(b);
    b.update(agents.map((a) => ({ id: a.id, address: `127.0.0.1:${a.port}` })));
    const slotOf = (id: string) => b.slotEntries().find((e) => e.id === id)!.slot;
    await until(() => (b.ownerTable.reported.flags(slotOf('c')) & ReportFlag.Weight) !== 0, 'the agents answered');
    const router = b.router({ policy: 'weighted', seed: 11 });
    // Weights 1, 1, 0.5, 1: c's share 1/7 (20,000 picks: sd 0.0025; band ±0.012).
    expect(Math.abs(pickShares(router, 20_000).get('c')! - 1 / 7)).toBeLessThan(0.012);
    replies.set('d', 'drain');
    await until(() => (b.ownerTable.reported.flags(slotOf('d')) & ReportFlag.Drain) !== 0, 'd drained');
    expect(pickShares(router, 5000).get('d')).toBeUndefined();
    // A drained backend takes no new lease even when it is the only one a call may use.
    expect(thrown(() => router.acquire({ exclude: ['a', 'b', 'c'] })).code).toBe('NoEligibleCandidates');
    replies.set('d', 'ready');
    await until(() => (b.ownerTable.reported.flags(slotOf('d')) & ReportFlag.Drain) === 0, 'd ready again');
    expect(pickShares(router, 5000).get('d')).toBeGreaterThan(0);
    router.close();
  });

  it('an agent reporting down takes the backend down (fall), with its description in the log reason', async () => {
    const s = await listen(createServer((sock) => sock.end('down # disk full\n')));
    open.push(s);
    const b = new Balancer({ capacity: 4, health: { check: { kind: 'agent', intervalMs: 20, jitterPercent: 0, rise: 1, fall: 1 } } });
    open.push(b);
    b.update([{ id: 'x', address: `127.0.0.1:${portOf(s)}` }]);
    await until(() => b.healthStats().backends[0]?.check === 'down', 'x down');
  });

  it('refuses agent options on other kinds, and a bad agent port', () => {
    expect(thrown(() => new Balancer({ health: { check: { kind: 'tcp', agentPort: 9 } } })).message).toBe(
      'options.health.check.agentPort: applies only to kind "agent" (kind is "tcp"), got 9',
    );
    expect(thrown(() => new Balancer({ health: { check: { kind: 'agent', agentPort: 70000 } } })).message).toBe(
      'options.health.check.agentPort: must be an integer in [1, 65535], got 70000',
    );
  });
});

describe('ORCA-style weights (gRFC A58)', () => {
  it.each([
    ['TEXT cpu_utilization=0.3, rps_fractional=100, eps=2', { utilization: 0.3, qps: 100, eps: 2 }],
    ['cpu_utilization=0.3,application_utilization=0.6,rps_fractional=10', { utilization: 0.6, qps: 10, eps: 0 }],
    ['TEXT application_utilization=0, cpu_utilization=0.2, rps_fractional=5, named_metrics.foo=1', { utilization: 0.2, qps: 5, eps: 0 }],
  ])('%j reads as %j', (text, expected) => {
    expect(parseLoadReport(text)).toEqual(expected);
  });

  it('refuses reports it cannot read, naming the part', () => {
    expect(() => parseLoadReport('TEXT cpu_utilization=0.3')).toThrow(
      'load report: needs rps_fractional and cpu_utilization or application_utilization',
    );
    expect(() => parseLoadReport('TEXT cpu=0.3, rps_fractional=1')).toThrow('load report: unknown key "cpu"');
    expect(() => parseLoadReport('TEXT cpu_utilization=-1, rps_fractional=1')).toThrow(
      'load report: cpu_utilization must be a finite number >= 0',
    );
  });

  it('weight = qps / (utilization + eps / qps × penalty), counted after the blackout, expired after the expiry, the mean for the others', () => {
    const o = resolveOrca({ blackoutMs: 10_000, expiryMs: 180_000, errorUtilizationPenalty: 2 }, 'orca');
    const table = LoadTable.create({ capacity: 4 });
    const r = table.reported;
    const slots = [0, 1, 2];
    const w: number[] = [];
    // Times are wrapped ms; 0 would read as "none", so the run starts at 1000.
    r.report(0, 0.5, 100, 0, 1000);
    r.report(1, 0.5, 100, 10, 1000);
    // In the blackout: nothing in force.
    expect(weightsInForce(r, slots, 10_999, o, w)).toBe(0);
    r.report(0, 0.5, 100, 0, 11_000);
    r.report(1, 0.5, 100, 10, 11_000);
    // a: 100 / 0.5 = 200; b: 100 / (0.5 + 0.1 × 2) = 142.857…; c (no report): their mean.
    expect(weightsInForce(r, slots, 11_000, o, w)).toBe(2);
    expect(w[0]).toBe(200);
    expect(w[1]).toBeCloseTo(100 / 0.7, 9);
    expect(w[2]).toBeCloseTo((200 + 100 / 0.7) / 2, 9);
    // b stops reporting: expired 3 min after its last report; a's reports (no gap of 3 min) keep it in force.
    r.report(0, 0.5, 100, 0, 101_000);
    r.report(0, 0.5, 100, 0, 191_000);
    expect(weightsInForce(r, slots, 191_000, o, w)).toBe(1);
    expect(w).toEqual([200, 200, 200]);
    // b reports again after the gap (its expired report was forgotten): a new blackout.
    r.report(1, 0.25, 100, 0, 196_000);
    expect(weightsInForce(r, slots, 201_000, o, w)).toBe(1);
    expect(w[1]).toBe(200);
    r.report(1, 0.25, 100, 0, 206_000);
    r.report(0, 0.5, 100, 0, 206_000);
    expect(weightsInForce(r, slots, 206_000, o, w)).toBe(2);
    expect(w[1]).toBe(400);
    // A report without load ends the run: no weight until a new blackout has passed.
    r.report(1, 0, 100, 0, 207_000);
    r.report(1, 0.25, 100, 0, 208_000);
    expect(weightsInForce(r, slots, 208_000, o, w)).toBe(1);
    expect(w[1]).toBe(200);
  });

  it('report words: fixed point as documented, saturated, and a writer that finds the seqlock held drops its report', () => {
    const table = LoadTable.create({ capacity: 2 });
    const r = table.reported;
    const got = { utilization: 0, qps: 0, eps: 0, at: 0, since: 0 };
    expect(r.readReport(0, 5, 1000, got)).toBe(false);
    expect(r.report(0, 0.3333337, 12.346, 0.016, 0)).toBe(true);
    expect(r.readReport(0, 5, 1000, got)).toBe(true);
    // Utilization in millionths, qps and eps in hundredths; a time of 0 is stored as 1.
    expect(got).toEqual({ utilization: 0.333334, qps: 12.35, eps: 0.02, at: 1, since: 1 });
    r.report(0, 5000, 2e7, 2e7, 10);
    r.readReport(0, 10, 1000, got);
    expect([got.utilization, got.qps, got.eps]).toEqual([0x3fffffff / 1e6, 0x3fffffff / 100, 0x3fffffff / 100]);
    // The run began at 1 and goes on.
    expect([got.at, got.since]).toEqual([10, 1]);
    // The report seqlock odd: a thread is writing; another drops its report rather than wait.
    const i32 = new Int32Array(table.buffer);
    const seq = table.layout.slot(0) + S_ORCA_SEQ;
    Atomics.add(i32, seq, 1);
    expect(r.report(0, 0.5, 10, 0, 20)).toBe(false);
    expect(r.readReport(0, 20, 1000, got)).toBe(false);
    Atomics.add(i32, seq, 1);
    expect(r.readReport(0, 20, 1000, got)).toBe(true);
    expect(got.at).toBe(10);
    // The owner's clear (a new occupant) forgets it.
    r.clear(0);
    expect(r.readReport(0, 20, 1000, got)).toBe(false);
  });

  it('four backends, one with half the capacity reporting twice the utilization: its share converges to its capacity after one blackout and one poll', async () => {
    const clock = manualClock(1000);
    const servers = await Promise.all(
      ['a', 'b', 'c', 'half'].map(async (id) => {
        // The same traffic on each: utilization = load / capacity, so the half-capacity one reports twice as much.
        const utilization = id === 'half' ? 0.8 : 0.4;
        const s = await listen(
          createHttpServer((_req, res) => {
            res.setHeader('endpoint-load-metrics', `TEXT cpu_utilization=${utilization}, rps_fractional=50, eps=0`);
            res.end();
          }),
        );
        open.push(s);
        return { id, port: portOf(s) };
      }),
    );
    const b = new Balancer({ capacity: 8, clock: clock.now, health: { orca: { blackoutMs: 10_000, intervalMs: 1000 } } });
    open.push(b);
    b.update(servers.map((s) => ({ id: s.id, address: `127.0.0.1:${s.port}` })));
    const router = b.router({ policy: 'weighted', seed: 5 });
    await b.pollLoadReports();
    // In the blackout: equal shares.
    expect(Math.abs(pickShares(router, 20_000).get('half')! - 0.25)).toBeLessThan(0.012);
    clock.advance(10_000);
    await b.pollLoadReports();
    // Weights 125, 125, 125, 62.5: half's share is its capacity's, 1/7 (20,000 picks, band ±0.012 ≈ 5 sd).
    const s = pickShares(router, 20_000);
    expect(Math.abs(s.get('half')! - 1 / 7)).toBeLessThan(0.012);
    for (const id of ['a', 'b', 'c']) expect(Math.abs(s.get(id)! - 2 / 7)).toBeLessThan(0.015);
    router.close();
  });
});
