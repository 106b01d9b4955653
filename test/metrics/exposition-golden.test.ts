/**
 * The whole exposition of collectMetrics for one fixed state (three
 * backends with roles, priorities and localities, a replica's lag, a
 * proxy's rows, HTTP and gRPC counters, admission figures, a discovery source),
 * compared byte for byte with test/metrics/fixtures/exposition.golden.txt.
 * The fixture was written by the collector before it became tables
 * (src/metrics/families/), so any change of a name, a help text, a label,
 * a value or the order of families shows here. The tables' declared
 * names, kinds, help texts and labels are what the exposition prints. The one wall-clock value
 * (`membership_last_change_timestamp_seconds`) is checked against the
 * clock and then masked.
 */
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { AdmissionStatsSource } from '../../src/admission/admission-stats.js';
import { newDiscoveryStatus } from '../../src/discovery/status.js';
import { GrpcCounters } from '../../src/grpc/counters.js';
import { HttpCounters, outcomeCode } from '../../src/http/counters.js';
import { collectMetrics } from '../../src/metrics/collect.js';
import type { Family } from '../../src/metrics/family.js';
import { ADMISSION_FAMILIES } from '../../src/metrics/families/admission.js';
import { BACKEND_FAMILIES } from '../../src/metrics/families/backend.js';
import { BALANCER_FAMILIES, MEMBERSHIP_FAMILIES, SOURCE_FAMILIES } from '../../src/metrics/families/balancer.js';
import { DISCOVERY_FAMILIES } from '../../src/metrics/families/discovery.js';
import { GRPC_FAMILIES } from '../../src/metrics/families/grpc.js';
import { HTTP_FAMILIES } from '../../src/metrics/families/http.js';
import { PROXY_FAMILIES } from '../../src/metrics/families/proxy.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';
import { ProxyCounters } from '../../src/proxy/counters.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';
import { manualClock } from '../helpers/runtime.js';

const GOLDEN = new URL('./fixtures/exposition.golden.txt', import.meta.url);
const CHANGE = /^(poise_membership_last_change_timestamp_seconds\{cluster="api"\}) (\S+)$/m;

