/**
 * Admission figures in the metrics of a proxy with an AdmissionGate: a
 * client refused because its band's queue is full counts as
 * reason="max_connections", and the admission_* series equal the gate's own
 * admissionStats() at the moment of the scrape.
 */
import net from 'node:net';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import { createLogger } from '../../src/log.js';
import { collectMetrics } from '../../src/metrics/collect.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';
import { fixedBand } from '../../src/proxy/admission.js';
import { ProxyCounters } from '../../src/proxy/counters.js';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });

describe('admission metrics of a proxy', () => {
  it('band 1 at its ceiling: one client queued, the next refused QueueFull = max_connections; admission_* equal admissionStats()', async () => {
    const socks = new Set<net.Socket>();
    const backend = net.createServer((s) => {
      socks.add(s);
      s.on('data', (d) => s.write(d));
      s.on('error', () => {});
      s.on('close', () => socks.delete(s));
    });
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    const b = new Balancer({ logger });
    b.update([{ id: 'a', address: `127.0.0.1:${(backend.address() as net.AddressInfo).port}`, maxInflight: 2 }]);
    const router = b.router({ policy: 'p2c:connections', logger });
    const gate = new AdmissionGate(router, { bands: [10, 1], minCeiling: 0.5, kind: 'connection', maxQueue: 1, timeoutMs: 30_000 });
    const counters = ProxyCounters.create();
    const proxy = new TcpProxy({ router, admission: fixedBand(1), counters, logger });
    const { port } = await proxy.listen();
    const registry = new Registry();
    collectMetrics(b, { registry, proxy: counters, admission: gate });
    const clients: net.Socket[] = [];
    const open = (): net.Socket => {
      const c = net.connect(port, '127.0.0.1');
      c.on('error', () => {});
      clients.push(c);
      return c;
    };
    try {
      // Fill band 1 up to its ceiling, then one more waits and one more is refused.
      let admitted = 0;
      while (gate.admissionStats().bands[1]!.queued === 0 && admitted < 4) {
        open();
        await until(() => socks.size > admitted || gate.admissionStats().bands[1]!.queued > 0, 'admitted or queued');
        if (socks.size > admitted) admitted++;
      }
      expect(gate.admissionStats().bands[1]!.queued).toBe(1);
      const refused = open();
      await new Promise((r) => refused.once('close', r));
      const text = registry.metrics();
      const stats = gate.admissionStats();
      const f = parseMetricsText(await text);
      const val = (name: string, labels: Record<string, string> = {}) =>
        f.get(name)?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
      expect(stats.bands[1]!.rejected.QueueFull).toBe(1);
      expect(val('poise_proxy_refused_total', { reason: 'max_connections' })).toBe(1);
      expect(val('poise_proxy_refused_total', { reason: 'no_backend' })).toBe(0);
      for (const band of stats.bands) {
        const l = { band: String(band.band) };
        expect(val('poise_admission_queue_length', l)).toBe(band.queued);
        expect(val('poise_admission_admitted_total', l)).toBe(band.admitted);
        expect(val('poise_admission_rejected_total', { ...l, reason: 'queue_full' })).toBe(band.rejected.QueueFull);
        expect(val('poise_admission_oldest_wait_seconds', l)).toBeGreaterThanOrEqual(0);
      }
      expect(val('poise_admission_queue_length', { band: '1' })).toBe(1);
      expect(val('poise_admission_oldest_wait_seconds', { band: '1' })).toBeGreaterThan(0);
      expect(val('poise_admission_saturation_ratio')).toBe(stats.saturation);
      expect(val('poise_proxy_accepted_total', { worker: '0' })).toBe(admitted + 2);
    } finally {
      for (const c of clients) c.destroy();
      await proxy.close();
      gate.close();
      b.close();
      for (const s of socks) s.destroy();
      await new Promise((r) => backend.close(r));
    }
  });
});
