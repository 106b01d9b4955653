// PoiseDispatcher against real loopback HTTP servers, counted per backend,
// with undici 7 (and undici 8 where Node runs it): one decision per request
// over keep-alive connections, every undici entry point, the outcome rules,
// membership and pools, refusals.
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import { PoiseError } from '../../src/core/errors.js';
import { PoiseDispatcher, type PoiseDispatcherOptions } from '../../src/http/dispatcher.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { fleet } from '../helpers/http-backends.js';
import { httpRig as rig, slotOf } from '../helpers/http-rig.js';
import { until } from '../helpers/until.js';
import { manualClock } from '../helpers/runtime.js';
import { runsUndici8, undiciVariants } from '../helpers/undici-variants.js';

const logger = createLogger({ level: 'silent' });
const variants = await undiciVariants();

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('the undici devDependency is undici 7, and where Node runs undici 8 (>= 22.19) the undici8 alias is installed and is undici 8', () => {
  const require = createRequire(import.meta.url);
  expect((require('undici/package.json') as { version: string }).version).toMatch(/^7\./);
  // An optional dependency of packages/undici8: npm installs it only when it runs on Node >= 22.19 (docs/testing.md).
  if (runsUndici8()) {
    let installed = 'not installed';
    try {
      installed = (require('undici8/package.json') as { version: string }).version;
    } catch {}
    expect(installed, 'undici8: run `npm install` once under this Node (node_modules was installed under an older one)').toMatch(/^8\./);
  }
  expect(variants.map((v) => v.name)).toEqual(['undici 7', 'undici 7 (factory)', ...(runsUndici8() ? ['undici 8'] : [])]);
});

