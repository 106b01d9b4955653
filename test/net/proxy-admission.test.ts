// Admission where traffic enters: client-CIDR → band maps, TcpProxy per-band
// listeners over real sockets with a gate on the router, connect() with an
// admission priority, and the `poise proxy --band` flags.
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdmissionGate } from '../../src/admission/admission.js';
import { createLogger } from '../../src/log.js';
import { connect } from '../../src/net/connect.js';
import { CidrBands, fixedBand } from '../../src/net/proxy-admission.js';
import { encodeProxyV1 } from '../../src/net/proxy-protocol.js';
import { TcpProxy } from '../../src/net/proxy.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { CLI } from '../helpers/cli.js';
import { startProxy } from '../helpers/proxy-process.js';
import { freePort } from '../helpers/ports.js';
import { thrown } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';

const silent = createLogger({ level: 'silent' });
let backend: net.Server;
let backendPort: number;
/** Sockets the backend holds open now. */
const live = new Set<net.Socket>();

beforeAll(async () => {
  backend = net.createServer((s) => {
    live.add(s);
    s.on('close', () => live.delete(s));
    s.on('data', (d) => s.write(`echo:${d.toString()}`));
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendPort = (backend.address() as net.AddressInfo).port;
});
afterAll(async () => {
  for (const s of live) s.destroy();
  await new Promise<void>((r) => backend.close(() => r()));
});

/** A client through `port`: resolves once the backend echoed `hello` (it was admitted and spliced). */
function client(port: number): { echoed: Promise<void>; socket: net.Socket } {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.write('hello');
  const echoed = new Promise<void>((resolve, reject) => {
    socket.once('data', (d) => (d.toString() === 'echo:hello' ? resolve() : reject(new Error(d.toString()))));
    socket.once('error', reject);
  });
  return { echoed, socket };
}

const closed = (s: net.Socket): Promise<void> => new Promise((r) => (s.destroyed ? r() : (s.once('close', () => r()), s.destroy())));

describe('CidrBands', () => {
  const bands = [
    { name: 'web', priority: 10 },
    { name: 'bulk', priority: 5 },
    { name: 'batch', priority: 1 },
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
          bands: [...bands, { name: 'web', priority: 3 }],
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
  });
});

describe('admission where connections enter', () => {
  it('per-band listeners: batch clients wait while the pool is above their ceiling, web clients pass; a close admits the waiter', async () => {
    // One backend, maxInflight 4 connections; ceilings 1 / 0.5 → web admitted while < 4, batch while <= 2 (load < 3).
    const b = new Balancer({ capacity: 8, logger: silent });
    b.update([{ id: 'a', address: `127.0.0.1:${backendPort}`, maxInflight: 4 }]);
    const router = b.router({ policy: 'p2c:connections', logger: silent });
    const gate = new AdmissionGate(router, { priorities: [10, 1], minCeiling: 0.5, kind: 'connection' });
    const web = new TcpProxy({ router, admission: fixedBand(10), logger: silent });
    const batch = new TcpProxy({ router, admission: fixedBand(1), logger: silent });
    const [wp, bp] = [(await web.listen()).port, (await batch.listen()).port];
    try {
      const batched = [client(bp), client(bp), client(bp)];
      await Promise.all(batched.map((c) => c.echoed));
      const waiting = client(bp);
      await until(() => gate.admissionStats().bands[1]!.queued === 1, 'the fourth batch client queued');
      expect(gate.admissionStats().bands.map((x) => x.queued)).toEqual([0, 1]);
      expect(live.size).toBe(3); // the waiting client has no backend connection yet
      const w = client(wp);
      await w.echoed; // load 3 < 4
      expect(live.size).toBe(4);
      await closed(w.socket); // 3: batch still held (3 > 2)
      // The release serves the queue in a microtask: once the lease is back, the gate has decided.
      await until(() => b.table.stats(0).connections === 3, "the web client's lease back");
      expect(gate.admissionStats().bands[1]!.queued).toBe(1);
      await closed(batched[0]!.socket); // 2: the waiter goes
      await waiting.echoed;
      expect(gate.admissionStats().bands.map((x) => x.admitted)).toEqual([1, 4]);
      for (const c of [...batched, waiting]) await closed(c.socket);
    } finally {
      await Promise.all([web.close(), batch.close()]);
      gate.close();
      b.close();
    }
  });

  it("a CIDR map bands each client by its address — the PROXY header's source when accepted", async () => {
    const b = new Balancer({ capacity: 8, logger: silent });
    b.update([{ id: 'a', address: `127.0.0.1:${backendPort}`, maxInflight: 8 }]);
    const router = b.router({ policy: 'p2c:connections', logger: silent });
    const gate = new AdmissionGate(router, { priorities: [10, 1], minCeiling: 0.5, kind: 'connection' });
    const bands = new CidrBands({
      bands: [
        { name: 'web', priority: 10 },
        { name: 'batch', priority: 1 },
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
      expect(gate.admissionStats().bands.map((x) => [x.priority, x.admitted])).toEqual([
        [10, 2],
        [1, 2],
      ]);
      for (const s of sockets) await closed(s);
    } finally {
      await proxy.close();
      gate.close();
      b.close();
    }
  });

  it('connect(router, { admissionPriority }) queues the first attempt and rejects with QueueTimeout, leaving no lease', async () => {
    const b = new Balancer({ capacity: 8, logger: silent });
    b.update([{ id: 'a', address: `127.0.0.1:${backendPort}`, maxInflight: 1 }]);
    const router = b.router({ policy: 'p2c:connections', logger: silent });
    new AdmissionGate(router, { priorities: [1, 0], minCeiling: 0 });
    const first = await connect(router, { admissionPriority: 0 });
    await expect(connect(router, { admissionPriority: 1, admissionTimeoutMs: 20 })).rejects.toMatchObject({ code: 'QueueTimeout' });
    first.socket.destroy();
    await until(() => b.table.stats(0).connections === 0, "the first connection's lease back");
    const again = await connect(router, { admissionPriority: 1 });
    again.socket.destroy();
    await expect(connect(b.router(), { admissionPriority: 1 })).rejects.toMatchObject({ code: 'InvalidConfig' });
    // A wait limit without a band: nothing would wait, so it is refused, naming both options.
    await expect(connect(router, { admissionTimeoutMs: 20 })).rejects.toThrow(
      /options\.admissionTimeoutMs: needs options\.admissionPriority/,
    );
    b.close();
  });
});

describe('poise proxy --band', () => {
  function usage(args: string[]): { status: number | null; stderr: string } {
    const r = spawnSync(process.execPath, [CLI, 'proxy', '--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', ...args], {
      encoding: 'utf8',
    });
    return { status: r.status, stderr: r.stderr };
  }

  it('names every bad admission flag at once (exit 2)', () => {
    const r = usage([
      '--band',
      'web=10',
      '--band',
      'web=3',
      '--band',
      'x=1:nowhere',
      '--band-cidr',
      '10.0.0.0/40=web',
      '--admission-ceiling-max',
      '2',
      '--admission-timeout',
      '0',
    ]);
    expect(r.status).toBe(2);
    for (const f of [
      '--band #2',
      '--band #3',
      '--band-cidr #1',
      '--admission-ceiling-max',
      '--admission-timeout',
      '--admission-ceiling-min: required',
    ])
      expect(r.stderr).toContain(f);
    const lone = usage(['--admission-ceiling-min', '0.5']);
    expect(lone.status).toBe(2);
    expect(lone.stderr).toContain('--admission-ceiling-min: needs --band');
  });

  it('a band listener of its own: the second batch client waits for admission while a --listen client passes', async () => {
    const [main, low, metrics] = [await freePort(), await freePort(), await freePort()];
    const p = startProxy([
      '--listen',
      `127.0.0.1:${main}`,
      '--backend',
      `a=127.0.0.1:${backendPort}`,
      '--policy',
      'p2c:connections',
      '--band',
      'web=10',
      '--band',
      `batch=1:127.0.0.1:${low}`,
      '--admission-ceiling-min',
      '0',
      '--admission-capacity',
      '2',
      '--log-level',
      'info',
      '--metrics',
      `127.0.0.1:${metrics}`,
    ]);
    try {
      await p.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
      expect(p.find('admission bands ready')[0]).toMatchObject({ capacity: 2 });
      const before = live.size;
      const first = client(low);
      await first.echoed; // idle pool: even a ceiling of 0 flows
      const second = client(low);
      const queued = async (): Promise<number | undefined> => {
        const f = parseMetricsText(await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text());
        return f.get('poise_admission_queue_length')?.samples.find((x) => x.labels['band'] === '1')?.value;
      };
      await until(async () => (await queued()) === 1, 'the second batch client queued', 15_000, 50);
      expect(live.size).toBe(before + 1); // held: 1 / 2 > 0
      const w = client(main);
      await w.echoed; // web: 1 < 2
      await closed(w.socket);
      await closed(first.socket); // 0: the batch waiter goes
      await second.echoed;
      await closed(second.socket);
      expect(await p.stop()).toBe(0);
    } finally {
      p.kill();
    }
  });

  it('with --workers 2: every worker thread of --listen and of the band listener gates; /metrics sums admitted per band over them', async () => {
    const [main, low, metrics] = [await freePort(), await freePort(), await freePort()];
    const p = startProxy([
      '--listen',
      `127.0.0.1:${main}`,
      '--backend',
      `a=127.0.0.1:${backendPort}`,
      '--workers',
      '2',
      '--band',
      'web=10',
      '--band',
      `batch=1:127.0.0.1:${low}`,
      '--admission-ceiling-min',
      '0.5',
      '--admission-capacity',
      '1000',
      '--metrics',
      `127.0.0.1:${metrics}`,
    ]);
    try {
      await p.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
      expect(p.find('admission bands ready')[0]).toMatchObject({ capacity: 1000 });
      expect(p.find('--workers is not used')).toHaveLength(0);
      // 30 clients on each listener, each echoed (admitted), then closed.
      for (const port of [main, low]) {
        const cs = Array.from({ length: 30 }, () => client(port));
        await Promise.all(cs.map((c) => c.echoed));
        for (const c of cs) await closed(c.socket);
      }
      const text = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text();
      const f = parseMetricsText(text);
      const admitted = (band: string) => f.get('poise_admission_admitted_total')?.samples.find((x) => x.labels['band'] === band)?.value;
      expect(admitted('10')).toBe(30);
      expect(admitted('1')).toBe(30);
      // The proxy counters: --listen's two workers in rows 0 and 1, the band listener's in rows 2 and 3.
      const rows = f.get('poise_proxy_accepted_total')!.samples;
      const row = (w: string) => rows.find((x) => x.labels['worker'] === w)?.value ?? 0;
      expect(row('0') + row('1')).toBe(30);
      expect(row('2') + row('3')).toBe(30);
      expect(await p.stop()).toBe(0);
    } finally {
      p.kill();
    }
  });
});
