// Admission where traffic enters: client-CIDR → band maps, TcpProxy per-band
// listeners over real sockets with a gate on the router, connect() with an
// admission band. The `poise proxy --band` flags: test/integration/cli/proxy-bands.test.ts.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import { createLogger } from '../../src/log.js';
import { connect } from '../../src/outbound/connect.js';
import { CidrBands, fixedBand } from '../../src/proxy/admission.js';
import { encodeProxyV1 } from '../../src/proxy/proxy-protocol.js';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { fileEchoServer } from '../helpers/echo-server.js';
import { destroyed, helloClient } from '../helpers/loopback.js';
import { thrown } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';

const silent = createLogger({ level: 'silent' });
/** The backend: answers `echo:` and what it read; `backend.sockets` are the connections it holds now. */
const backend = fileEchoServer('echo');

describe('CidrBands', () => {
  const bands = [
    { name: 'web', rank: 10 },
    { name: 'bulk', rank: 5 },
    { name: 'batch', rank: 1 },
  ];
  it('the longest matching prefix wins, IPv4 and IPv6; unmatched and unknown clients get the default band', () => {
    const map = new CidrBands({
      bands,
      cidrs: [
        { cidr: '10.0.0.0/8', band: 'bulk' },
        { cidr: '10.8.0.0/16', band: 'batch' },
        { cidr: '10.8.1.0/24', band: 'web' },
        { cidr: 'fd00::/8', band: 'batch' },
      ],
    });
    expect(['10.1.2.3', '10.8.2.3', '10.8.1.9', 'fd12::1', '192.168.0.1', 'not-an-ip', undefined].map((a) => map.bandOf(a))).toEqual([
      5, 1, 10, 1, 10, 10, 10,
    ]);
    expect(new CidrBands({ bands, cidrs: [], defaultBand: 'batch' }).bandOf('1.2.3.4')).toBe(1);
  });

  it('names every bad band, CIDR and default at once', () => {
    const err = thrown(
      () =>
        new CidrBands({
          bands: [...bands, { name: 'web', rank: 3 }],
          cidrs: [
            { cidr: '10.0.0.0/33', band: 'bulk' },
            { cidr: '10.0.0.0/8', band: 'nope' },
          ],
          defaultBand: 'other',
        }),
    );
    expect(err.code).toBe('InvalidConfig');
    for (const f of ['options.bands[3].name', 'options.cidrs[0].cidr', 'options.cidrs[1].band', 'options.defaultBand'])
      expect(err.message).toContain(f);
    // A band is { name, rank }: the pre-1.0 { name, priority } is refused naming the rank.
    expect(thrown(() => new CidrBands({ bands: [{ name: 'web', priority: 10 } as never], cidrs: [] })).message).toBe(
      'options.bands[0].rank: must be a finite number',
    );
  });
});