/** The exposition of the fixed state, with the wall-clock line's value masked (after checking it). */
async function goldenExposition(): Promise<string> {
  const before = Date.now() / 1000;
  // A clock of its own: the EWMA estimates are decayed to it, so they are fixed too.
  const b = new Balancer({ logger: createLogger({ level: 'silent' }), clock: manualClock(1000).now });
  b.update([
    { id: 'p', address: '127.0.0.1:7000', role: 'primary', weight: 300, locality: 'eu-west/a' },
    { id: 'r', address: '127.0.0.1:7001', role: 'replica', priority: 1 },
    { id: 'x', address: '127.0.0.1:7002', weight: 50 },
  ]);
  const entry = (id: string) => b.slotEntries().find((e) => e.id === id)!;
  b.ownerTable.db.write(entry('r').slot, 2, 2500, 0, 0);

  const proxy = ProxyCounters.create({ workers: 2 });
  for (let i = 0; i < 5; i++) proxy.accepted(1);
  proxy.accepted(0);
  proxy.refused(1, 'no_backend');
  proxy.refused(0, 'bad_header');
  proxy.headerTimeout(1);
  proxy.bytes(0, 6, 1234);
  proxy.bytes(0, 7, 2 ** 33 + 5);
  proxy.opened(1);
  proxy.closed(1, 12, true);
  for (let i = 0; i < 2; i++) proxy.opened(1);
  proxy.reclaim(1);
  proxy.opened(0);

  const http = HttpCounters.create({ capacity: b.table.capacity });
  const p = entry('p');
  const pg = b.table.stats(p.slot).generation;
  http.record(p.slot, pg, outcomeCode('success'), 0.4);
  http.record(p.slot, pg, outcomeCode('success'), 3);
  http.record(p.slot, pg, outcomeCode('failure'), 30);
  http.record(p.slot, pg, outcomeCode('overload'), 20_000);
  http.record(p.slot, pg, outcomeCode('cancelled'), -1);
  http.retry(p.slot, pg, false);
  http.retry(p.slot, pg, true);
  http.loadReport(p.slot, pg, false);
  http.loadReport(p.slot, pg, true);

  const grpc = GrpcCounters.create({ capacity: b.table.capacity });
  const x = entry('x');
  const xg = b.table.stats(x.slot).generation;
  for (let i = 0; i < 4; i++) grpc.started(x.slot, xg);
  grpc.ended(x.slot, xg, 0, 1); // OK, with an ORCA trailer
  grpc.ended(x.slot, xg, 14, 0); // UNAVAILABLE
  grpc.ended(x.slot, xg, 5, 2); // NOT_FOUND: an error, with a malformed trailer
  grpc.retry(x.slot, xg, false);
  grpc.retry(x.slot, xg, true);

  const admission: AdmissionStatsSource = {
    admissionStats: () => ({
      saturation: 0.75,
      waiting: 2,
      bands: [
        { band: 0, queued: 2, oldestWaitMs: 1500, admitted: 9, rejected: { QueueFull: 1, QueueTimeout: 0 } },
        { band: 3, queued: 0, oldestWaitMs: 0, admitted: 4, rejected: { QueueFull: 0, QueueTimeout: 2 } },
      ],
    }),
  };
  const status = newDiscoveryStatus('dns:api.internal:80');
  status.lastSuccessMs = 1_700_000_000_500;
  status.records = 3;
  status.state = 'stale';
  status.errors.timeout = 2;
  status.errors.servfail = 1;
  const source = { start: async () => {}, close: async () => {}, version: 0, description: 'dns:api.internal:80', status };

  const registry = new Registry();
  collectMetrics(b, { registry, cluster: 'api', source, proxy, admission, http, grpc });
  const text = await registry.metrics();
  b.close();
  const change = Number(CHANGE.exec(text)?.[2]);
  expect(change).toBeGreaterThanOrEqual(Math.floor(before));
  expect(change).toBeLessThanOrEqual(Date.now() / 1000);
  return text.replace(CHANGE, '$1 <wall clock>');
}

const TABLES: readonly (readonly Family<never>[])[] = [
  BACKEND_FAMILIES,
  MEMBERSHIP_FAMILIES,
  SOURCE_FAMILIES,
  DISCOVERY_FAMILIES,
  BALANCER_FAMILIES,
  PROXY_FAMILIES,
  HTTP_FAMILIES,
  GRPC_FAMILIES,
  ADMISSION_FAMILIES,
];

describe('the exposition of collectMetrics', () => {
  it('is byte-identical to the golden fixture for the fixed state', async () => {
    expect(await goldenExposition()).toBe(readFileSync(GOLDEN, 'utf8'));
  });

  it('prints the families of the tables in table order, each series with exactly the labels its family declares', async () => {
    const families = parseMetricsText((await goldenExposition()).replace('<wall clock>', '0'));
    const declared = TABLES.flat();
    expect([...families.keys()]).toEqual(declared.map((f) => `poise_${f.name}`));
    for (const f of declared) {
      const fam = families.get(`poise_${f.name}`)!;
      expect([fam.name, fam.type, fam.help]).toEqual([`poise_${f.name}`, f.kind, f.help]);
      // Every family prints series in this state but the retry budget's `available` (absent without a budget, as its help says).
      if (f.name !== 'retry_budget_available') expect(fam.samples.length, f.name).toBeGreaterThan(0);
      for (const sample of fam.samples) {
        const want = sample.name.endsWith('_bucket') && f.kind === 'histogram' ? [...f.labels, 'le'] : [...f.labels];
        expect(Object.keys(sample.labels), sample.name).toEqual(want);
      }
    }
  });
});
