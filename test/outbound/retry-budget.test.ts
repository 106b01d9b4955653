/**
 * The retry budget on the connection paths: connect() and routedStream()
 * run one retry policy (src/outbound/retry-run.ts) and draw on the Balancer's
 * budget in the shared table. Backends are loopback ports nobody listens
 * on (every dial refused) or real listeners; the clock stands still unless
 * a test moves it, so one window holds the whole test and the counts are
 * exact.
 */
import net from 'node:net';
import { Registry } from 'prom-client';
import { describe, expect, it, onTestFinished } from 'vitest';
import { collectMetrics } from '../../src/metrics/collect.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';
import { connect } from '../../src/outbound/connect.js';
import { routedStream } from '../../src/outbound/routed-stream.js';
import { Balancer, type BalancerOptions } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { freePort } from '../helpers/ports.js';
import { manualClock } from '../helpers/runtime.js';
import { rejection, thrown } from '../helpers/thrown.js';

const NO_EJECTION = { consecutiveFailures: 1_000_000 };

/** Three backends on free loopback ports (nothing listens: every dial is refused), a round-robin router. */
async function refusingPool(
  opts: BalancerOptions,
  ejection: object = NO_EJECTION,
): Promise<{ balancer: Balancer; router: Router; ports: number[]; clock: ReturnType<typeof manualClock> }> {
  const clock = manualClock(5000);
  const ports = [await freePort(), await freePort(), await freePort()];
  const balancer = new Balancer({ capacity: 8, clock: clock.now, ...opts });
  onTestFinished(() => balancer.close());
  balancer.update(ports.map((p, i) => ({ id: `b${i}`, address: `127.0.0.1:${p}` })));
  const router = balancer.router({ policy: 'round-robin', ejection });
  return { balancer, router, ports, clock };
}

/** One routedStream socket to its end: resolves with the error it closed with. */
function streamError(router: Router): Promise<Error & { code?: string }> {
  const socket = routedStream(router, { attempts: 3 })();
  return new Promise((resolve) => {
    let error: Error | undefined;
    socket.on('error', (e) => (error = e));
    socket.on('close', () => resolve(error!));
  });
}

/** Retries granted and refused for `n` operations of 3 attempts each, all failing, under max(floor, ratio × requests) − retries ≥ 1. */
function model(n: number, ratioTenths: number, floor: number): { retries: number; refused: number } {
  let retries = 0;
  let refused = 0;
  for (let i = 1; i <= n; i++) {
    for (let attempt = 1; attempt < 3; attempt++) {
      // In tenths of a retry, integers only.
      if (Math.max(10 * floor, ratioTenths * i) - 10 * retries < 10) {
        refused++;
        break;
      }
      retries++;
    }
  }
  return { retries, refused };
}

function picks(balancer: Balancer, router: Router): number {
  router.flushPicks();
  return balancer.slotEntries().reduce((sum, e) => sum + balancer.table.stats(e.slot).picks, 0);
}

