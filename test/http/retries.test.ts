// Retries of PoiseDispatcher against real loopback servers, counted per
// backend: a backend killed mid-run, streamed bodies, the retry budget.
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { Fleet } from '../helpers/http-backends.js';
import { httpRig as rig } from '../helpers/http-rig.js';
import { until } from '../helpers/until.js';
import { undiciVariants } from '../helpers/undici-variants.js';

const variants = await undiciVariants();
/** Ejection out of the way where a test counts every attempt. */
const NO_EJECTION = { consecutiveFailures: 1_000_000 };

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** How many times each request id reached any backend. */
function arrivals(f: Fleet): Map<string, number> {
  const m = new Map<string, number>();
  for (const s of f.seen) m.set(s.id, (m.get(s.id) ?? 0) + 1);
  return m;
}

/** A backend answer that resets the connection once the request is read (a crash before any response byte). */
function resetAfterRead(req: { socket: { resetAndDestroy(): void } }): void {
  req.socket.resetAndDestroy();
}

describe.each(variants)('retries with $name', ({ u, factory }) => {
  it('a backend killed mid-run costs only its in-flight requests: each idempotent one retried elsewhere exactly once, the others reported', async () => {
    const r = await rig(cleanups, 4, { policy: 'round-robin' }, { factory });
    const [h0, ...live] = r.fleet.backends;
    for (const b of r.fleet.backends) b.hold = true;
    // GET and POST alternate by round of four, so each backend holds both.
    const isGet = (id: number): boolean => Math.floor(id / 4) % 2 === 0;
    const send = async (id: number): Promise<string> => {
      const method = isGet(id) ? 'GET' : 'POST';
      try {
        const res = await u.request('http://api/', {
          dispatcher: r.dispatcher,
          method,
          body: method === 'POST' ? `body ${id}` : undefined,
          headers: { 'x-req': String(id) },
        });
        return `${res.statusCode} ${await res.body.text()}`;
      } catch (err) {
        return `error ${(err as { code?: string }).code ?? String(err)}`;
      }
    };
    // 40 requests in flight, 10 on each backend (round-robin), held there.
    const first = Array.from({ length: 40 }, (_, id) => send(id));
    await until(() => r.fleet.backends.every((b) => b.held.length === 10), '10 requests held on every backend');
    const onH0 = h0!.seen.map((s) => Number(s.id));
    expect(onH0).toEqual([0, 4, 8, 12, 16, 20, 24, 28, 32, 36]);
    for (const b of live) b.release();
    await h0!.kill();
    const results = await Promise.all(first);
    // Then 40 more, while h0 refuses connections.
    const second = await Promise.all(Array.from({ length: 40 }, (_, k) => send(40 + k)));

    const failed = results.flatMap((res, id) => (res.startsWith('error') ? [id] : []));
    // Only the non-idempotent requests that were on h0 reached the caller as errors.
    expect(failed).toEqual(onH0.filter((id) => !isGet(id)));
    expect(failed).toEqual([4, 12, 20, 28, 36]);
    for (const id of failed) expect(results[id]).toMatch(/^error (UND_ERR_SOCKET|ECONNRESET)$/);
    expect(second.every((res) => res.startsWith('200 '))).toBe(true);
    const seen = arrivals(r.fleet);
    for (let id = 0; id < 80; id++) {
      const onDead = onH0.includes(id);
      const expected = onDead && isGet(id) ? 2 : 1;
      expect({ id, arrivals: seen.get(String(id)) }).toEqual({ id, arrivals: expected });
    }
    // The retried GETs landed on live backends, and h0 saw nothing after its death.
    for (const id of onH0.filter(isGet)) {
      expect(r.fleet.seen.filter((s) => s.id === String(id)).map((s) => s.backend === 'h0')).toEqual([true, false]);
    }
    expect(h0!.seen.length).toBe(10);
    expect(r.inFlight()).toBe(0);
  });

  it('a POST with a streamed body is never sent twice: not after a reset, not after a refused connect', async () => {
    const r = await rig(cleanups, 2, { policy: 'round-robin', ejection: NO_EJECTION }, { factory });
    const [h0, h1] = r.fleet.backends;
    h0!.respond = resetAfterRead as never;
    const post = async (id: number, body: () => Readable | string, method = 'POST'): Promise<string> => {
      try {
        const res = await u.request('http://api/', { dispatcher: r.dispatcher, method, body: body(), headers: { 'x-req': String(id) } });
        return `${res.statusCode}`;
      } catch (err) {
        return `error ${(err as { code?: string }).code}`;
      }
    };
    const stream = (id: number) => (): Readable => Readable.from([`part 1 of ${id} `, 'part 2']);
    const outcomes: string[] = [];
    for (let id = 0; id < 20; id++) outcomes.push(await post(id, stream(id)));
    // Round-robin: even ids went to h0 (reset after it read them), odd ones to h1.
    expect(outcomes.map((o) => o.replace('UND_ERR_SOCKET', 'ECONNRESET'))).toEqual(
      Array.from({ length: 20 }, (_, id) => (id % 2 === 0 ? 'error ECONNRESET' : '200')),
    );
    expect([...arrivals(r.fleet).values()].every((n) => n === 1)).toBe(true);
    expect(r.fleet.seen.length).toBe(20);
    expect(h1!.seen.every((s) => s.body === `part 1 of ${s.id} part 2`)).toBe(true);
    // A string body, non-idempotent, sent and reset: reported, not retried. A GET: retried on h1.
    expect(await post(100, () => 'x')).toMatch(/^error (UND_ERR_SOCKET|ECONNRESET)$/);
    await post(101, () => 'x'); // h1: keeps the round-robin on h0 for the next
    expect(await post(102, () => '', 'GET')).toBe('200');
    expect(arrivals(r.fleet).get('100')).toBe(1);
    expect(r.fleet.seen.filter((s) => s.id === '102').map((s) => s.backend)).toEqual(['h0', 'h1']);
    // A refused connect: nothing was sent, but a stream is still never replayed.
    await h0!.kill();
    expect(await post(200, stream(200))).toBe('error ECONNREFUSED');
    expect(arrivals(r.fleet).get('200')).toBeUndefined();
    expect(r.inFlight()).toBe(0);
  });

  it('the retry budget caps retries when every backend fails (exactly the model’s count); with room for all, every request is tried 3 times', async () => {
    // Allowed while max(floor, ratio × requests) − retries ≥ 1 (one window: the clock stands still).
    const model = (n: number, ratio: number, floor: number): { retries: number; refused: number } => {
      let retries = 0;
      let refused = 0;
      for (let i = 1; i <= n; i++) {
        for (let attempt = 1; attempt < 3; attempt++) {
          if (Math.max(floor, Math.floor(ratio * 10 * i) / 10) - retries < 1) {
            refused++;
            break;
          }
          retries++;
        }
      }
      return { retries, refused };
    };
    // 20 %, no floor; then a floor of 10 000 retries (1000/s over 10 s): no cap in reach.
    for (const [ratio, perSecond] of [
      [0.2, 0],
      [0.2, 1000],
    ] as const) {
      const n = 200;
      const r = await rig(
        cleanups,
        4,
        { policy: 'p2c:requests', ejection: NO_EJECTION },
        { factory, retryBudget: { ratio, minRetriesPerSecond: perSecond, clock: () => 0 } },
      );
      for (const b of r.fleet.backends) b.respond = resetAfterRead as never;
      let errors = 0;
      for (let i = 0; i < n; i++) {
        try {
          await u.request('http://api/', { dispatcher: r.dispatcher, headers: { 'x-req': String(i) } });
        } catch {
          errors++;
        }
      }
      const expected = model(n, ratio, perSecond * 10);
      expect(errors).toBe(n);
      expect(r.fleet.seen.length).toBe(n + expected.retries);
      let retries = 0;
      let refused = 0;
      for (const e of r.balancer.slotEntries()) {
        const f = r.counters.figures(e.slot, r.balancer.table.stats(e.slot).generation);
        retries += f.retries;
        refused += f.retriesRefused;
      }
      expect({ ratio, retries, refused }).toEqual({ ratio, ...expected });
      expect(r.inFlight()).toBe(0);
      await r.dispatcher.close();
      await r.fleet.close();
    }
    expect(model(200, 0.2, 0)).toEqual({ retries: 40, refused: 200 });
    expect(model(200, 0.2, 10_000)).toEqual({ retries: 400, refused: 0 });
  });
});
