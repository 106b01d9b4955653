import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendFarm } from '../src/backends.js';
import { LineConnection } from '../src/protocol.js';
import { scenarioPlan, type BackendModel } from '../src/scenarios.js';
import { until } from '../../../test/helpers/until.js';

const model = (id: string, over: Partial<BackendModel> = {}): BackendModel => ({
  id,
  role: 'normal',
  medianMs: 0,
  sigma: 0,
  failureRate: 0,
  weight: 1,
  priority: 0,
  status: 'ready',
  ...over,
});

describe('bench backends (real TCP on 127.0.0.1)', () => {
  let farm: BackendFarm;
  beforeAll(async () => {
    farm = await BackendFarm.start(
      [
        model('ok'),
        model('bad', { failureRate: 1 }),
        model('flaky', { failureRate: 0.05 }),
        model('slow', { medianMs: 30 }),
        model('hold', { medianMs: 600_000 }),
      ],
      { seed: 3 },
    );
  });
  afterAll(async () => farm.close());

  it('listens on loopback and answers OK on a healthy backend, ERR on a failing one', async () => {
    const ok = farm.get('ok');
    expect(ok.address).toMatch(/^127\.0\.0\.1:\d+$/);
    const c = await LineConnection.open(ok.host, ok.port);
    for (let i = 0; i < 20; i++) expect(await c.request()).toBe(true);
    c.close();
    const bad = farm.get('bad');
    const d = await LineConnection.open(bad.host, bad.port);
    expect(await d.request()).toBe(false);
    d.close();
    expect(bad.failed).toBe(1);
  });

  it('fails about 5 % of requests on the 5 % backend (n = 2000, σ = 0.49 %, band ±2.5 % = 5σ)', async () => {
    const b = farm.get('flaky');
    const conns = await Promise.all(Array.from({ length: 8 }, () => LineConnection.open(b.host, b.port)));
    let errors = 0;
    await Promise.all(
      conns.map(async (c) => {
        for (let i = 0; i < 250; i++) if (!(await c.request())) errors++;
        c.close();
      }),
    );
    expect(errors / 2000).toBeGreaterThan(0.025);
    expect(errors / 2000).toBeLessThan(0.075);
    expect(b.failed).toBe(errors);
  });

  it('counts its in-flight requests server-side while replies are pending, and not once answered', async () => {
    // 'hold' answers after 10 minutes: its five requests stay in flight for the whole test, however slow the machine.
    const h = farm.get('hold');
    const held = await Promise.all(Array.from({ length: 5 }, () => LineConnection.open(h.host, h.port)));
    for (const c of held) void c.request().catch(() => {}); // rejected when the farm closes
    await until(() => h.inFlight === 5, 'five requests in flight at the server');
    expect([h.inFlight, h.answered]).toEqual([5, 0]);
    // 'slow' answers after 30 ms: once the reply is read, nothing is in flight there.
    const s = farm.get('slow');
    const c = await LineConnection.open(s.host, s.port);
    const before = s.answered;
    expect(await c.request()).toBe(true);
    expect([s.inFlight, s.answered - before]).toEqual([0, 1]);
    c.close();
  });

  it('a broken connection rejects the pending request', async () => {
    const s = farm.get('slow');
    const c = await LineConnection.open(s.host, s.port);
    const p = c.request();
    c.close();
    await expect(p).rejects.toThrow();
    expect(c.usable).toBe(false);
  });

  it('setFailureRate takes effect for the next request', async () => {
    const ok = farm.get('ok');
    ok.setFailureRate(1);
    const c = await LineConnection.open(ok.host, ok.port);
    expect(await c.request()).toBe(false);
    ok.setFailureRate(0);
    expect(await c.request()).toBe(true);
    c.close();
  });

  it('setAccepting(false) resets open connections and refuses connects on the same port; true listens there again', async () => {
    const ok = farm.get('ok');
    const port = ok.port;
    const open = await LineConnection.open(ok.host, port);
    await ok.setAccepting(false);
    await expect(open.request()).rejects.toThrow();
    await expect(LineConnection.open(ok.host, port)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await ok.setAccepting(true);
    expect(ok.port).toBe(port);
    const again = await LineConnection.open(ok.host, port);
    expect(await again.request()).toBe(true);
    again.close();
  });
});

describe('scenario plans', () => {
  it('slow-backend: one backend 10× slower, one failing 5 %, the rest alike', () => {
    const p = scenarioPlan('slow-backend', 8);
    expect(p.backends).toHaveLength(8);
    expect(p.backends.filter((b) => b.role === 'slow').map((b) => b.medianMs)).toEqual([p.backends[2]!.medianMs * 10]);
    expect(p.backends.filter((b) => b.role === 'failing').map((b) => b.failureRate)).toEqual([0.05]);
    expect(p.defaultPolicies).toEqual(['round-robin', 'random', 'weighted', 'least-loaded', 'p2c:connections', 'p2c:latency']);
  });

  it('failover: half of the primary priority goes away and only active checks can see it (no status change)', () => {
    const p = scenarioPlan('failover', 8);
    expect(p.backends.filter((b) => b.priority === 0)).toHaveLength(4);
    expect(p.backends.filter((b) => b.priority === 1)).toHaveLength(4);
    const lost = p.events.flatMap((e) => e.changes.filter((c) => c.accepting === false).map((c) => c.id));
    expect(lost).toEqual(['b0', 'b1']);
    expect(p.events.flatMap((e) => e.changes).every((c) => c.status === undefined)).toBe(true);
    expect(p.health?.check?.kind).toBe('tcp');
  });

  it('membership-churn: backends join (absent → ready), then drain and leave', () => {
    const p = scenarioPlan('membership-churn', 8);
    const joiners = p.backends.filter((b) => b.status === 'absent').map((b) => b.id);
    expect(joiners).toEqual(['b8', 'b9']);
    expect(p.events.map((e) => e.changes.map((c) => c.status))).toEqual([
      ['ready', 'ready'],
      ['draining', 'draining'],
      ['absent', 'absent'],
    ]);
    for (let i = 1; i < p.events.length; i++) expect(p.events[i]!.at).toBeGreaterThan(p.events[i - 1]!.at);
  });
});