describe('retry budget on connect() and routedStream()', () => {
  it('connect() and routedStream() draw on one budget: retries = max(floor, 20 % of requests) exactly, the rest refused', async () => {
    const { balancer, router } = await refusingPool({ retryBudget: { ratio: 0.2, minRetriesPerSecond: 0.2, ttlMs: 10_000 } });
    const n = 30;
    for (let i = 0; i < n; i++) {
      // Alternating the two paths: one policy, one budget.
      const err = i % 2 === 0 ? await rejection(connect(router, { attempts: 3 })) : ((await streamError(router)) as never);
      expect((err as Error & { code: string }).code).toBe('NoEligibleCandidates');
    }
    const expected = model(n, 2, 2);
    expect(expected).toEqual({ retries: 6, refused: 29 });
    expect(balancer.retryBudgetStats()).toMatchObject({ requests: n, allowed: expected.retries, refused: expected.refused, available: 0 });
    // Every attempt was a pick: n first attempts and the granted retries.
    expect(picks(balancer, router)).toBe(n + expected.retries);
  });

  it('a refused retry ends with the error a call without retries gets, saying the budget was spent', async () => {
    const { router } = await refusingPool({ retryBudget: { ratio: 0, minRetriesPerSecond: 0 } });
    const err = await rejection(connect(router, { attempts: 3 }));
    expect(err.code).toBe('NoEligibleCandidates');
    expect(err.message).toMatch(
      /^connect: no backend accepted a connection \(1 tried; retry budget spent\): connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
    );
    expect((err.cause as { code: string }).code).toBe('ECONNREFUSED');
    const s = await streamError(router);
    expect(s.message).toMatch(/^routedStream: no backend accepted a connection \(1 tried; retry budget spent\): connect ECONNREFUSED/);
  });

  it('without a budget every operation tries all its attempts, and the retries are counted allowed', async () => {
    const { balancer, router } = await refusingPool({});
    for (let i = 0; i < 4; i++) await rejection(connect(router, { attempts: 3 }));
    expect(balancer.retryBudgetStats()).toEqual({ requests: 4, allowed: 8, refused: 0, available: undefined, processes: 1 });
    expect(picks(balancer, router)).toBe(12);
  });

  it('requests and retries leave the window after ttlMs: the allowance comes back with the clock', async () => {
    const { balancer, router, clock } = await refusingPool({ retryBudget: { ratio: 0.5, minRetriesPerSecond: 0, ttlMs: 1000 } });
    for (let i = 0; i < 4; i++) await rejection(connect(router, { attempts: 3 }));
    // 4 requests: retries at the 2nd and 4th (max(0, 0.5 × requests) − retries ≥ 1), every other ask refused.
    expect(balancer.retryBudgetStats()).toMatchObject({ allowed: 2, refused: 4, available: 0 });
    clock.advance(1000);
    // A new window: one request deposits half a retry; the first refused, the second request's retry allowed.
    await rejection(connect(router, { attempts: 3 }));
    expect(balancer.retryBudgetStats()).toMatchObject({ requests: 5, allowed: 2, refused: 5 });
    // Two attempts: the retry is allowed, and after it the attempts are spent (the budget is not asked again).
    await rejection(connect(router, { attempts: 2 }));
    expect(balancer.retryBudgetStats()).toMatchObject({ requests: 6, allowed: 3, refused: 5, available: 0 });
  });

  it('shows in /metrics: poise_retries_total by outcome, requests, what is available', async () => {
    const { balancer, router } = await refusingPool({ retryBudget: { ratio: 0.2, minRetriesPerSecond: 0.1, ttlMs: 10_000 } });
    for (let i = 0; i < 10; i++) await rejection(connect(router, { attempts: 3 }));
    const registry = new Registry();
    collectMetrics(balancer, { registry });
    const f = parseMetricsText(await registry.metrics());
    const v = (name: string, labels: Record<string, string> = {}): number | undefined =>
      f.get(name)?.samples.find((s) => Object.entries(labels).every(([k, x]) => s.labels[k] === x))?.value;
    // max(1, 0.2 × 10) = 2 retries over 10 requests (the 1st's from the floor, the 10th's from the ratio).
    expect(v('poise_retries_total', { outcome: 'allowed' })).toBe(2);
    expect(v('poise_retries_total', { outcome: 'refused' })).toBe(10);
    expect(v('poise_retry_budget_requests_total')).toBe(10);
    expect(v('poise_retry_budget_available')).toBe(0);
    expect(v('poise_retry_budget_processes')).toBe(1);
  });

  it('the budget never refuses a first attempt: backends that return are used within one ejection time', async () => {
    const ejection = { consecutiveFailures: 1, baseMs: 1000, maxMs: 1000 };
    const { balancer, router, ports, clock } = await refusingPool({ retryBudget: { ratio: 0, minRetriesPerSecond: 0 } }, ejection);
    for (let i = 0; i < 6; i++) await rejection(connect(router, { attempts: 3 }));
    expect(balancer.retryBudgetStats().available).toBe(0);
    // The backends come back.
    const servers = await Promise.all(
      ports.map(
        (port) =>
          new Promise<net.Server>((resolve) => {
            const s = net.createServer((c) => c.end());
            s.listen(port, '127.0.0.1', () => resolve(s));
          }),
      ),
    );
    onTestFinished(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))).then(() => undefined));
    clock.advance(1000);
    const { socket, attempts } = await connect(router, { attempts: 3 });
    expect(attempts).toBe(1);
    socket.destroy();
  });

  it('refuses a bad budget naming the field, and a membership snapshot with a bad one keeps the last good budget', async () => {
    expect(thrown(() => new Balancer({ retryBudget: { ratio: 2 } })).message).toBe(
      'options.retryBudget.ratio: must be a number in [0, 1], got 2',
    );
    expect(thrown(() => new Balancer({ retryBudget: { clock: () => 0 } })).message).toBe(
      'options.retryBudget.clock: unknown option (accepted: ratio, minRetriesPerSecond, ttlMs)',
    );
    const { balancer } = await refusingPool({ retryBudget: { ratio: 0.5, minRetriesPerSecond: 1, ttlMs: 2000 } });
    const backends = balancer.slotEntries().map((e) => e.spec);
    expect(thrown(() => balancer.apply({ version: 10, backends, retryBudget: { ttlMs: 1 } })).message).toBe(
      'membership.retryBudget.ttlMs: must be an integer in [10, 3600000], got 1',
    );
    expect(balancer.ownerTable.retries.config()).toEqual({ bucketMs: 200, ratioPpm: 500_000, floor: 2, processes: 1 });
    balancer.apply({ version: 11, backends, retryBudget: { ratio: 0.1 } });
    expect(balancer.ownerTable.retries.config()).toEqual({ bucketMs: 1000, ratioPpm: 100_000, floor: 100, processes: 1 });
    balancer.apply({ version: 12, backends, retryBudget: false });
    expect(balancer.ownerTable.retries.config()).toBeUndefined();
  });
});
