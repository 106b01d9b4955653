/**
 * A client no backend was spliced for is refused for a reason the proxy
 * reads from an error code (the run's `reason`: `ConnectTimeout`,
 * `NoEligibleCandidates`, ...; proxy/termination.ts), never from an error's
 * `cause`: the access log's termination and state, and the refusal counter.
 * The same through the one dialer with and without an admission band.
 * Against real loopback ports: one whose connects hang
 * (test/helpers/hanging-port) and one nobody listens on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../../src/admission/admission.js';
import { fixedBand } from '../../../src/proxy/admission.js';
import { encodeProxyV1 } from '../../../src/proxy/proxy-protocol.js';
import { captureLog } from '../../helpers/log-capture.js';
import { hangingPort } from '../../helpers/hanging-port.js';
import { openLeases } from '../../helpers/leases.js';
import { dial } from '../../helpers/loopback.js';
import { ManualTimers } from '../../helpers/manual-timers.js';
import { freePort } from '../../helpers/ports.js';
import { loopbackBalancer, proxyOn } from '../../helpers/proxy-on.js';
import { until } from '../../helpers/until.js';
import type { Router } from '../../../src/runtime/router.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const NO_EJECTION = { consecutiveFailures: 1_000 };

describe.each([
  { name: 'without a band', band: false },
  { name: 'with an admission band', band: true },
])('proxy refusals by error code, $name', ({ band }) => {
  const admission = band ? { admission: fixedBand(10) } : {};
  /** The router, with an admission gate (the top band of two: admitted below full load) when the case has a band. */
  const gated = (router: Router): Router => {
    if (band) new AdmissionGate(router, { bands: [10, 1], minCeiling: 0.5, kind: 'connection' });
    return router;
  };

  it('every connect times out: refused as connect-timeout (sC), counted a timeout, each backend blamed once', async () => {
    const hang = await hangingPort(cleanups);
    const bal = loopbackBalancer(cleanups, [
      { id: 'h1', port: hang },
      { id: 'h2', port: hang },
    ]);
    const timers = new ManualTimers();
    const log = captureLog('info');
    const { proxy, port } = await proxyOn(cleanups, gated(bal.router({ policy: 'round-robin', ejection: NO_EJECTION })), {
      timers,
      connectTimeoutMs: 1000,
      attempts: 2,
      accessLog: log.logger,
      ...admission,
    });
    const failures = (): number[] => [0, 1].map((slot) => bal.table.stats(slot).failures);
    const client = await dial(cleanups, port);
    client.on('error', () => {});
    await until(() => openLeases(bal) === 1, 'the first attempt holds its lease');
    await timers.advance(999);
    expect(failures()).toEqual([0, 0]);
    await timers.advance(1);
    await until(() => failures()[0] === 1 && openLeases(bal) === 1, 'the first attempt timed out; the second holds its lease');
    await timers.advance(1000);
    await until(() => log.find('connection').length === 1, 'the access-log record');
    expect(log.find('connection')[0]).toMatchObject({ termination: 'connect-timeout', state: 'sC', attempts: 2, backend: null });
    expect(proxy.counters.refusals('timeout')).toBe(1);
    expect(proxy.counters.refusals('no_backend')).toBe(0);
    expect(failures()).toEqual([1, 1]);
    expect(openLeases(bal)).toBe(0);
  });

  it('every connect is refused: connect-failed (SC), counted no backend', async () => {
    const dead = await freePort();
    const bal = loopbackBalancer(cleanups, [
      { id: 'd1', port: dead },
      { id: 'd2', port: dead },
    ]);
    const log = captureLog('info');
    const { proxy, port } = await proxyOn(cleanups, gated(bal.router({ policy: 'round-robin', ejection: NO_EJECTION })), {
      attempts: 2,
      accessLog: log.logger,
      ...admission,
    });
    const client = await dial(cleanups, port);
    client.on('error', () => {});
    await until(() => log.find('connection').length === 1, 'the access-log record');
    expect(log.find('connection')[0]).toMatchObject({ termination: 'connect-failed', state: 'SC', attempts: 2, backend: null });
    expect(proxy.counters.refusals('no_backend')).toBe(1);
    expect(proxy.counters.refusals('timeout')).toBe(0);
    expect([0, 1].map((slot) => bal.table.stats(slot).failures)).toEqual([1, 1]);
    expect(openLeases(bal)).toBe(0);
  });
});

describe.each([
  { name: 'without a band', band: false },
  { name: 'with an admission band', band: true },
])('a client that leaves while its backend connects, $name', ({ band }) => {
  it('cancels the connect: its one lease returned, no backend blamed, no retry spent, no second lease', async () => {
    const hang = await hangingPort(cleanups);
    const bal = loopbackBalancer(cleanups, [
      { id: 'h1', port: hang },
      { id: 'h2', port: hang },
    ]);
    const router = bal.router({ policy: 'round-robin', ejection: NO_EJECTION });
    if (band) new AdmissionGate(router, { bands: [10, 1], minCeiling: 0.5, kind: 'connection' });
    // Every lease the proxy takes: router.acquire, also under acquireAsync (the gate's seam takes through it).
    let taken = 0;
    const acquire = router.acquire.bind(router);
    router.acquire = (opts) => {
      taken++;
      return acquire(opts);
    };
    // Every retry the run asks the budget for (the Balancer has none configured: each is allowed and counted).
    let retriesAsked = 0;
    const tryRetry = router.retryBudget.tryRetry.bind(router.retryBudget);
    router.retryBudget.tryRetry = () => {
      retriesAsked++;
      return tryRetry();
    };
    const timers = new ManualTimers();
    const { proxy, port } = await proxyOn(cleanups, router, {
      timers,
      connectTimeoutMs: 1000,
      attempts: 2,
      // With a band the proxy reads a client only for a PROXY header before its backend connects
      // (accepted paused): only a client it reads can be seen leaving, so this one sends a header.
      ...(band ? { admission: fixedBand(10), acceptProxy: true } : {}),
    });
    const failures = (): number[] => [0, 1].map((slot) => bal.table.stats(slot).failures);
    const client = await dial(cleanups, port);
    client.on('error', () => {});
    if (band) client.write(encodeProxyV1({ address: '10.1.2.3', port: 4000 }, { address: '127.0.0.1', port }));
    await until(() => openLeases(bal) === 1, 'the first attempt holds its lease');
    client.resetAndDestroy();
    await until(() => proxy.counters.refusals('client_abort') === 1, 'the reset counted');
    await until(() => openLeases(bal) === 0, 'the lease returned when the client left');
    // The connect's timeout, had it been left running: before, it blamed h1 and spent a retry on h2.
    await timers.advance(1000);
    for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
    expect(openLeases(bal)).toBe(0);
    expect(failures()).toEqual([0, 0]);
    expect(retriesAsked).toBe(0);
    expect(taken).toBe(1);
    expect(proxy.counters.refusals('timeout')).toBe(0);
    expect(proxy.counters.refusals('no_backend')).toBe(0);
  });
});
