// The dispatcher's per-backend request metrics in a scrape: requests by
// outcome, retries, refused retries and the latency histogram, read from the
// shared HttpCounters (so one scrape covers every dispatcher thread), exact
// and valid under the strict text-format parser.
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { HttpCounters, LATENCY_BUCKETS_SECONDS } from '../../src/http/counters.js';
import { PoiseDispatcher } from '../../src/http/dispatcher.js';
import { collectMetrics } from '../../src/metrics/collect.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { fleet } from '../helpers/http-backends.js';
import { thrown } from '../helpers/thrown.js';

const logger = createLogger({ level: 'silent' });
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('HTTP metrics in /metrics', () => {
  it('poise_http_requests_total by outcome, retries, refused retries and the latency histogram, per backend', async () => {
    const f = await fleet(2);
    cleanups.push(() => f.close());
    const [h0, h1] = f.backends;
    h0!.respond = (_req, res) => {
      res.writeHead(503);
      res.end();
    };
    const balancer = new Balancer({ logger });
    balancer.update(f.specs());
    const counters = HttpCounters.create({ capacity: balancer.table.capacity });
    let t = 0;
    // Every attempt measures 7 ms (sent at one reading, headers at the next).
    const dispatcher = new PoiseDispatcher({
      router: balancer.router({ policy: 'round-robin', ejection: { consecutiveFailures: 1000 } }),
      origin: 'http://api',
      counters,
      clock: () => (t += 7),
      retryBudget: { minRetriesPerSecond: 0, ratio: 0.25, clock: () => 0 },
    });
    cleanups.push(() => dispatcher.destroy());
    // 4 requests: h0 answers 503 twice (failures, returned to the caller), h1 200 twice.
    for (let i = 0; i < 4; i++) await (await request('http://api/', { dispatcher })).body.text();
    // h1 dies; 4 more GETs, round-robin: h0 (503); h1, refused, retried on h0 (the budget, a quarter of
    // a retry per request, holds 1.5 retries); h1, refused, not retried (0.75 left): the caller's error; h0 (503).
    await h1!.kill();
    const errors: string[] = [];
    for (let i = 0; i < 4; i++) {
      try {
        await (await request('http://api/', { dispatcher })).body.text();
      } catch (err) {
        errors.push((err as { code: string }).code);
      }
    }
    expect(errors).toEqual(['ECONNREFUSED']);
    const registry = new Registry();
    collectMetrics(balancer, { registry, cluster: 'api', http: counters });
    const fam = parseMetricsText(await registry.metrics());
    const sample = (name: string, labels: Record<string, string>): number | undefined =>
      fam
        .get(name.replace(/_(bucket|sum|count)$/, ''))
        ?.samples.find((s) => s.name === name && Object.entries(labels).every(([k, x]) => s.labels[k] === x))?.value;
    const b = (id: string): Record<string, string> => ({ cluster: 'api', backend: id, priority: '0', locality: '' });
    expect(sample('poise_http_requests_total', { ...b('h0'), outcome: 'failure' })).toBe(5);
    expect(sample('poise_http_requests_total', { ...b('h0'), outcome: 'success' })).toBe(0);
    expect(sample('poise_http_requests_total', { ...b('h1'), outcome: 'success' })).toBe(2);
    expect(sample('poise_http_requests_total', { ...b('h1'), outcome: 'failure' })).toBe(2);
    expect(sample('poise_http_retries_total', b('h1'))).toBe(1);
    expect(sample('poise_http_retries_refused_total', b('h1'))).toBe(1);
    // The latency histogram: every attempt with headers measured 7 ms: h0 5, h1 2 (the refused connects have none).
    const le = String(LATENCY_BUCKETS_SECONDS.find((s) => s >= 0.007));
    expect(sample('poise_http_response_latency_seconds_bucket', { ...b('h0'), le })).toBe(5);
    expect(sample('poise_http_response_latency_seconds_bucket', { ...b('h0'), le: '0.005' })).toBe(0);
    expect(sample('poise_http_response_latency_seconds_count', b('h1'))).toBe(2);
    expect(sample('poise_http_response_latency_seconds_sum', b('h0'))).toBeCloseTo(0.035, 9);
    expect(fam.get('poise_http_response_latency_seconds')?.type).toBe('histogram');
    expect(h0!.seen.length).toBe(5);
  });

  it('refuses an http option that is not an HttpCounters', () => {
    const balancer = new Balancer({ logger });
    expect(thrown(() => collectMetrics(balancer, { registry: new Registry(), http: {} as never })).message).toBe(
      'options.http: must be an HttpCounters (poise-lb/http), got a object',
    );
  });
});
