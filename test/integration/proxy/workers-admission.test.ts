// Admission bands with proxy worker threads: each worker gates with its own
// AdmissionGate over its own Router; saturation is the pool's (the shared
// table's totals), queues are per worker; the figures are summed over the
// workers. Real sockets; clients are banded by their loopback source address
// (127.0.0.1 / .2 / .3) through a CidrBands map. Runs the compiled build.
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Balancer } from '../../../dist/src/runtime.js';
import { CidrBands, reusePortSupported, TcpProxy } from '../../../dist/src/net.js';
import { captureLog } from '../../helpers/log-capture.js';
import { thrown } from '../../helpers/thrown.js';

const MULTI = reusePortSupported();
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

const BANDS = [
  { name: 'web', rank: 10 },
  { name: 'api', rank: 5 },
  { name: 'batch', rank: 1 },
];
const SOURCE: Record<number, string> = { 10: '127.0.0.1', 5: '127.0.0.2', 1: '127.0.0.3' };

/** A backend that answers `ok` after `holdMs` and then closes. */
async function slowBackend(holdMs: number): Promise<net.Server> {
  const s = net.createServer((c) => {
    c.on('error', () => {});
    c.once('data', () => setTimeout(() => c.end('ok'), holdMs));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  cleanup.push(() => new Promise<void>((r) => s.close(() => r())));
  return s;
}

/** One client from `source`: 'ok' when admitted and answered, 'refused' when the proxy closed it unanswered. */
function offer(port: number, source: string): Promise<'ok' | 'refused'> {
  return new Promise((resolve) => {
    let got = '';
    const s = net.connect({ port, host: '127.0.0.1', localAddress: source }, () => s.write('hi'));
    s.on('data', (d) => (got += d.toString()));
    s.on('error', () => {});
    s.on('close', () => resolve(got === 'ok' ? 'ok' : 'refused'));
  });
}

describe('TcpProxy workers with admission bands', () => {
  it('a 3-band overload over 2 workers: per band, admitted + rejected = offered, summed over the threads', async () => {
    const backend = await slowBackend(150);
    const bal = new Balancer({ logger: captureLog('silent').logger });
    bal.update([{ id: 'a', address: `127.0.0.1:${(backend.address() as net.AddressInfo).port}` }]);
    cleanup.push(() => bal.close());
    const log = captureLog('info');
    const proxy = new TcpProxy({
      balancer: bal,
      policy: 'p2c:connections',
      workers: 2,
      logger: log.logger,
      admission: new CidrBands({
        bands: BANDS,
        cidrs: BANDS.map((b) => ({ cidr: `${SOURCE[b.rank]}/32`, band: b.name })),
      }),
      admissionGate: {
        bands: BANDS.map((b) => b.rank),
        minCeiling: 0.25,
        capacity: 8,
        kind: 'connection',
        maxQueue: 3,
        timeoutMs: 400,
      },
    });
    const { port } = await proxy.listen();
    cleanup.push(async () => void (await proxy.close()));
    expect(proxy.threads).toBe(MULTI ? 2 : 1);
    // 40 clients per band at once, interleaved; each admitted one holds a connection for 150 ms.
    const offered = 40;
    const outcomes = await Promise.all(
      Array.from({ length: offered * 3 }, (_, i) => {
        const band = BANDS[i % 3]!.rank;
        return offer(port, SOURCE[band]!).then((o) => ({ band, o }));
      }),
    );
    const { admission, admissionThreads, total } = await proxy.collectStats();
    expect(admission).toBeDefined();
    expect(admissionThreads).toHaveLength(proxy.threads);
    expect(total.accepted).toBe(offered * 3);
    for (const band of admission!.bands) {
      const rejected = Object.values(band.rejected).reduce((a, b) => a + b, 0);
      // The law, per band, over every worker's gate.
      expect(band.admitted + rejected, `band ${band.band}`).toBe(offered);
      // And what the clients saw: the admitted got their answer, the rejected none.
      const mine = outcomes.filter((x) => x.band === band.band);
      expect(mine.filter((x) => x.o === 'ok')).toHaveLength(band.admitted);
      expect(mine.filter((x) => x.o === 'refused')).toHaveLength(rejected);
      expect(band.queued).toBe(0);
      // The sum is the sum of the threads' own figures.
      const per = admissionThreads!.map((t) => t!.bands.find((b) => b.band === band.band)!);
      expect(per.reduce((a, b) => a + b.admitted, 0)).toBe(band.admitted);
    }
    // It was an overload: the lowest band lost some, and more than the highest.
    const [web, , batch] = admission!.bands;
    const lost = (b: typeof web) => Object.values(b!.rejected).reduce((a, x) => a + x, 0);
    expect(lost(batch)).toBeGreaterThan(0);
    expect(lost(batch)).toBeGreaterThanOrEqual(lost(web));
    const fallback = log.find('one thread accepts');
    const figures = (bands: NonNullable<typeof admission>['bands']) =>
      bands.map((b) => [b.band, b.admitted, b.admittedAfterWait, b.rejected, b.queued]);
    if (MULTI) {
      // Two threads accept: each gated some of the clients, and nothing fell back.
      for (const t of admissionThreads!) expect(t!.bands.reduce((a, b) => a + b.admitted, 0)).toBeGreaterThan(0);
      expect(fallback).toHaveLength(0);
    } else {
      // Node < 22.12: workers 2 falls back to one accepting thread, said once with this Node and the requirement;
      // that thread's gate saw every client, so its figures are the totals.
      expect(fallback).toHaveLength(1);
      expect(fallback[0]!['msg']).toBe(
        `proxy: one thread accepts: workers 2 needs Node >= 22.12 on Linux (reusePort); this is Node ${process.version} on ${process.platform}`,
      );
      expect(figures(admissionThreads![0]!.bands)).toEqual(figures(admission!.bands));
      expect(admission!.bands.reduce((a, b) => a + b.admitted, 0)).toBeGreaterThan(0);
    }
  }, 60_000);

  it('refuses a custom selector, a selector without admissionGate, and bad gate options naming the field', () => {
    const bal = new Balancer();
    cleanup.push(() => bal.close());
    const gate = { bands: [10, 1], minCeiling: 0.5 };
    const bands = new CidrBands({ bands: [{ name: 'w', rank: 10 }], cidrs: [] });
    expect(
      thrown(() => new TcpProxy({ balancer: bal, workers: 1, admission: { bandOf: () => 1 }, admissionGate: gate })).message,
    ).toContain('options.admission: must be fixedBand(rank) or a CidrBands with options.workers > 0');
    expect(thrown(() => new TcpProxy({ balancer: bal, workers: 1, admission: bands })).message).toContain(
      'options.admissionGate: with options.workers > 0, give options.admission and options.admissionGate together',
    );
    const bad = thrown(
      () => new TcpProxy({ balancer: bal, workers: 1, admission: bands, admissionGate: { bands: [10, 1], minCeiling: 2 } }),
    );
    expect(bad.code).toBe('InvalidConfig');
    expect(bad.message).toContain('options.admissionGate.minCeiling');
    expect(thrown(() => new TcpProxy({ balancer: bal, admission: bands, admissionGate: gate })).message).toContain(
      'options.admissionGate: applies only with options.workers > 0',
    );
  });
});
