// Hedged requests of PoiseDispatcher against real loopback servers, the
// hedge delay on a manual clock: a hedge goes to a backend not tried, the
// first response wins and reaches the caller once, the loser's lease is
// released once as cancelled, hedges are retries of the retry budget, and a
// POST or a streamed body is never hedged.
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { HttpRig } from '../helpers/http-rig.js';
import { httpRig as rig, slotOf } from '../helpers/http-rig.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { until } from '../helpers/until.js';
import { undiciVariants } from '../helpers/undici-variants.js';
import { thrown } from '../helpers/thrown.js';
import { PoiseDispatcher } from '../../src/http/dispatcher.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';

const variants = await undiciVariants();
const NO_EJECTION = { consecutiveFailures: 1_000_000 };

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Each backend's attempts by outcome [success, failure, overload, cancelled], and the hedge counts [sent, won, cancelled, refused]. */
function figures(r: HttpRig, id: string): { outcomes: number[]; hedges: number[] } {
  const slot = slotOf(r.balancer, id);
  const f = r.counters.figures(slot, r.balancer.table.stats(slot).generation);
  return { outcomes: f.outcomes, hedges: f.hedges };
}

/** The backends request `id` reached, in order. */
function backendsOf(r: HttpRig, id: string): string[] {
  return r.fleet.seen.filter((s) => s.id === id).map((s) => s.backend);
}

