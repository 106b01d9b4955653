/**
 * The probe pool across worker threads (dist/, real threads, real loopback
 * backends answering the probe path): one prober per process, so the
 * probe budget — share × requests + burst — holds for the requests of all
 * four threads together, and every thread's picks follow the answers.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { LoadTable } from '../../dist/src/load/load-table.js';
import { Balancer } from '../../dist/src/runtime/balancer.js';
import { createLogger } from '../../dist/src/log.js';

const WORKER = new URL('../fixtures/probe-worker.mjs', import.meta.url);
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('the probe pool across 4 worker threads', () => {
  it('probes stay within share × all threads’ requests + burst (share 1 %: the budget binds), and the answers steer every thread', async () => {
    // b2 says it is idle and fast; the others are busy and slow. Each counts the probes it answers.
    const servers: Array<{ probes: number; port: number }> = [];
    for (let i = 0; i < 4; i++) {
      const answer = i === 2 ? 'rif=0, latency_us=10' : 'rif=50, latency_us=1000';
      const s = { probes: 0, port: 0 };
      const server = http.createServer((req, res) => {
        if (req.url === '/poise/probe') s.probes++;
        res.setHeader('poise-load', answer);
        res.end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      cleanups.push(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
      s.port = (server.address() as AddressInfo).port;
      servers.push(s);
    }
    const share = 0.01;
    const burst = 8;
    const balancer = new Balancer({
      logger: createLogger({ level: 'silent' }),
      health: { probe: { share, burst, intervalMs: 5, maxAgeMs: 1000, maxUses: 1_000_000, quantile: 1, sample: 4 } },
    });
    cleanups.push(() => balancer.close());
    balancer.update(servers.map((s, i) => ({ id: `b${i}`, address: `127.0.0.1:${s.port}` })));
    const n = 20_000;
    const workers = Array.from({ length: 4 }, () => new Worker(WORKER, { workerData: { attachment: balancer.attachment() } }));
    cleanups.push(() => Promise.all(workers.map((w) => w.terminate())));
    await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))));
    const results = await Promise.all(
      workers.map(
        (w) =>
          new Promise<{ counts: Record<string, number> }>((resolve, reject) => {
            w.once('message', resolve);
            w.once('error', reject);
            w.postMessage({ n });
          }),
      ),
    );
    // Let the last round's probes land, then stop the prober.
    await new Promise((r) => setTimeout(r, 50));
    balancer.close();
    const requests = 4 * n;
    const probed = servers.reduce((a, s) => a + s.probes, 0);
    const sent = LoadTable.attach(balancer.attachment().buffer).probes.counts().sent;
    expect(probed).toBeLessThanOrEqual(sent);
    expect(sent).toBeLessThanOrEqual(share * requests + burst);
    expect(probed).toBeGreaterThan(0);
    // Every thread follows the answers: b2 (idle, fast) takes more than the 1/4 a blind rule would give it (σ of a 1/4 share of 20,000 picks: 0.003).
    for (const r of results) {
      const total = Object.values(r.counts).reduce((a, b) => a + b, 0);
      expect(total).toBe(n);
      expect(r.counts['b2']! / n).toBeGreaterThan(0.27);
    }
  }, 60_000);
});
