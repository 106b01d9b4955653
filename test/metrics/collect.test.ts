/**
 * collectMetrics against an embedded Balancer: exact figures read from the
 * table (picks, in-flight, slots and tombstones, the priority plan,
 * reclaims counted from the table), every scrape valid under the strict
 * parser, Prometheus naming conventions, option refusals, and the
 * AdmissionStatsSource plumbing. A reclaim after a real worker thread dies:
 * test/integration/metrics-proxy.test.ts.
 */
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { AdmissionStatsSource } from '../../src/admission/admission-stats.js';
import { collectMetrics } from '../../src/metrics/collect.js';
import { newDiscoveryStatus } from '../../src/discovery/status.js';
import { parseMetricsText, type MetricFamily } from '../../src/metrics/text-format.js';
import { ProxyCounters } from '../../src/proxy/counters.js';
import { HttpCounters } from '../../src/http/counters.js';
import { GrpcCounters } from '../../src/grpc/counters.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { createLogger } from '../../src/log.js';
import { specs } from '../helpers/runtime.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });

async function families(registry: Registry): Promise<Map<string, MetricFamily>> {
  return parseMetricsText(await registry.metrics());
}

function v(f: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  return f.get(name)?.samples.find((s) => s.name === name && Object.entries(labels).every(([k, x]) => s.labels[k] === x))?.value;
}