describe.each(variants)('hedged requests with $name', ({ u, factory }) => {
  it('a slow request is hedged on another backend after the delay (never the one it is on, though its key routes there): the hedge answers, the caller gets one response, the slow attempt is released once as cancelled', async () => {
    const timers = new ManualTimers();
    const r = await rig(
      cleanups,
      3,
      { policy: 'rendezvous', ejection: NO_EJECTION },
      { factory, timers, hedge: { delayMs: 40 }, route: () => ({ key: 'user-7' }) },
    );
    const get = (id: string): Promise<string> =>
      u.request('http://api/', { dispatcher: r.dispatcher, headers: { 'x-req': id } }).then((res) => res.body.text());
    // The key's backend, seen by one plain request.
    expect(await get('probe')).toMatch(/^h\d$/);
    const home = backendsOf(r, 'probe')[0]!;
    const slow = r.fleet.backends.find((b) => b.id === home)!;
    slow.hold = true;
    const body = get('1');
    await until(() => slow.held.length === 1, 'the request held on its key’s backend');
    await timers.advance(39);
    expect(backendsOf(r, '1')).toEqual([home]);
    await timers.advance(1);
    expect(await body).not.toBe(home);
    const [first, second] = backendsOf(r, '1');
    expect(first).toBe(home);
    expect(second).not.toBe(home);
    expect(r.dispatcher.hedges).toEqual({ sent: 1, won: 1, cancelled: 1, refused: 0 });
    // The slow backend answers late, to nobody: nothing more is counted.
    slow.release();
    await until(() => r.inFlight() === 0, 'every lease back');
    expect(figures(r, home)).toEqual({ outcomes: [1, 0, 0, 1], hedges: [1, 0, 1, 0] });
    expect(figures(r, second!)).toEqual({ outcomes: [1, 0, 0, 0], hedges: [0, 1, 0, 0] });
    expect(r.balancer.table.stats(slotOf(r.balancer, home)).failures).toBe(0);
  });

  it('when the slow attempt answers first, it wins and the hedge is the one cancelled', async () => {
    const timers = new ManualTimers();
    const r = await rig(cleanups, 2, { policy: 'round-robin', ejection: NO_EJECTION }, { factory, timers, hedge: { delayMs: 5 } });
    const [h0, h1] = r.fleet.backends;
    h0!.hold = true;
    h1!.hold = true;
    const res = u.request('http://api/', { dispatcher: r.dispatcher, headers: { 'x-req': 'a' } }).then((x) => x.body.text());
    await until(() => h0!.held.length === 1, 'held on h0');
    await timers.advance(5);
    await until(() => h1!.held.length === 1, 'the hedge held on h1');
    h0!.release();
    expect(await res).toBe('h0');
    h1!.release();
    await until(() => r.inFlight() === 0, 'every lease back');
    expect(r.dispatcher.hedges).toEqual({ sent: 1, won: 0, cancelled: 1, refused: 0 });
    expect(figures(r, 'h0').outcomes).toEqual([1, 0, 0, 0]);
    expect(figures(r, 'h1').outcomes).toEqual([0, 0, 0, 1]);
  });

  it('a hedge that fails leaves the slow attempt racing: the caller gets its response, not the hedge’s error', async () => {
    const timers = new ManualTimers();
    const r = await rig(
      cleanups,
      2,
      { policy: 'round-robin', ejection: NO_EJECTION },
      { factory, timers, attempts: 2, hedge: { delayMs: 5 } },
    );
    const [h0, h1] = r.fleet.backends;
    h0!.hold = true;
    await h1!.kill();
    const res = u.request('http://api/', { dispatcher: r.dispatcher, headers: { 'x-req': 'b' } }).then((x) => x.body.text());
    await until(() => h0!.held.length === 1, 'held on h0');
    await timers.advance(5);
    await until(() => figures(r, 'h1').outcomes[1] === 1, 'the hedge refused by h1');
    h0!.release();
    expect(await res).toBe('h0');
    await until(() => r.inFlight() === 0, 'every lease back');
    expect(r.dispatcher.hedges).toEqual({ sent: 1, won: 0, cancelled: 0, refused: 0 });
    expect(figures(r, 'h0').outcomes).toEqual([1, 0, 0, 0]);
  });

  it('a request a racer’s error ends takes every other racer with it: the slow attempt’s lease is back before its backend answers', async () => {
    const timers = new ManualTimers();
    // The caller's status rule throws on h1's answer: the request ends with that error while h0 still holds the first attempt.
    const statusOutcome = (code: number): 'success' => {
      if (code === 200) return 'success';
      throw new Error('no rule for it');
    };
    const r = await rig(
      cleanups,
      2,
      { policy: 'round-robin', ejection: NO_EJECTION },
      { factory, timers, hedge: { delayMs: 5 }, statusOutcome },
    );
    const [h0, h1] = r.fleet.backends;
    h0!.hold = true;
    h1!.respond = (_req, res) => {
      res.writeHead(418);
      res.end();
    };
    const res = u.request('http://api/', { dispatcher: r.dispatcher, headers: { 'x-req': 'e' } }).then(
      (x) => x.body.text(),
      (err: unknown) => err,
    );
    await until(() => h0!.held.length === 1, 'held on h0');
    await timers.advance(5);
    expect(await res).toBeInstanceOf(Error);
    // h0 has not answered: its attempt was aborted and released with the request, not when h0 answers.
    await until(() => r.inFlight() === 0, 'every lease back while h0 still holds the request');
    expect(h0!.held.length).toBe(1);
    expect(figures(r, 'h0').outcomes).toEqual([0, 0, 0, 1]);
    h0!.release();
  });

  it('a POST, and a PUT with a streamed body, are never hedged; a POST the route marks hedge: true is', async () => {
    const timers = new ManualTimers();
    const r = await rig(
      cleanups,
      2,
      { policy: 'round-robin', ejection: NO_EJECTION },
      { factory, timers, hedge: { delayMs: 5 }, route: (o) => (o.path === '/search' ? { hedge: true } : undefined) },
    );
    const [h0] = r.fleet.backends;
    h0!.hold = true;
    const send = (id: string, method: string, path: string, body: () => string | Readable): Promise<string> =>
      u
        .request(`http://api${path}`, { dispatcher: r.dispatcher, method, body: body(), headers: { 'x-req': id } })
        .then((x) => x.body.text());
    // Round-robin: h0, h1, h0, h1...: each request here goes to h0 (h1 answers the spacers).
    const post = send('post', 'POST', '/', () => 'x');
    await until(() => h0!.held.length === 1, 'the POST held');
    await timers.advance(1000);
    expect(r.dispatcher.hedges.sent).toBe(0);
    await send('spacer-1', 'GET', '/', () => '');
    const put = send('put', 'PUT', '/', () => Readable.from(['part 1 ', 'part 2']));
    await until(() => h0!.held.length === 2, 'the PUT held');
    await timers.advance(1000);
    expect(r.dispatcher.hedges.sent).toBe(0);
    await send('spacer-2', 'GET', '/', () => '');
    const search = send('search', 'POST', '/search', () => 'q=1');
    await until(() => h0!.held.length === 3, 'the search held');
    await timers.advance(5);
    expect(await search).toBe('h1');
    expect(r.dispatcher.hedges.sent).toBe(1);
    h0!.release();
    expect(await post).toBe('h0');
    expect(await put).toBe('h0');
    expect(backendsOf(r, 'post')).toEqual(['h0']);
    expect(backendsOf(r, 'put')).toEqual(['h0']);
    expect(backendsOf(r, 'search')).toEqual(['h0', 'h1']);
    await until(() => r.inFlight() === 0, 'every lease back');
  });
});