describe.each(variants)('PoiseDispatcher with $name', ({ u, factory }) => {
  it('decides per request over keep-alive connections: 400 sequential requests, round-robin, 100 per backend on one connection each, each feeding its latency', async () => {
    // The dispatcher's clock moves 3 ms per reading, so an attempt (sent at one
    // reading, headers at the next) measures exactly 3 ms; the table's clock
    // moves 100 ms per request, so each backend's PeakEWMA decays from its
    // initial 50 ms towards 3 ms (e^-0.4 per sample).
    let t = 0;
    const tableClock = manualClock(0);
    const r = await rig(cleanups, 4, { policy: 'round-robin', clock: tableClock.now }, { factory, clock: () => (t += 3) });
    const connections = new Map<string, number>();
    for (const b of r.fleet.backends) b.server.on('connection', () => connections.set(b.id, (connections.get(b.id) ?? 0) + 1));
    for (let i = 0; i < 400; i++) {
      tableClock.advance(100);
      const res = await u.request(`http://api/item/${i}`, { dispatcher: r.dispatcher, headers: { 'x-req': String(i) } });
      await res.body.text();
      expect(res.statusCode).toBe(200);
    }
    expect(r.fleet.counts()).toEqual({ h0: 100, h1: 100, h2: 100, h3: 100 });
    expect(Object.fromEntries(connections)).toEqual({ h0: 1, h1: 1, h2: 1, h3: 1 });
    expect(r.inFlight()).toBe(0);
    expect(r.dispatcher.pools).toBe(4);
    for (const b of r.fleet.backends) {
      const slot = slotOf(r.balancer, b.id);
      const stats = r.balancer.table.stats(slot);
      expect(stats.latencyEstimateUs).toBe(3000);
      const f = r.counters.figures(slot, stats.generation);
      expect(f.outcomes).toEqual([100, 0, 0, 0]);
      expect(f.latencySumSeconds).toBeCloseTo(0.3, 9);
      expect(f.buckets[2]).toBe(100); // (2.5 ms, 5 ms]
    }
  });

  it("serves fetch, request, Node's own fetch, setGlobalDispatcher and composed interceptors (a redirect followed through it)", async () => {
    const r = await rig(cleanups, 2, { policy: 'round-robin' }, { factory });
    for (const b of r.fleet.backends) {
      b.respond = (req, res, seen) => {
        if (req.url === '/start') {
          res.writeHead(302, { location: 'http://api/final' });
          res.end();
          return;
        }
        res.end(`${seen.backend} ${req.url} ${String(req.headers['x-added'] ?? '-')}`);
      };
    }
    const viaFetch = await u.fetch('http://api/a', { dispatcher: r.dispatcher });
    expect(await viaFetch.text()).toMatch(/^h\d \/a -$/);
    const viaRequest = await u.request('http://api/b', { dispatcher: r.dispatcher });
    expect(await viaRequest.body.text()).toMatch(/^h\d \/b -$/);
    const viaNode = await globalThis.fetch('http://api/c', { dispatcher: r.dispatcher } as unknown as RequestInit);
    expect(await viaNode.text()).toMatch(/^h\d \/c -$/);
    const previous = u.getGlobalDispatcher();
    u.setGlobalDispatcher(r.dispatcher);
    try {
      const viaGlobal = await u.request('http://api/d');
      expect(await viaGlobal.body.text()).toMatch(/^h\d \/d -$/);
    } finally {
      u.setGlobalDispatcher(previous);
    }
    const addHeader =
      (dispatch: (o: object, h: object) => boolean) =>
      (opts: { headers?: unknown }, handler: object): boolean =>
        dispatch({ ...opts, headers: { ...(opts.headers as object), 'x-added': 'yes' } }, handler);
    const composed = r.dispatcher.compose(u.interceptors.redirect({ maxRedirections: 2 }), addHeader as never);
    const redirected = await u.request('http://api/start', { dispatcher: composed });
    expect(await redirected.body.text()).toMatch(/^h\d \/final yes$/);
    // Both legs of the redirect were routed (and round-robin sent them to different backends).
    expect(r.fleet.seen.slice(-2).map((s) => s.backend)).toEqual(['h0', 'h1']);
    expect(r.fleet.seen.length).toBe(6);
    expect(r.inFlight()).toBe(0);
  });

  it('a 5xx is a failure for passive health and still reaches the caller; statusOutcome changes that; a 4xx is a success', async () => {
    const r = await rig(cleanups, 1, { policy: 'round-robin', ejection: { consecutiveFailures: 3 } }, { factory, attempts: 1 });
    const [h0] = r.fleet.backends;
    h0!.respond = (req, res) => {
      res.writeHead(Number(req.headers['x-status']));
      res.end('body');
    };
    const slot = slotOf(r.balancer, 'h0');
    const status = async (code: number, d = r.dispatcher): Promise<[number, string]> => {
      const res = await u.request('http://api/', { dispatcher: d, headers: { 'x-status': String(code) } });
      return [res.statusCode, await res.body.text()];
    };
    expect(await status(404)).toEqual([404, 'body']);
    expect(r.balancer.table.stats(slot).failures).toBe(0);
    expect(await status(503)).toEqual([503, 'body']);
    expect(await status(500)).toEqual([500, 'body']);
    expect(r.balancer.table.stats(slot).failures).toBe(2);
    expect(await status(502)).toEqual([502, 'body']);
    // The third consecutive failure ejected the backend.
    expect(r.balancer.table.stats(slot).ejectionsTotal).toBe(1);
    expect(r.counters.figures(slot, r.balancer.table.stats(slot).generation).outcomes).toEqual([1, 3, 0, 0]);

    const overload = new PoiseDispatcher({
      router: r.balancer.router({ policy: 'round-robin' }),
      origin: 'http://api',
      factory,
      attempts: 1,
      statusOutcome: (s) => (s === 503 ? 'overload' : s >= 500 ? 'failure' : 'success'),
    });
    cleanups.push(() => overload.destroy());
    const before = r.balancer.table.stats(slot).failures;
    expect(await status(503, overload)).toEqual([503, 'body']);
    expect(r.balancer.table.stats(slot).failures).toBe(before);

    // A statusOutcome that throws ends the request with a PoiseError naming it; the backend is not blamed.
    const broken = new PoiseDispatcher({
      router: r.balancer.router({ policy: 'round-robin' }),
      origin: 'http://api',
      factory,
      statusOutcome: () => {
        throw new Error('no rule for this');
      },
    });
    cleanups.push(() => broken.destroy());
    const err = await status(200, broken).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PoiseError);
    expect((err as PoiseError).message).toBe(
      'options.statusOutcome: must return "success", "failure", "overload" or "cancelled"; for 200 it threw no rule for this',
    );
    expect(r.balancer.table.stats(slot).failures).toBe(before);
    expect(r.inFlight()).toBe(0);
  });

  it('a connect failure is retried on another backend whatever the method (a replayable body), each request reaching one live backend once', async () => {
    const r = await rig(cleanups, 3, { policy: 'round-robin' }, { factory });
    const dead = r.fleet.backends[0]!;
    await dead.kill();
    for (let i = 0; i < 30; i++) {
      const res = await u.request('http://api/', {
        dispatcher: r.dispatcher,
        method: 'POST',
        body: `payload ${i}`,
        headers: { 'x-req': String(i) },
      });
      expect(res.statusCode).toBe(200);
      await res.body.text();
    }
    expect(dead.seen.length).toBe(0);
    const ids = r.fleet.seen.map((s) => s.id).sort((a, b) => Number(a) - Number(b));
    expect(ids).toEqual(Array.from({ length: 30 }, (_, i) => String(i)));
    expect(r.fleet.seen.every((s) => s.body === `payload ${s.id}`)).toBe(true);
    const slot = slotOf(r.balancer, 'h0');
    const f = r.counters.figures(slot, r.balancer.table.stats(slot).generation);
    // h0 refused until its 5th consecutive failure ejected it (the default); each failure was retried elsewhere.
    expect(f.outcomes[1]).toBe(5);
    expect(f.retries).toBe(5);
    expect(r.balancer.table.stats(slot).ejectionsTotal).toBe(1);
    expect(r.inFlight()).toBe(0);

    // With attempts: 1 the same failure reaches the caller (a fresh balancer: h0 not ejected).
    const fresh = new Balancer({ logger });
    fresh.update(r.fleet.specs());
    const once = new PoiseDispatcher({ router: fresh.router({ policy: 'round-robin' }), origin: 'http://api', factory, attempts: 1 });
    cleanups.push(() => once.destroy());
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) {
      try {
        await (await u.request('http://api/', { dispatcher: once, method: 'POST', body: 'x' })).body.text();
        codes.push('ok');
      } catch (err) {
        codes.push((err as { code: string }).code);
      }
    }
    expect(codes.filter((c) => c === 'ECONNREFUSED')).toHaveLength(1);
    expect(codes.filter((c) => c === 'ok')).toHaveLength(2);
  });

  it('backpressure: a 4 MiB body read slowly arrives whole (pause and resume reach the live attempt), with request and fetch', async () => {
    const r = await rig(cleanups, 2, { policy: 'round-robin' }, { factory });
    const big = Buffer.alloc(4 << 20, 0x61);
    for (let i = 0; i < big.length; i += 4096) big[i] = i & 0xff;
    for (const b of r.fleet.backends) b.respond = (_req, res) => res.end(big);
    const res = await u.request('http://api/', { dispatcher: r.dispatcher, highWaterMark: 1024 } as never);
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) {
      chunks.push(chunk as Buffer);
      // A slow reader: the body's buffer fills and undici is told to pause until it drains.
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(Buffer.concat(chunks).equals(big)).toBe(true);
    const viaFetch = Buffer.from(await (await u.fetch('http://api/', { dispatcher: r.dispatcher })).arrayBuffer());
    expect(viaFetch.equals(big)).toBe(true);
    expect(r.inFlight()).toBe(0);
  });

  it('an upgrade is routed, answered by the chosen backend, and its lease released as a success when the socket is handed over', async () => {
    const r = await rig(cleanups, 2, { policy: 'round-robin' }, { factory });
    // Upgraded sockets leave the HTTP server's books: close them here.
    const upgraded: Array<{ destroy(): void }> = [];
    cleanups.push(async () => {
      for (const s of upgraded) s.destroy();
    });
    for (const b of r.fleet.backends) {
      b.server.on('upgrade', (_req, socket) => {
        upgraded.push(socket);
        socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: echo\r\nconnection: upgrade\r\nx-backend: ${b.id}\r\n\r\n`);
        socket.on('data', (d: Buffer) => socket.write(d));
      });
    }
    const got: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { headers, socket } = await u.upgrade('http://api/', { dispatcher: r.dispatcher, protocol: 'echo' });
      socket.write(`ping ${i}`);
      const echoed = await new Promise<string>((resolve) => socket.once('data', (d: Buffer) => resolve(d.toString())));
      socket.destroy();
      got.push(`${String(headers['x-backend'])} ${echoed}`);
    }
    expect(got).toEqual(['h0 ping 0', 'h1 ping 1']);
    expect(r.inFlight()).toBe(0);
    for (const id of ['h0', 'h1']) {
      const slot = slotOf(r.balancer, id);
      expect(r.counters.figures(slot, r.balancer.table.stats(slot).generation).outcomes).toEqual([1, 0, 0, 0]);
    }
  });

  it('membership: a removed backend gets no request and its pool is closed; a new address gets a new pool; a draining one finishes what it has', async () => {
    const r = await rig(cleanups, 3, { policy: 'round-robin' }, { factory });
    const get = async (): Promise<string> => (await u.request('http://api/', { dispatcher: r.dispatcher })).body.text();
    for (let i = 0; i < 6; i++) await get();
    expect(r.dispatcher.pools).toBe(3);
    const [h0, h1, h2] = r.fleet.backends;
    // h1 drains with a request in flight: it finishes there, and h1 gets nothing new.
    h1!.hold = true;
    const held = (async () => {
      let body = '';
      while (body !== 'h1') body = await get();
      return body;
    })();
    await until(() => h1!.held.length === 1, 'a request held on h1');
    r.balancer.update([h0!.spec(), { ...h1!.spec(), status: 'draining' }, h2!.spec()]);
    const before = h1!.seen.length;
    for (let i = 0; i < 6; i++) expect(await get()).not.toBe('h1');
    expect(h1!.seen.length).toBe(before);
    h1!.release();
    expect(await held).toBe('h1');
    // h2 leaves: its pool is closed at the next request after the change.
    r.balancer.update([h0!.spec(), h1!.spec()]);
    await get();
    expect(r.dispatcher.pools).toBe(2);
    for (let i = 0; i < 6; i++) expect(await get()).not.toBe('h2');
    // h0 moves to h2's server (same id, new address): a new pool, the old one closed.
    r.balancer.update([{ id: 'h0', address: `127.0.0.1:${h2!.port}` }, h1!.spec()]);
    const seenOnH2 = h2!.seen.length;
    for (let i = 0; i < 4; i++) await get();
    expect(h2!.seen.length - seenOnH2).toBe(2);
    expect(r.dispatcher.pools).toBe(2);
    expect(r.inFlight()).toBe(0);
  });

  it('outlier detection judges backends by their HTTP requests: the one answering 500 to 3 in 10 is ejected and gets no more', async () => {
    const f = await fleet(6);
    cleanups.push(() => f.close());
    const h5 = f.backends[5]!;
    let n5 = 0;
    h5.respond = (_req, res) => {
      res.writeHead(n5++ % 10 < 3 ? 500 : 200);
      res.end('h5');
    };
    // maxEjectionPercent 20: one host of the six may go (10 % of six rounds below one host: nobody would).
    const balancer = new Balancer({ logger, health: { outlier: { intervalMs: 3_600_000, maxEjectionPercent: 20 } } });
    cleanups.push(async () => balancer.close());
    balancer.update(f.specs());
    // Consecutive-failure ejection out of the way: only the detector ejects here.
    const router = balancer.router({ policy: 'round-robin', ejection: { consecutiveFailures: 1_000_000 } });
    const dispatcher = new PoiseDispatcher({ router, origin: 'http://api', factory, attempts: 1 });
    cleanups.push(() => dispatcher.destroy());
    const get = async (): Promise<number> => {
      const res = await u.request('http://api/', { dispatcher });
      await res.body.dump();
      return res.statusCode;
    };
    const statuses: number[] = [];
    for (let i = 0; i < 600; i++) statuses.push(await get());
    expect(statuses.filter((s) => s === 500)).toHaveLength(30);
    expect(balancer.sweepOutliers()).toEqual(['h5']);
    const before = h5.seen.length;
    for (let i = 0; i < 50; i++) await get();
    expect(h5.seen.length).toBe(before);
  });

  it('admission bands: a low band waits while the pool is saturated, goes once it is not, and an abort while waiting counts nothing', async () => {
    // 2 backends × maxInflight 2 = capacity 4; band 0's ceiling 0.5: it waits above 2 in flight.
    const f = await fleet(2);
    cleanups.push(() => f.close());
    const balancer = new Balancer({ logger });
    balancer.update(f.specs().map((s) => ({ ...s, maxInflight: 2 })));
    const router = balancer.router({ policy: 'round-robin' });
    const gate = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0.5 });
    cleanups.push(async () => gate.close());
    const dispatcher = new PoiseDispatcher({
      router,
      origin: 'http://api',
      factory,
      route: (o) => ({ band: Number((o.headers as Record<string, string>)['x-band']) }),
    });
    cleanups.push(() => dispatcher.destroy());
    for (const b of f.backends) b.hold = true;
    const send = (band: number, id: string, signal?: AbortSignal): Promise<string> =>
      u
        .request('http://api/', { dispatcher, signal, headers: { 'x-band': String(band), 'x-req': id } })
        .then((r) => r.body.text())
        .catch((err: Error) => `error ${err.name}`);
    const high = [send(1, 'H1'), send(1, 'H2'), send(1, 'H3')];
    await until(() => f.seen.length === 3, 'three high-band requests held');
    const low = send(0, 'L1');
    const controller = new AbortController();
    const aborted = send(0, 'L2', controller.signal);
    await until(() => gate.admissionStats().bands.find((x) => x.band === 0)?.queued === 2, 'two low-band requests queued');
    controller.abort();
    expect(await aborted).toBe('error AbortError');
    expect(gate.admissionStats().bands.find((x) => x.band === 0)?.queued).toBe(1);
    expect(f.seen.map((s) => s.id)).toEqual(['H1', 'H2', 'H3']);
    // The high ones answered: the pool is idle again, and the low band goes.
    for (const b of f.backends) b.release();
    await Promise.all(high);
    expect(await low).toMatch(/^h\d$/);
    expect(f.seen.map((s) => s.id)).toEqual(['H1', 'H2', 'H3', 'L1']);
    expect(router.openLeases).toBe(0);
  });

  it('refuses, counting nothing: another origin, a bad route() result, no backend, a closed dispatcher', async () => {
    const r = await rig(
      cleanups,
      2,
      { policy: 'round-robin' },
      { factory, route: (o) => (o.path === '/bad' ? ({ priority: -1 } as never) : undefined) },
    );
    const failure = async (url: string, d = r.dispatcher): Promise<PoiseError> => {
      try {
        await u.request(url, { dispatcher: d });
      } catch (err) {
        if (err instanceof PoiseError) return err;
        throw err;
      }
      throw new Error('expected a refusal');
    };
    const other = await failure('http://elsewhere/x');
    expect([other.code, other.field, other.message]).toEqual([
      'InvalidConfig',
      'dispatch(options).origin',
      `dispatch(options).origin: must be this dispatcher's origin http://api, got "http://elsewhere"`,
    ]);
    expect((await failure('http://api/bad')).message).toBe('route().priority: must be an integer >= 0, got -1');
    r.balancer.update([]);
    expect((await failure('http://api/x')).code).toBe('Empty');
    await r.dispatcher.close();
    expect((await failure('http://api/x')).code).toBe('Closed');
    expect(r.fleet.seen).toEqual([]);
    for (const e of r.balancer.slotEntries()) {
      const g = r.balancer.table.stats(e.slot).generation;
      expect(r.counters.figures(e.slot, g).outcomes).toEqual([0, 0, 0, 0]);
    }
    expect(r.inFlight()).toBe(0);
  });
});

