/**
 * A backend that accepts and then resets before answering is failing
 * (Envoy's outlier detection counts it a connection failure): on every
 * routed path — connect(), routedStream(), the proxy dialling itself and the
 * proxy with an admission band (connect() with a manual release) — each
 * such reset counts one consecutive failure and enough of them eject the
 * backend, while a backend that sends bytes before it resets does not count
 * and its answer clears the failures before it. Real loopback backends that
 * reset at the client's first byte.
 */
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import { connect } from '../../src/outbound/connect.js';
import { fixedBand } from '../../src/proxy/admission.js';
import { routedStream } from '../../src/outbound/routed-stream.js';
import type { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { dial, listenLoopback } from '../helpers/loopback.js';
import { loopbackBalancer, proxyOn } from '../helpers/proxy-on.js';
import { until } from '../helpers/until.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const FAILURES = 3;

/**
 * A backend that resets (RST) at the client's first byte; with `greeting`
 * it sends that first and the client writes only once it has read it.
 */
function resetter(greeting: boolean): Promise<number> {
  return listenLoopback(cleanups, (s) => {
    if (greeting) s.write('hello');
    s.once('data', () => s.resetAndDestroy());
  });
}

/** Drives one client socket: writes at once (or after the greeting, with `greeting`) and resolves at its close. */
function drive(socket: net.Socket, greeting: boolean): Promise<void> {
  return new Promise((resolve) => {
    socket.on('error', () => {});
    socket.once('close', () => resolve());
    // The proxy's clients are half-open: answer its FIN with ours.
    socket.once('end', () => socket.end());
    if (greeting) socket.once('data', () => socket.write('x'));
    else socket.write('x');
    socket.resume();
  });
}

/** One routed connection to the backend: a way in per path. */
type Path = (router: Router, greeting: boolean) => Promise<void>;

const PATHS: [name: string, setup: (router: Router, balancer: Balancer) => Promise<Path>][] = [
  [
    'connect()',
    async () => async (router, greeting) => {
      const { socket } = await connect(router, { attempts: 1 });
      await drive(socket, greeting);
    },
  ],
  [
    'routedStream()',
    async () => async (router, greeting) => {
      const socket = routedStream(router, { attempts: 1 })();
      socket.connect(1, 'host.invalid');
      await new Promise<void>((r) => socket.once('connect', () => r()));
      await drive(socket, greeting);
    },
  ],
  [
    'the proxy (its own dial)',
    async (router) => {
      const { port } = await proxyOn(cleanups, router, { attempts: 1 });
      return async (_r, greeting) => drive(await dial(cleanups, port), greeting);
    },
  ],
  [
    'the proxy with an admission band (connect() released by the proxy)',
    async (router) => {
      new AdmissionGate(router, { bands: [1], minCeiling: 0.5, kind: 'connection' });
      const { port } = await proxyOn(cleanups, router, { attempts: 1, admission: fixedBand(1) });
      return async (_r, greeting) => drive(await dial(cleanups, port), greeting);
    },
  ],
];

async function setup(greeting: boolean, path: (typeof PATHS)[number][1]) {
  const port = await resetter(greeting);
  const balancer = loopbackBalancer(cleanups, [{ id: 'r', port }]);
  // A long base: an ejection lasts at least a minute, whatever the machine's load.
  const router = balancer.router({ policy: 'p2c:connections', ejection: { consecutiveFailures: FAILURES, baseMs: 60_000 } });
  const through = await path(router, balancer);
  const t = balancer.ownerTable;
  /** One connection, then wait until its lease is back (the proxy releases it at the upstream's close). */
  const once = async (g: boolean): Promise<void> => {
    await through(router, g);
    await until(() => t.connections(0) === 0, 'the lease released');
  };
  return { balancer, t, once, ejected: () => balancer.table.ejectedForMs(0) > 0 };
}

describe('a reset before the backend answered counts toward ejection; after it answered it does not', () => {
  it.each(PATHS)('%s: consecutive resets before any byte eject the backend at exactly the threshold', async (_name, path) => {
    const { t, once, ejected } = await setup(false, path);
    for (let k = 1; k < FAILURES; k++) {
      await once(false);
      expect(t.health.failures(0), `after reset ${k}`).toBe(k);
      expect(ejected(), `after reset ${k}`).toBe(false);
    }
    await once(false);
    expect(ejected()).toBe(true);
    expect(t.health.ejectionsTotal(0)).toBe(1);
  });

  it.each(PATHS)(
    '%s: a backend that answers before it resets never counts (10 connections), and its answer clears earlier failures',
    async (_name, path) => {
      const { t, once, ejected } = await setup(true, path);
      t.health.addFailure(0);
      t.health.addFailure(0);
      for (let k = 0; k < 10; k++) {
        await once(true);
        expect(t.health.failures(0), `connection ${k}`).toBe(0);
      }
      expect(ejected()).toBe(false);
      expect(t.health.ejectionsTotal(0)).toBe(0);
    },
  );
});
