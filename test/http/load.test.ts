// PoiseDispatcher under load on real loopback servers: leases come back to
// exactly zero whatever ends a request (10 000 requests with aborts and
// timeouts), and a slow backend loses its share to p2c:latency.
import { afterEach, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { PoiseDispatcher } from '../../src/http/dispatcher.js';
import { HttpCounters } from '../../src/http/counters.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { fleet } from '../helpers/http-backends.js';
import { until } from '../helpers/until.js';
import { manualClock } from '../helpers/runtime.js';
import { undiciVariants } from '../helpers/undici-variants.js';

const logger = createLogger({ level: 'silent' });
const variants = await undiciVariants();

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe.each(variants)('under load with $name', ({ u, factory }) => {
  it('10 000 requests with random aborts (AbortSignal) and header timeouts: one end each for the caller, every lease back, exactly 0 in flight', async () => {
    const f = await fleet(4);
    cleanups.push(() => f.close());
    for (const b of f.backends) {
      b.respond = (req, res, seen) => {
        const delay = Number(req.headers['x-delay'] ?? 0);
        const answer = (): void => {
          if (!res.destroyed) res.end(seen.backend);
        };
        if (delay === 0) answer();
        else setTimeout(answer, delay);
      };
    }
    const balancer = new Balancer({ logger });
    balancer.update(f.specs());
    const router = balancer.router({ policy: 'p2c:latency', ejection: { consecutiveFailures: 1_000_000 } });
    const counters = HttpCounters.create({ capacity: balancer.table.capacity });
    const dispatcher = new PoiseDispatcher({ router, origin: 'http://api', factory, counters, pool: { connections: 8 } });
    cleanups.push(() => dispatcher.destroy());

    const rng = new Rng(23);
    const total = 10_000;
    const ends = { ok: 0, aborted: 0, timedOut: 0, other: [] as string[] };
    let next = 0;
    const one = async (n: number): Promise<void> => {
      const kind = rng.below(10);
      // 1 in 10 aborted by the caller after 0-3 ms (queued, sent, or reading the body), 1 in 10 by
      // AbortSignal.timeout(0-4 ms); the first 10 answered after 4 s against a 1 s header timeout
      // (undici's timers tick every half second, so the timeout fires within 1-2 s): a failure, retried on
      // other backends, where it times out again.
      const slow = n < 10;
      let signal: AbortSignal | undefined;
      if (slow) signal = undefined;
      else if (kind === 0) {
        const controller = new AbortController();
        setTimeout(() => controller.abort(), rng.below(4));
        signal = controller.signal;
      } else if (kind === 1) signal = AbortSignal.timeout(rng.below(5));
      try {
        const res = await u.request('http://api/', {
          dispatcher,
          signal,
          headersTimeout: slow ? 1000 : 10_000,
          headers: { 'x-delay': slow ? '4000' : String(rng.below(3)) },
        });
        await res.body.text();
        ends.ok++;
      } catch (err) {
        const e = err as { name?: string; code?: string };
        if (e.name === 'AbortError' || e.name === 'TimeoutError' || e.code === 'UND_ERR_ABORTED') ends.aborted++;
        else if (e.code === 'UND_ERR_HEADERS_TIMEOUT') ends.timedOut++;
        else ends.other.push(`${e.name} ${e.code}`);
      }
    };
    const worker = async (): Promise<void> => {
      while (next < total) await one(next++);
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    expect(ends.other).toEqual([]);
    expect(ends.ok + ends.aborted + ends.timedOut).toBe(total);
    expect(ends.aborted).toBeGreaterThan(0);
    expect(ends.timedOut).toBe(10);
    // Attempts given up while queued in a pool end when the pool starts them (then aborted).
    await until(() => router.openLeases === 0, 'every lease released');
    for (let s = 0; s < balancer.table.capacity; s++) expect(balancer.table.requests(s)).toBe(0);
    expect(balancer.table.totalLeases(0)).toBe(0);
    // Every attempt was counted once by its outcome: the backends saw no more requests than were counted as sent.
    let counted = 0;
    for (const e of balancer.slotEntries())
      counted += counters.figures(e.slot, balancer.table.stats(e.slot).generation).outcomes.reduce((a, b) => a + b, 0);
    expect(counted).toBeGreaterThanOrEqual(f.seen.length);
    expect(counted).toBeGreaterThanOrEqual(total);
  });

  it('p2c:latency: a backend 10x slower gets less than each fast one within the first 2 000 requests', async () => {
    // Latency is injected, not waited for: the dispatcher measures and the
    // Balancer and router decay on a hand-moved clock (one clock for both: the
    // Balancer stamps a new backend's estimate with its own); a backend moves it by its latency
    // (10 or 1 ms) before it answers, and between requests the client thinks
    // for 10 ms of it. One request at a time, so each measures its backend's
    // latency exactly, whatever the machine's load.
    const clock = manualClock(0);
    const f = await fleet(4);
    cleanups.push(() => f.close());
    for (const b of f.backends) {
      const latency = b.id === 'h0' ? 10 : 1;
      b.respond = (_req, res, seen) => {
        clock.advance(latency);
        res.end(seen.backend);
      };
    }
    const balancer = new Balancer({ logger, clock: clock.now });
    balancer.update(f.specs());
    const router = balancer.router({ policy: 'p2c:latency', seed: 35, clock: clock.now });
    const dispatcher = new PoiseDispatcher({ router, origin: 'http://api', factory, clock: clock.now });
    cleanups.push(() => dispatcher.destroy());
    for (let sent = 0; sent < 2000; sent++) {
      await (await u.request('http://api/', { dispatcher })).body.text();
      clock.advance(10);
    }
    const counts = f.counts();
    expect(f.seen.length).toBe(2000);
    const fast = [counts['h1']!, counts['h2']!, counts['h3']!];
    expect(counts['h0']!).toBeLessThan(Math.min(...fast));
    // Round-robin would give it 500 (σ = 19); blind latency fails both bounds.
    expect(counts['h0']!).toBeLessThan(250);
  });
});
