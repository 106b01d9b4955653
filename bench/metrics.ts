/**
 * Metrics benchmark: what a Prometheus scrape costs, and what it costs the
 * routers.
 *
 * 1. Scrape cost: `registry.metrics()` (collectMetrics over a Balancer of n
 *    backends, with ProxyCounters) for n = 8, 64, 512, 1024: median ms per
 *    scrape over 30 scrapes after 5 warm-up ones, and µs per backend.
 * 2. Routers under scraping: one worker thread runs acquire + release on
 *    its own Router (p2c, 64 backends) for 1 s per round, while the main
 *    thread idles, runs a busy loop that touches no shared memory, or
 *    scrapes back to back; rounds interleave (idle, busy, scraping) x 5; the
 *    figure is the median pairs/s of each and the ratios (scraping / busy
 *    separates the scrape's shared reads from plain CPU contention). A scrape only loads shared words, so what it can take from
 *    a router is CPU (on a 2-core machine shared with others) and cache
 *    lines read while the router writes them, never a lock.
 *
 * Run: `npm run build && node dist/bench/metrics.js [--quick]`. Writes bench/results/metrics.json.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { Registry } from 'prom-client';
import { createLogger } from '../src/log.js';
import { collectMetrics } from '../src/metrics/collect.js';
import { ProxyCounters } from '../src/proxy/counters.js';
import { Balancer } from '../src/runtime/balancer.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';

const QUICK = process.argv.includes('--quick');
const logger = createLogger({ level: 'silent' });

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function balancerOf(n: number): Balancer {
  const b = new Balancer({ logger, capacity: Math.max(n, 8) });
  b.update(
    Array.from({ length: n }, (_, i) => ({
      id: `backend-${i}`,
      address: `127.0.0.1:${10_000 + i}`,
      priority: i % 3,
      locality: `zone-${i % 4}`,
    })),
  );
  return b;
}

async function scrapeCost(n: number): Promise<Record<string, unknown>> {
  const b = balancerOf(n);
  const registry = new Registry();
  collectMetrics(b, { registry, proxy: ProxyCounters.create({ workers: 2 }) });
  const r = b.router({ policy: 'p2c' });
  const held = Array.from({ length: Math.min(n, 64) }, () => r.acquire());
  let bytes = 0;
  for (let i = 0; i < 5; i++) bytes = (await registry.metrics()).length;
  const ms: number[] = [];
  for (let i = 0; i < (QUICK ? 8 : 30); i++) {
    const t0 = performance.now();
    await registry.metrics();
    ms.push(performance.now() - t0);
  }
  for (const l of held) l.release('cancelled');
  b.close();
  const m = median(ms);
  return {
    backends: n,
    'scrape ms (median)': Math.round(m * 100) / 100,
    'µs per backend': Math.round((m * 1000 * 10) / n) / 10,
    'text KiB': Math.round(bytes / 102.4) / 10,
  };
}

type MainMode = 'idle' | 'busy' | 'scraping';

async function routerRound(b: Balancer, registry: Registry, mode: MainMode, ms: number): Promise<{ ops: number; scrapes: number }> {
  const stop = new SharedArrayBuffer(4);
  const w = new Worker(new URL('./metrics-thread.js', import.meta.url), { workerData: { attachment: b.attachment(), stop } });
  b.watchWorker(w);
  await new Promise((resolve) => w.once('message', resolve));
  const done = new Promise<number>((resolve) => w.once('message', resolve));
  w.postMessage('go');
  const end = performance.now() + ms;
  let scrapes = 0;
  if (mode === 'scraping') {
    while (performance.now() < end) {
      await registry.metrics();
      scrapes++;
    }
  } else if (mode === 'busy') {
    // The same CPU taken from the machine without touching shared memory: separates CPU contention from the scrape's reads.
    let sink = 0;
    while (performance.now() < end) for (let k = 0; k < 100_000; k++) sink = (sink + k * k) | 0;
    if (sink === 42) console.log('');
  } else {
    await new Promise((r) => setTimeout(r, ms));
  }
  Atomics.store(new Int32Array(stop), 0, 1);
  const ops = await done;
  await w.terminate();
  return { ops: ops / (ms / 1000), scrapes };
}

async function main(): Promise<void> {
  const cost: Record<string, unknown>[] = [];
  for (const n of [8, 64, 512, 1024]) {
    progress(`scrape cost, ${n} backends`);
    cost.push(await scrapeCost(n));
  }
  progressDone();
  console.log(formatTable(cost));
  const b = balancerOf(64);
  const registry = new Registry();
  collectMetrics(b, { registry });
  const ops: Record<MainMode, number[]> = { idle: [], busy: [], scraping: [] };
  let scrapes = 0;
  const rounds = QUICK ? 2 : 5;
  const ms = QUICK ? 300 : 1000;
  for (let i = 0; i < rounds; i++) {
    progress(`routers under scraping, round ${i + 1}/${rounds}`);
    for (const mode of ['idle', 'busy', 'scraping'] as const) {
      const r = await routerRound(b, registry, mode, ms);
      ops[mode].push(r.ops);
      scrapes += r.scrapes;
    }
  }
  progressDone();
  const label: Record<MainMode, string> = { idle: 'idle', busy: 'busy loop (no shared reads)', scraping: 'scraping back to back' };
  const under = (['idle', 'busy', 'scraping'] as const).map((mode) => ({
    main: label[mode],
    'router pairs/s (median)': Math.round(median(ops[mode])),
    'spread min..max': `${Math.round(Math.min(...ops[mode]))}..${Math.round(Math.max(...ops[mode]))}`,
    ...(mode === 'scraping' ? { 'scrapes/s': Math.round(scrapes / ((rounds * ms) / 1000)) } : {}),
  }));
  console.log(formatTable(under));
  const ratio = median(ops.scraping) / median(ops.idle);
  const ratioBusy = median(ops.scraping) / median(ops.busy);
  console.log(
    `scraping / idle ${ratio.toFixed(3)}, scraping / busy loop ${ratioBusy.toFixed(3)} (load average ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')})`,
  );
  b.close();
  const file = writeResults('metrics', {
    quick: QUICK,
    loadAverage: os.loadavg(),
    scrapeCost: cost,
    routersUnderScraping: under,
    ratio,
    ratioVsBusyLoop: ratioBusy,
  });
  console.log(`wrote ${file}`);
}

await main();
