/**
 * poise-lb/probe-server on a real http.Server: in-flight counted exactly
 * under concurrent requests (finished, and aborted by the client), the
 * probe path's answer, the report header on ordinary responses, the latency
 * estimate on an injected clock, and the report text's scanner.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { newProbeReportScan, scanProbeReport } from '../../src/core/probe-report.js';
import { createProbeServer, type ProbeServer } from '../../src/probe-server/middleware.js';
import { thrown } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** A server whose handler holds each request until `release()` is called; the probe middleware in front. */
async function heldServer(probes: ProbeServer): Promise<{ port: number; held: Array<() => void> }> {
  const held: Array<() => void> = [];
  const server = http.createServer(probes.wrap((_req, res) => held.push(() => res.end('ok'))));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { port: (server.address() as AddressInfo).port, held };
}

function get(port: number, path: string, agent: http.Agent): { done: Promise<http.IncomingMessage>; req: http.ClientRequest } {
  let req!: http.ClientRequest;
  const done = new Promise<http.IncomingMessage>((resolve, reject) => {
    req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res));
    });
    req.on('error', reject);
  });
  return { done, req };
}

describe('the probe middleware', () => {
  it('counts in-flight exactly under concurrent requests, finished or aborted, and reports it', async () => {
    const probes = createProbeServer({ path: '/probe' });
    const { port, held } = await heldServer(probes);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    cleanups.push(async () => agent.destroy());
    const N = 24;
    const reqs = Array.from({ length: N }, () => get(port, '/work', agent));
    await until(() => held.length === N, 'every request held');
    expect(probes.inflight).toBe(N);
    // A probe is answered at once, not counted, and says what is in flight.
    const probe = await get(port, '/probe?x=1', agent).done;
    expect(probe.statusCode).toBe(200);
    const scan = newProbeReportScan();
    expect(scanProbeReport(String(probe.headers['poise-load']), scan)).toBe(true);
    expect(scan.rif).toBe(N);
    expect(probes.probes).toBe(1);
    expect(probes.inflight).toBe(N);
    // Half finish, a quarter are aborted by the client: each counted down once.
    for (let k = 0; k < N / 2; k++) held[k]!();
    for (let k = N / 2; k < (3 * N) / 4; k++) {
      reqs[k]!.req.destroy();
      reqs[k]!.done.catch(() => undefined);
    }
    await Promise.all(reqs.slice(0, N / 2).map((r) => r.done));
    await until(() => probes.inflight === N / 4, 'aborted requests counted down');
    // Finishing an aborted request's response later counts nothing twice.
    for (let k = N / 2; k < N; k++) held[k]!();
    await Promise.all(reqs.slice((3 * N) / 4).map((r) => r.done));
    await until(() => probes.inflight === 0, 'all done');
    expect(probes.inflight).toBe(0);
    // An ordinary response carries the report as of its arrival (it counts itself).
    const one = get(port, '/work', agent);
    await until(() => held.length === N + 1, 'held');
    held[N]!();
    const res = await one.done;
    expect(scanProbeReport(String(res.headers['poise-load']), scan)).toBe(true);
    expect(scan.rif).toBe(1);
  });

  it('keeps an EWMA of the response time on its clock', async () => {
    let now = 0;
    const probes = createProbeServer({ alpha: 0.5, now: () => now });
    const { port, held } = await heldServer(probes);
    const agent = new http.Agent({ keepAlive: true });
    cleanups.push(async () => agent.destroy());
    for (const [k, ms] of [
      [0, 10],
      [1, 30],
    ] as const) {
      const r = get(port, '/', agent);
      await until(() => held.length === k + 1, 'held');
      now += ms;
      held[k]!();
      await r.done;
    }
    // First sample 10 ms; then 10 + 0.5 × (30 − 10) = 20 ms.
    expect(probes.latencyUs).toBe(20_000);
    const scan = newProbeReportScan();
    const probe = await get(port, '/poise/probe', agent).done;
    expect(scanProbeReport(String(probe.headers['poise-load']), scan)).toBe(true);
    expect(scan).toEqual({ rif: 0, latencyUs: 20_000 });
  });

  it('adds no header when told not to, and refuses bad options naming the field', async () => {
    const probes = createProbeServer({ reportOnResponses: false });
    const { port, held } = await heldServer(probes);
    const r = get(port, '/', new http.Agent());
    await until(() => held.length === 1, 'held');
    held[0]!();
    expect((await r.done).headers['poise-load']).toBeUndefined();
    expect(thrown(() => createProbeServer({ path: 'probe' })).message).toMatch(/options\.path/);
    expect(thrown(() => createProbeServer({ alpha: 0 })).message).toMatch(/options\.alpha/);
    expect(thrown(() => createProbeServer({ now: 1 as never })).message).toMatch(/options\.now/);
    expect(thrown(() => createProbeServer({ nope: 1 } as never)).code).toBe('InvalidConfig');
  });
});

describe('the report text', () => {
  it('reads both keys in any order, skips other keys, refuses the rest', () => {
    const s = newProbeReportScan();
    expect(scanProbeReport('rif=3, latency_us=1200', s)).toBe(true);
    expect(s).toEqual({ rif: 3, latencyUs: 1200 });
    expect(scanProbeReport(' latency_us = 7 ,cpu=0.5,rif=0 ', s)).toBe(true);
    expect(s).toEqual({ rif: 0, latencyUs: 7 });
    for (const bad of ['', 'rif=3', 'rif=x, latency_us=1', 'rif=1 latency_us=2', 'rif', 'rif=-1, latency_us=1', 'rif=1.5, latency_us=1'])
      expect(scanProbeReport(bad, s), bad).toBe(false);
  });
});