describe('admission where connections enter', () => {
  it('per-band listeners: batch clients wait while the pool is above their ceiling, web clients pass; a close admits the waiter', async () => {
    // One backend, maxInflight 4 connections; ceilings 1 / 0.5 → web admitted while < 4, batch while <= 2 (load < 3).
    const b = new Balancer({ capacity: 8, logger: silent });
    b.update([{ id: 'a', address: `127.0.0.1:${backend.port}`, maxInflight: 4 }]);
    const router = b.router({ policy: 'p2c:connections', logger: silent });
    const gate = new AdmissionGate(router, { bands: [10, 1], minCeiling: 0.5, kind: 'connection' });
    const web = new TcpProxy({ router, admission: fixedBand(10), logger: silent });
    const batch = new TcpProxy({ router, admission: fixedBand(1), logger: silent });
    const [wp, bp] = [(await web.listen()).port, (await batch.listen()).port];
    try {
      const batched = [helloClient(bp), helloClient(bp), helloClient(bp)];
      await Promise.all(batched.map((c) => c.echoed));
      const waiting = helloClient(bp);
      await until(() => gate.admissionStats().bands[1]!.queued === 1, 'the fourth batch client queued');
      expect(gate.admissionStats().bands.map((x) => x.queued)).toEqual([0, 1]);
      expect(backend.sockets.size).toBe(3); // the waiting client has no backend connection yet
      const w = helloClient(wp);
      await w.echoed; // load 3 < 4
      expect(backend.sockets.size).toBe(4);
      await destroyed(w.socket); // 3: batch still held (3 > 2)
      // The release serves the queue in a microtask: once the lease is back, the gate has decided.
      await until(() => b.table.stats(0).connections === 3, "the web client's lease back");
      expect(gate.admissionStats().bands[1]!.queued).toBe(1);
      await destroyed(batched[0]!.socket); // 2: the waiter goes
      await waiting.echoed;
      expect(gate.admissionStats().bands.map((x) => x.admitted)).toEqual([1, 4]);
      for (const c of [...batched, waiting]) await destroyed(c.socket);
    } finally {
      await Promise.all([web.close(), batch.close()]);
      gate.close();
      b.close();
    }
  });

  it("a CIDR map bands each client by its address — the PROXY header's source when accepted", async () => {
    const b = new Balancer({ capacity: 8, logger: silent });
    b.update([{ id: 'a', address: `127.0.0.1:${backend.port}`, maxInflight: 8 }]);
    const router = b.router({ policy: 'p2c:connections', logger: silent });
    const gate = new AdmissionGate(router, { bands: [10, 1], minCeiling: 0.5, kind: 'connection' });
    const bands = new CidrBands({
      bands: [
        { name: 'web', rank: 10 },
        { name: 'batch', rank: 1 },
      ],
      cidrs: [{ cidr: '10.8.0.0/16', band: 'batch' }],
    });
    const proxy = new TcpProxy({ router, admission: bands, acceptProxy: true, logger: silent });
    const port = (await proxy.listen()).port;
    try {
      const via = (source: string): Promise<net.Socket> =>
        new Promise((resolve, reject) => {
          const s = net.connect({ host: '127.0.0.1', port }, () => {
            s.write(encodeProxyV1({ address: source, port: 40000 }, { address: '127.0.0.1', port }));
            s.write('hello');
          });
          s.once('data', (d) => (d.toString() === 'echo:hello' ? resolve(s) : reject(new Error(d.toString()))));
          s.once('error', reject);
        });
      const sockets = [await via('10.8.1.1'), await via('10.8.200.3'), await via('192.168.1.1'), await via('10.9.0.1')];
      expect(gate.admissionStats().bands.map((x) => [x.band, x.admitted])).toEqual([
        [10, 2],
        [1, 2],
      ]);
      for (const s of sockets) await destroyed(s);
    } finally {
      await proxy.close();
      gate.close();
      b.close();
    }
  });

  it('connect(router, { band }) queues the first attempt and rejects with QueueTimeout, leaving no lease', async () => {
    const b = new Balancer({ capacity: 8, logger: silent });
    b.update([{ id: 'a', address: `127.0.0.1:${backend.port}`, maxInflight: 1 }]);
    const router = b.router({ policy: 'p2c:connections', logger: silent });
    new AdmissionGate(router, { bands: [1, 0], minCeiling: 0 });
    const first = await connect(router, { band: 0 });
    await expect(connect(router, { band: 1, admissionTimeoutMs: 20 })).rejects.toMatchObject({ code: 'QueueTimeout' });
    first.socket.destroy();
    await until(() => b.table.stats(0).connections === 0, "the first connection's lease back");
    const again = await connect(router, { band: 1 });
    again.socket.destroy();
    await expect(connect(b.router(), { band: 1 })).rejects.toMatchObject({ code: 'InvalidConfig' });
    // A wait limit without a band: nothing would wait, so it is refused, naming both options.
    await expect(connect(router, { admissionTimeoutMs: 20 })).rejects.toThrow(/options\.admissionTimeoutMs: needs options\.band/);
    b.close();
  });
});
