/**
 * The probe pool through a Balancer (`health.probe`, manual clock: rounds
 * run through pollLoadReports): answers of real loopback backends recorded
 * in the table and read by every router, the hot-cold rule through the
 * runtime, stale answers falling back, a failing backend's answers ignored,
 * the budget, and the options' validation.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { resolveProbe } from '../../src/health/probe-pool.js';
import type { ProbeReading } from '../../src/load/probe-region.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { binomialSigma } from '../helpers/policy.js';
import { manualClock } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Backends answering the probe path with `answers[i]` (mutable), counting probes. */
async function backends(answers: string[]): Promise<{ ports: number[]; probes: number[] }> {
  const probes = answers.map(() => 0);
  const ports: number[] = [];
  for (let i = 0; i < answers.length; i++) {
    const server = http.createServer((req, res) => {
      if (req.url === '/poise/probe') probes[i]!++;
      res.setHeader('poise-load', answers[i]!);
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
    ports.push((server.address() as AddressInfo).port);
  }
  return { ports, probes };
}

async function setup(answers: string[], probe: Record<string, unknown> = {}) {
  const clock = manualClock(1000);
  const f = await backends(answers);
  const balancer = new Balancer({
    logger: createLogger({ level: 'silent' }),
    clock: clock.now,
    health: { probe: { maxUses: 1000, quantile: 0.5, sample: 4, maxAgeMs: 100, ...probe } },
  });
  cleanups.push(() => balancer.close());
  balancer.update(f.ports.map((port, i) => ({ id: `b${i}`, address: `127.0.0.1:${port}` })));
  return { clock, f, balancer };
}

/** `n` picks of `router`, each released at once (or with `outcome`), as ids. */
function picks(router: Router, n: number, outcome: 'success' | 'failure' = 'success'): string[] {
  return Array.from({ length: n }, () => {
    const lease = router.acquire();
    lease.release(outcome);
    return lease.id;
  });
}

const ANSWERS = ['rif=0, latency_us=900', 'rif=1, latency_us=100', 'rif=9, latency_us=10', 'rif=9, latency_us=20'];

describe('the probe pool', () => {
  it("one round's answers serve every router: the hot-cold rule through the runtime", async () => {
    const { balancer, f } = await setup(ANSWERS);
    const warm = balancer.router({ policy: 'probe', seed: 1 });
    // No answer yet: the picks fall back, and give the bucket 0.05 × 200 = 10 tokens (burst 8): every backend probed once.
    picks(warm, 200);
    warm.close();
    await balancer.pollLoadReports();
    expect(f.probes).toEqual([1, 1, 1, 1]);
    expect(balancer.ownerTable.probes.counts()).toMatchObject({ sent: 4, answers: 4 });
    // Cold threshold: the median of 0, 1, 9, 9 (nearest rank) = 1: b0 and b1 are cold, b1 the faster.
    expect(balancer.ownerTable.probes.coldInflight).toBe(1);
    // Another router (another thread would do the same) reads the same answers:
    // b1 (1 + 0 uses); then b1 is 2 > 1, hot; b0 (0 + 0), b0 (0 + 1); then all hot, the lowest in-flight is b0 or b1 (2 each).
    const other = balancer.router({ policy: 'probe', seed: 2 });
    const seq = picks(other, 4);
    expect(seq.slice(0, 3)).toEqual(['b1', 'b0', 'b0']);
    expect(['b0', 'b1']).toContain(seq[3]);
  });

  it('stale answers are not used: the picks fall back to p2c:latency (no answer is used, shares even)', async () => {
    const { balancer, clock } = await setup(ANSWERS);
    const r = balancer.router({ policy: 'probe', seed: 3 });
    picks(r, 600);
    await balancer.pollLoadReports();
    clock.advance(101);
    const reading: ProbeReading = { inflight: 0, latencyUs: 0, ageMs: 0, uses: 0 };
    const N = 4000;
    const seen = picks(r, N);
    for (let s = 0; s < 4; s++) {
      expect(balancer.ownerTable.probes.read(s, clock.now() & 0x3fffffff, reading)).toBe(true);
      expect(reading.uses).toBe(0);
      expect(reading.ageMs).toBe(101);
    }
    const b1 = seen.filter((id) => id === 'b1').length;
    expect(Math.abs(b1 - N / 4)).toBeLessThan(5 * binomialSigma(N, 1 / 4));
  });

  it("a fast-failing backend's quick answers attract no traffic once its requests fail", async () => {
    // b2 answers best of all: idle and fast.
    const { balancer } = await setup(['rif=3, latency_us=900', 'rif=3, latency_us=800', 'rif=0, latency_us=1', 'rif=3, latency_us=700'], {
      quantile: 1,
    });
    const r = balancer.router({ policy: 'probe', seed: 4 });
    picks(r, 600);
    await balancer.pollLoadReports();
    expect(picks(r, 1)).toEqual(['b2']);
    // Its requests fail: one failure and it is out of the probe rule's choice.
    const lease = r.acquire({ exclude: ['b0', 'b1', 'b3'] });
    expect(lease.id).toBe('b2');
    lease.release('failure');
    const after = picks(r, 300);
    expect(after.filter((id) => id === 'b2')).toEqual([]);
  });

  it('keeps probes within share × requests + burst, and spends the budget (less what routers have not flushed)', async () => {
    const { balancer, f } = await setup(ANSWERS, { share: 0.01, burst: 4 });
    const r = balancer.router({ policy: 'probe', seed: 5 });
    let requests = 0;
    for (let round = 0; round < 20; round++) {
      requests += picks(r, 256).length;
      await balancer.pollLoadReports();
    }
    const sent = f.probes.reduce((a, b) => a + b, 0);
    expect(sent).toBe(balancer.ownerTable.probes.counts().sent);
    expect(sent).toBeLessThanOrEqual(0.01 * requests + 4);
    // A router adds its picks in batches of 64 per backend: at most 4 × 63 not seen yet.
    expect(sent).toBeGreaterThanOrEqual(Math.floor(0.01 * (requests - 4 * 63)) - 1);
  });

  it('validates its options, naming the field', () => {
    expect(thrown(() => resolveProbe({ share: 0 }, 'health.probe')).message).toMatch(/health\.probe\.share/);
    expect(thrown(() => resolveProbe({ sample: 65 }, 'health.probe')).message).toMatch(/health\.probe\.sample/);
    expect(thrown(() => resolveProbe({ path: 'x' }, 'health.probe')).message).toMatch(/health\.probe\.path/);
    expect(thrown(() => resolveProbe({ maxUses: 0 }, 'health.probe')).message).toMatch(/health\.probe\.maxUses/);
    expect(thrown(() => resolveProbe({ other: 1 }, 'health.probe')).code).toBe('InvalidConfig');
    expect(thrown(() => new Balancer({ health: { probe: { quantile: 2 } } })).message).toMatch(/health\.probe\.quantile/);
  });
});