describe('PoiseDispatcher options', () => {
  const b = new Balancer({ logger });
  b.update([{ id: 'a', address: '127.0.0.1:1' }]);
  const router = b.router();
  const message = (opts: unknown): string => {
    try {
      new PoiseDispatcher(opts as PoiseDispatcherOptions);
    } catch (err) {
      if (err instanceof PoiseError) return err.message;
      throw err;
    }
    throw new Error('expected a PoiseError');
  };

  it.each([
    [
      'a misspelled option',
      { router, origin: 'http://api', atempts: 2 },
      'options.atempts: unknown option (accepted: router, origin, attempts, retryBudget, statusOutcome, pool, factory, counters, band, admissionTimeoutMs, route, clock, hedge, timers)',
    ],
    ['no router', { origin: 'http://api' }, 'options.router: must be a Router (balancer.router() or Router.attach()), got undefined'],
    ['another scheme', { router, origin: 'ftp://api' }, 'options.origin: must use http: or https:, got "ftp://api"'],
    [
      'a path',
      { router, origin: 'http://api/v1' },
      'options.origin: must be an origin (scheme://host[:port]) without path, query or credentials, got "http://api/v1"',
    ],
    [
      'not a URL',
      { router, origin: 'not a url' },
      'options.origin: must be an http: or https: URL such as "http://api.internal", got "not a url"',
    ],
    ['attempts 0', { router, origin: 'http://api', attempts: 0 }, 'options.attempts: must be an integer in [1, 10], got 0'],
    ['a bad budget', { router, origin: 'http://api', retryBudget: { ratio: 2 } }, 'retryBudget.ratio: must be a number in [0, 1], got 2'],
    [
      'statusOutcome not a function',
      { router, origin: 'http://api', statusOutcome: 'failure' },
      'options.statusOutcome: must be a function, got "failure"',
    ],
    [
      'counters of another kind',
      { router, origin: 'http://api', counters: {} },
      'options.counters: must be an HttpCounters (HttpCounters.create / attach), got a object',
    ],
    [
      'an admission timeout without a band',
      { router, origin: 'http://api', admissionTimeoutMs: 5 },
      'options.admissionTimeoutMs: needs options.band (nothing waits without a band), got 5',
    ],
  ] as const)('%s', (_name, opts, expected) => {
    expect(message(opts)).toBe(expected);
  });

  it('keeps the origin in URL.origin form (a default port dropped)', () => {
    expect(new PoiseDispatcher({ router, origin: 'http://api:80' }).origin).toBe('http://api');
    expect(new PoiseDispatcher({ router, origin: new URL('https://api.internal:8443/') }).origin).toBe('https://api.internal:8443');
  });
});