describe('collectMetrics', () => {
  it("shows each backend's database role (exactly one role is 1) and replication lag, as the table holds them", async () => {
    const b = new Balancer({ logger });
    b.update([
      { id: 'p', address: '127.0.0.1:7000', role: 'primary' },
      { id: 'r', address: '127.0.0.1:7001', role: 'replica' },
      { id: 'x', address: '127.0.0.1:7002' },
    ]);
    const slot = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
    // What a roles check writes: the replica 2.5 s behind.
    b.ownerTable.db.write(slot('r'), 2, 2500, 0, 0);
    const registry = new Registry();
    collectMetrics(b, { registry });
    const f = await families(registry);
    const role = (backend: string, r: string): number | undefined => v(f, 'poise_backend_role', { backend, role: r });
    expect([role('p', 'primary'), role('p', 'replica'), role('p', 'unknown')]).toEqual([1, 0, 0]);
    expect([role('r', 'primary'), role('r', 'replica'), role('r', 'unknown')]).toEqual([0, 1, 0]);
    expect([role('x', 'primary'), role('x', 'replica'), role('x', 'unknown')]).toEqual([0, 0, 1]);
    expect(v(f, 'poise_backend_replication_lag_seconds', { backend: 'r' })).toBe(2.5);
    expect(v(f, 'poise_backend_replication_lag_seconds', { backend: 'p' })).toBe(0);
    b.close();
  });

  it('every family has HELP and TYPE, counters end in _total, units are base units, and the scrape parses strictly', async () => {
    const b = new Balancer({ logger });
    b.update(specs(3));
    const registry = new Registry();
    // The shape AdmissionGate.admissionStats() returns (a stand-in: the figures are fixed, so the scrape's values are known).
    const admission: AdmissionStatsSource = {
      admissionStats: () => ({
        saturation: 0.75,
        waiting: 2,
        bands: [{ band: 0, queued: 2, oldestWaitMs: 1500, admitted: 9, rejected: { QueueFull: 1, QueueTimeout: 0 } }],
      }),
    };
    const counters = ProxyCounters.create({ workers: 2 });
    // Row 1: 5 accepted, 1 refused, 1 spliced and closed, 3 still open when its thread died.
    for (let i = 0; i < 5; i++) counters.accepted(1);
    counters.refused(1, 'no_backend');
    counters.opened(1);
    counters.closed(1, 12, false);
    for (let i = 0; i < 3; i++) counters.opened(1);
    expect(counters.reclaim(1)).toBe(3);
    const c = collectMetrics(b, { registry, proxy: counters, admission });
    const f = await families(registry);
    expect([...f.keys()].sort()).toEqual([...c.names].sort());
    for (const fam of f.values()) {
      expect(fam.help, fam.name).toBeTypeOf('string');
      expect(fam.type, fam.name).not.toBe('untyped');
      if (fam.type === 'counter') expect(fam.name).toMatch(/_total$/);
      else expect(fam.name).not.toMatch(/_total$/);
      expect(fam.name).not.toMatch(/_(ms|milliseconds|us|kb|percent)($|_)/);
      expect(fam.name.startsWith('poise_')).toBe(true);
    }
    expect(v(f, 'poise_admission_queue_length', { band: '0' })).toBe(2);
    expect(v(f, 'poise_admission_oldest_wait_seconds', { band: '0' })).toBe(1.5);
    expect(v(f, 'poise_admission_admitted_total', { band: '0' })).toBe(9);
    expect(v(f, 'poise_admission_rejected_total', { band: '0', reason: 'queue_full' })).toBe(1);
    expect(v(f, 'poise_admission_rejected_total', { band: '0', reason: 'queue_timeout' })).toBe(0);
    expect(v(f, 'poise_admission_saturation_ratio')).toBe(0.75);
    // Two proxy workers: one accepted series each.
    expect(f.get('poise_proxy_accepted_total')!.samples.map((s) => s.labels['worker'])).toEqual(['0', '1']);
    expect(v(f, 'poise_proxy_worker_lost_connections_total', { worker: '1' })).toBe(3);
    expect(v(f, 'poise_proxy_worker_lost_connections_total', { worker: '0' })).toBe(0);
    expect(v(f, 'poise_proxy_accepted_total', { worker: '1' })).toBe(5);
    c.remove();
    expect(await registry.metrics()).toBe('\n');
  });

  it('picks_total counts every pick up to the scrape (the owner thread flushes its routers first): 259 round-robin picks over two backends read 130 and 129; in-flight counts open request leases', async () => {
    const b = new Balancer({ logger });
    b.update(specs(2));
    const registry = new Registry();
    collectMetrics(b, { registry, prefix: 'lb_', cluster: 'c' });
    const r = b.router({ policy: 'round-robin', leaseKind: 'request' });
    for (let i = 0; i < 256; i++) r.acquire().release('success', { latencyMs: 20 });
    const open = [r.acquire(), r.acquire(), r.acquire()];
    const f = await families(registry);
    expect(v(f, 'lb_backend_picks_total', { cluster: 'c', backend: 'b0' })).toBe(130);
    expect(v(f, 'lb_backend_picks_total', { backend: 'b1' })).toBe(129);
    expect(v(f, 'lb_backend_requests_in_flight', { backend: 'b0' })! + v(f, 'lb_backend_requests_in_flight', { backend: 'b1' })!).toBe(3);
    expect(v(f, 'lb_backend_requests_in_flight', { backend: 'b0' })).toBe(b.table.requests(0));
    // The PeakEWMA estimate, decayed to now, in seconds: every sample was 20 ms.
    const ewma = v(f, 'lb_backend_latency_ewma_seconds', { backend: 'b0' })!;
    expect(ewma).toBeGreaterThan(0.015);
    expect(ewma).toBeLessThanOrEqual(0.05);
    for (const l of open) l.release('cancelled');
    expect(v(await families(registry), 'lb_backend_requests_in_flight', { backend: 'b0' })).toBe(0);
  });

  it('slots, tombstones, version and last change: a removed backend holding a lease is a tombstone with state "removed" until the lease ends', async () => {
    const b = new Balancer({ logger, capacity: 3 });
    const registry = new Registry();
    collectMetrics(b, { registry });
    let f = await families(registry);
    expect(v(f, 'poise_membership_applied')).toBe(0);
    expect(v(f, 'poise_membership_last_change_timestamp_seconds')).toBe(0);
    const t0 = Date.now();
    b.update(specs(3));
    const lease = b.router({ policy: 'round-robin', leaseKind: 'connection' }).acquire({ exclude: ['b0', 'b1'] });
    b.update(specs(2));
    f = await families(registry);
    expect(v(f, 'poise_membership_version')).toBe(2);
    expect(v(f, 'poise_membership_applied')).toBe(1);
    expect(v(f, 'poise_membership_last_change_timestamp_seconds')! * 1000).toBeGreaterThanOrEqual(t0);
    expect(v(f, 'poise_slots', { state: 'live' })).toBe(2);
    expect(v(f, 'poise_slots', { state: 'tombstone' })).toBe(1);
    expect(v(f, 'poise_slots', { state: 'free' })).toBe(0);
    expect(v(f, 'poise_backend_state', { backend: 'b2', state: 'removed' })).toBe(1);
    expect(v(f, 'poise_backend_connections', { backend: 'b2' })).toBe(1);
    lease.release('success');
    b.update(specs(2).concat([{ id: 'n', address: '127.0.0.1:9000' }]));
    f = await families(registry);
    // The tombstone's slot (the only one left, its lease ended) went to the newcomer.
    expect(v(f, 'poise_slots', { state: 'tombstone' })).toBe(0);
    expect(v(f, 'poise_slots', { state: 'live' })).toBe(3);
    expect(v(f, 'poise_backend_state', { backend: 'n', state: 'ready' })).toBe(1);
    expect(v(f, 'poise_backend_state', { backend: 'b2', state: 'removed' })).toBeUndefined();
  });

  it('the priority plan: with 2 of 4 priority-0 hosts ready, availability 0.7 and the other 0.3 goes to priority 1 (Envoy overprovisioning 1.4)', async () => {
    const b = new Balancer({ logger });
    const registry = new Registry();
    collectMetrics(b, { registry });
    const p0 = (ready: number) =>
      Array.from({ length: 4 }, (_, i) => ({
        id: `p0-${i}`,
        address: `127.0.0.1:${7000 + i}`,
        status: i < ready ? ('ready' as const) : ('unavailable' as const),
      }));
    const p1 = Array.from({ length: 2 }, (_, i) => ({ id: `p1-${i}`, address: `127.0.0.1:${7100 + i}`, priority: 1 }));
    b.update([...p0(4), ...p1]);
    let f = await families(registry);
    expect(v(f, 'poise_priority_traffic_share_ratio', { priority: '0' })).toBe(1);
    expect(v(f, 'poise_priority_traffic_share_ratio', { priority: '1' })).toBe(0);
    // 2 of 4 ready: availability 50 % × 1.4 = 70 %; priority 1 takes the other 30 %.
    b.update([...p0(2), ...p1]);
    f = await families(registry);
    expect(v(f, 'poise_priority_availability_ratio', { priority: '0' })).toBe(0.7);
    expect(v(f, 'poise_priority_traffic_share_ratio', { priority: '0' })).toBe(0.7);
    expect(v(f, 'poise_priority_traffic_share_ratio', { priority: '1' })).toBe(0.3);
    expect(v(f, 'poise_priority_panic', { priority: '0' })).toBe(0);
  });

  it('a scrape writes nothing to shared memory beyond the owner routers’ batched statistics: the LoadTable and the proxy counters are byte-identical across 5 scrapes', async () => {
    const b = new Balancer({ logger });
    b.update(specs(4, { priority: 0 }).map((x, i) => ({ ...x, priority: i % 2 })));
    const r = b.router({ policy: 'p2c:latency' });
    const held = [r.acquire(), r.acquire({ kind: 'connection' })];
    r.acquire().release('failure');
    const counters = ProxyCounters.create({ workers: 2 });
    counters.accepted(1);
    const registry = new Registry();
    collectMetrics(b, { registry, proxy: counters });
    // The first scrape counts in the owner thread's batched picks and outcomes (its routers' statistics);
    // from then on a scrape writes nothing.
    await registry.metrics();
    const buffer = b.attachment().buffer;
    const table = new Uint8Array(buffer).slice();
    const proxy = new Uint8Array(counters.buffer).slice();
    for (let i = 0; i < 5; i++) parseMetricsText(await registry.metrics());
    expect(Buffer.compare(new Uint8Array(buffer), table)).toBe(0);
    expect(Buffer.compare(new Uint8Array(counters.buffer), proxy)).toBe(0);
    for (const l of held) l.release('cancelled');
  });

  it('an ejection shows in the very next scrape: 200 rounds, 40 balancers x 5 backends ejected one at a time (only those ejected so far show it)', async () => {
    const ids = specs(5).map((x) => x.id);
    for (let block = 0; block < 40; block++) {
      const b = new Balancer({ logger });
      b.update(specs(5));
      const registry = new Registry();
      collectMetrics(b, { registry });
      const r = b.router({ policy: 'round-robin', ejection: { consecutiveFailures: 1, baseMs: 60_000, maxMs: 60_000 } });
      for (let k = 0; k < 5; k++) {
        const victim = ids[(block + k) % 5]!;
        r.acquire({ exclude: ids.filter((id) => id !== victim) }).release('failure');
        const f = await families(registry);
        const ejected = f
          .get('poise_backend_state')!
          .samples.filter((x) => x.labels['state'] === 'ejected' && x.value === 1)
          .map((x) => x.labels['backend']);
        const round = `round ${block * 5 + k}`;
        expect(ejected.sort(), round).toEqual(ids.filter((_id, i) => (((i - block) % 5) + 5) % 5 <= k).sort());
        expect(v(f, 'poise_backend_ejections_total', { backend: victim }), round).toBe(1);
        expect(v(f, 'poise_backend_state', { backend: victim, state: 'ready' }), round).toBe(0);
      }
      b.close();
    }
  });

  it('an active check taking a backend down: state "unhealthy", health counters equal healthStats(), the transition counted', async () => {
    let up = true;
    const b = new Balancer({
      logger,
      health: { check: { kind: 'custom', intervalMs: 10, jitterPercent: 0, rise: 1, fall: 2, check: async (t) => t.id !== 'b1' || up } },
    });
    b.update(specs(2));
    const registry = new Registry();
    collectMetrics(b, { registry });
    up = false;
    await until(() => b.healthStats().counters.markedDown > 0, 'b1 marked down', 10_000);
    // The scrape reads its snapshot synchronously inside metrics(): healthStats() right after it sees the same counters.
    const text = registry.metrics();
    const h = b.healthStats().counters;
    const f = parseMetricsText(await text);
    b.close();
    expect(h.markedDown).toBe(1);
    expect(v(f, 'poise_backend_state', { backend: 'b1', state: 'unhealthy' })).toBe(1);
    expect(v(f, 'poise_backend_state', { backend: 'b0', state: 'ready' })).toBe(1);
    expect(v(f, 'poise_health_transitions_total', { to: 'down' })).toBe(1);
    expect(v(f, 'poise_health_checks_total', { result: 'passed' })).toBe(h.checksPassed);
    expect(v(f, 'poise_health_checks_total', { result: 'failed' })).toBe(h.checksFailed);
    expect(h.checksFailed).toBeGreaterThanOrEqual(2);
  });

  it('the docs/monitoring.md metric table lists exactly the metrics registered (with a source, a proxy, admission, HTTP and gRPC counters)', () => {
    const section = readFileSync(new URL('../../docs/monitoring.md', import.meta.url), 'utf8');
    const documented = [...section.matchAll(/^\| `(poise_[a-z_]+)` \|/gm)].map((m) => m[1]);
    const b = new Balancer({ logger });
    // A source that keeps a discovery status: the poise_discovery_* series are registered too.
    const source = {
      start: async () => {},
      close: async () => {},
      version: 0,
      description: 'dns:api.internal:80',
      status: newDiscoveryStatus('dns:api.internal:80'),
    };
    const admission: AdmissionStatsSource = { admissionStats: () => ({ bands: [] }) };
    const http = HttpCounters.create({ capacity: b.table.capacity });
    const grpc = GrpcCounters.create({ capacity: b.table.capacity });
    const c = collectMetrics(b, { registry: new Registry(), source, proxy: ProxyCounters.create(), admission, http, grpc });
    expect(documented.sort()).toEqual([...c.names].sort());
  });

  it('refuses bad options, naming them', () => {
    const b = new Balancer({ logger });
    expect(() => collectMetrics(b, { prefix: 'bad-prefix' })).toThrow('options.prefix: must match');
    expect(() => collectMetrics(b, { registry: {} as Registry })).toThrow('options.registry: must be a prom-client Registry');
    expect(() => collectMetrics(b, { cluster: '' })).toThrow('options.cluster: must be a non-empty string');
    expect(() => collectMetrics(b, { processMetrics: 'yes' as never })).toThrow('options.processMetrics: must be a boolean, got "yes"');
    expect(() => collectMetrics(b, { bogus: 1 } as never)).toThrow('bogus');
    expect(() => collectMetrics({} as Balancer)).toThrow('balancer: must be a Balancer');
    // A second collection on the same registry and prefix is prom-client's refusal.
    const registry = new Registry();
    collectMetrics(b, { registry });
    expect(() => collectMetrics(b, { registry })).toThrow('already been registered');
  });

  it('the cluster label is the membership\'s cluster, read at each scrape: "default" before one names it, then the last one named; a given option wins', async () => {
    const b = new Balancer({ logger });
    const registry = new Registry();
    collectMetrics(b, { registry });
    /** The set of cluster label values of one scrape (every sample that has one). */
    const clusters = async (r: Registry): Promise<string[]> => {
      const values = new Set<string>();
      for (const fam of (await families(r)).values())
        for (const x of fam.samples) if (x.labels['cluster'] !== undefined) values.add(x.labels['cluster']);
      return [...values];
    };
    expect(await clusters(registry)).toEqual(['default']);
    b.update({ version: 1, cluster: 'api', backends: specs(2) });
    expect(await clusters(registry)).toEqual(['api']);
    b.update({ version: 2, backends: specs(2) }); // a snapshot naming no cluster keeps the one in force
    expect(await clusters(registry)).toEqual(['api']);
    b.update({ version: 3, cluster: 'web', backends: specs(2) });
    expect(await clusters(registry)).toEqual(['web']);
    expect(b.cluster).toBe('web');
    const fixed = new Registry();
    collectMetrics(b, { registry: fixed, cluster: 'given' });
    expect(await clusters(fixed)).toEqual(['given']);
    // A refused snapshot changes nothing.
    expect(() => b.update({ version: 4, cluster: '' as string, backends: specs(2) })).toThrow(
      'membership.cluster: must be a string of 1 to 256 characters, got ""',
    );
    expect(b.cluster).toBe('web');
    b.close();
  });

  it("processMetrics adds prom-client's process and Node.js metrics under their standard names (and remove() takes them off); without it there are none", async () => {
    const b = new Balancer({ logger });
    const PROCESS = [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
    ];
    const off = new Registry();
    collectMetrics(b, { registry: off });
    const fOff = await families(off);
    for (const name of PROCESS) expect(fOff.has(name), name).toBe(false);
    expect([...fOff.keys()].every((n) => n.startsWith('poise_'))).toBe(true);

    const on = new Registry();
    const c = collectMetrics(b, { registry: on, processMetrics: true });
    const f = await families(on); // the whole scrape, prom-client's families included, parses strictly
    for (const name of PROCESS) {
      expect(f.has(name), name).toBe(true);
      expect(c.names).toContain(name);
    }
    expect(v(f, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    // A second collection (another prefix) on that registry leaves the process metrics registered once.
    const second = collectMetrics(b, { registry: on, prefix: 'other_', processMetrics: true });
    expect(second.names.filter((n) => !n.startsWith('other_'))).toEqual([]);
    c.remove();
    second.remove();
    expect(await on.metrics()).toBe('\n');
    b.close();
  });
});