describe('hedges and the retry budget', () => {
  it('hedges are retries: with every backend slow, exactly the budget’s count is sent, the rest refused and counted', async () => {
    // Allowed while max(floor, ratio × requests) − retries ≥ 1 (one window: the clock stands still), as for retries.
    const model = (n: number, ratio: number): { sent: number; refused: number } => {
      let sent = 0;
      let refused = 0;
      for (let i = 1; i <= n; i++) {
        if (Math.floor(ratio * 10 * i) / 10 - sent < 1) refused++;
        else sent++;
      }
      return { sent, refused };
    };
    const timers = new ManualTimers();
    const n = 40;
    const r = await rig(
      cleanups,
      4,
      { policy: 'round-robin', ejection: NO_EJECTION },
      { timers, hedge: { delayMs: 10 }, retryBudget: { ratio: 0.25, minRetriesPerSecond: 0, clock: () => 0 } },
    );
    for (let i = 0; i < n; i++) {
      for (const b of r.fleet.backends) b.hold = true;
      const before = r.fleet.seen.length;
      const res = u7request(r, String(i));
      await until(() => r.fleet.seen.length === before + 1, 'the request held');
      const sent = r.dispatcher.hedges.sent;
      await timers.advance(10);
      // A hedge sent: it reaches its backend before anything answers.
      if (r.dispatcher.hedges.sent > sent) await until(() => r.fleet.seen.length === before + 2, 'the hedge held');
      for (const b of r.fleet.backends) b.release();
      await res;
      await until(() => r.inFlight() === 0, 'every lease back');
    }
    const expected = model(n, 0.25);
    expect(expected).toEqual({ sent: 10, refused: 30 });
    expect({ sent: r.dispatcher.hedges.sent, refused: r.dispatcher.hedges.refused }).toEqual(expected);
    expect(r.fleet.seen.length).toBe(n + expected.sent);
    let sent = 0;
    let refused = 0;
    for (const b of r.fleet.backends) {
      const h = figures(r, b.id).hedges;
      sent += h[0]!;
      refused += h[3]!;
    }
    expect({ sent, refused }).toEqual(expected);
  });
});

describe('the adaptive delay', () => {
  it('is the backend’s p95 of latency to headers from the shared table, floored; a backend without samples is not hedged', async () => {
    const timers = new ManualTimers();
    const r = await rig(cleanups, 2, { policy: 'round-robin', ejection: NO_EJECTION }, { timers, hedge: { minDelayMs: 2 } });
    const [h0] = r.fleet.backends;
    h0!.hold = true;
    // No sample yet: never hedged.
    const cold = u7request(r, 'cold');
    await until(() => h0!.held.length === 1, 'held');
    await timers.advance(60_000);
    expect(r.dispatcher.hedges.sent).toBe(0);
    h0!.release();
    await cold;
    await u7request(r, 'spacer');
    // 100 samples of 1..100 ms on h0 (as any thread's releases would write them).
    const slot = slotOf(r.balancer, 'h0');
    for (let ms = 1; ms <= 100; ms++) r.balancer.ownerTable.latencies.record(slot, ms);
    const p95 = r.balancer.ownerTable.latencies.quantileMs(slot, 0.95, 20);
    // The estimate lies in the sample's bucket (64–131 ms), at or above the exact p95.
    expect(p95).toBeGreaterThanOrEqual(95);
    expect(p95).toBeLessThanOrEqual(131.072);
    h0!.hold = true;
    const warm = u7request(r, 'warm');
    await until(() => h0!.held.length === 1, 'held');
    await timers.advance(Math.ceil(p95) - 1);
    expect(r.dispatcher.hedges.sent).toBe(0);
    await timers.advance(1);
    expect(await warm).toBe('h1');
    expect(r.dispatcher.hedges.sent).toBe(1);
    h0!.release();
  });

  it('options are checked, naming the field', () => {
    const balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
    const make = (hedge: unknown): string =>
      thrown(() => new PoiseDispatcher({ router: balancer.router(), origin: 'http://api', hedge: hedge as never })).message;
    expect(make({ delayMs: -1 })).toMatch(/^options\.hedge\.delayMs: /);
    expect(make({ quantile: 1 })).toMatch(/^options\.hedge\.quantile: /);
    expect(make({ maxHedges: 0 })).toMatch(/^options\.hedge\.maxHedges: /);
    expect(make({ minSamples: 0.5 })).toMatch(/^options\.hedge\.minSamples: /);
    expect(make({ delayMs: 5, quantile: 0.9 })).toMatch(/^options\.hedge\.delayMs: /);
    expect(make({ delay: 5 })).toMatch(/^options\.hedge\.delay: unknown option/);
    expect(make('fast')).toMatch(/^options\.hedge: /);
    balancer.close();
  });
});

/** A GET of id `id` with the undici 7 devDependency; resolves with the body. */
async function u7request(r: HttpRig, id: string): Promise<string> {
  const { request } = await import('undici');
  const res = await request('http://api/', { dispatcher: r.dispatcher, headers: { 'x-req': id } });
  return res.body.text();
}
