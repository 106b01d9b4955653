// Every accepted connection ends in exactly one counted outcome, and no
// client — however malformed its PROXY header, or whatever it does in any
// phase — takes a worker thread down. Real loopback sockets, worker threads
// from the build (dist/), so `npm run build` must have run.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { Balancer } from '../../../dist/src/runtime.js';
import { encodeProxyV1, encodeProxyV2, parseProxyHeader } from '../../../src/proxy/proxy-protocol.js';
import { TcpProxy, type ProxyCounters } from '../../../dist/src/net.js';
import { ProxyCounter } from '../../../dist/src/proxy/counters.js';
import { countingBackend, type CountingBackend } from '../../helpers/counting-backend.js';
import { captureLog } from '../../helpers/log-capture.js';
import { until } from '../../helpers/until.js';
import { leasesBack } from '../../helpers/leases.js';
import { endpoint, mutatedHeader, rawBytes, validHeader, zonedHeader } from '../../helpers/proxy-headers.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** The outcome counts of every row, summed. */
function ledger(c: ProxyCounters): { accepted: number; refused: number; closed: number; lost: number; open: number } {
  let refused = 0;
  let closed = 0;
  for (let w = 0; w < c.workers; w++) {
    refused += c.refusedCount(w);
    closed += c.closedCount(w);
  }
  return { accepted: c.total(ProxyCounter.Accepted), refused, closed, lost: c.total(ProxyCounter.WorkerLost), open: c.open() };
}

/** Checks the law on every row and returns the sums. */
function expectLaw(c: ProxyCounters): ReturnType<typeof ledger> {
  for (let w = 0; w < c.workers; w++) {
    const row = c.value(w, ProxyCounter.Accepted);
    expect(c.refusedCount(w) + c.closedCount(w) + c.value(w, ProxyCounter.WorkerLost) + c.open(w), `row ${w}`).toBe(row);
  }
  return ledger(c);
}

/**
 * An echo backend behind `--send-proxy`: it parses the header the proxy
 * sends with the strict parser (counting any it could not parse), then
 * echoes only the payload after it.
 */
async function proxiedEcho(): Promise<CountingBackend & { headers: number; badHeaders: number }> {
  const state = { headers: 0, badHeaders: 0 };
  const pending = new WeakMap<net.Socket, Buffer>();
  const b = await countingBackend((s, d) => {
    const got = pending.get(s);
    if (got === undefined) {
      s.write(d);
      return;
    }
    const buf = Buffer.concat([got, d]);
    try {
      const h = parseProxyHeader(buf, 536);
      if (h === undefined) {
        pending.set(s, buf);
        return;
      }
      state.headers++;
      pending.delete(s);
      if (buf.length > h.length) s.write(buf.subarray(h.length));
    } catch {
      state.badHeaders++;
      s.destroy();
    }
  });
  b.server.prependListener('connection', (s: net.Socket) => pending.set(s, Buffer.alloc(0)));
  cleanup.push(() => b.close());
  return Object.assign(b, state, {
    get headers() {
      return state.headers;
    },
    get badHeaders() {
      return state.badHeaders;
    },
  });
}

/** A plain echo backend (no PROXY header expected). */
async function echo(): Promise<CountingBackend> {
  const b = await countingBackend((s, d) => s.write(d));
  cleanup.push(() => b.close());
  return b;
}

async function proxyOver(backs: CountingBackend[], opts: Record<string, unknown>): Promise<{ proxy: TcpProxy; port: number }> {
  const bal = new Balancer({ logger: captureLog('silent').logger });
  bal.update(backs.map((b, i) => ({ id: `b${i}`, address: `127.0.0.1:${b.port}` })));
  const proxy = new TcpProxy({
    balancer: bal,
    policy: 'p2c:connections',
    logger: captureLog('silent').logger,
    clientTimeoutMs: 0,
    serverTimeoutMs: 0,
    ...opts,
  });
  const { port } = await proxy.listen();
  cleanup.push(async () => {
    await proxy.close();
    // Every lease back once the proxy has closed.
    expect(await leasesBack(bal as unknown as Parameters<typeof leasesBack>[0])).toBe(0);
    bal.close();
  });
  return { proxy, port };
}

/** Writes `bytes`, then ends (FIN) or resets; resolves when the socket has closed, whatever happened. */
function throwAt(port: number, bytes: Buffer, reset: boolean): Promise<void> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' }, () => {
      s.write(bytes, () => {
        if (reset) s.resetAndDestroy();
        else s.end();
      });
    });
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => resolve());
  });
}

/** A client that sends a valid header and `body`, half-closes and resolves with what came back. */
function legit(port: number, header: Buffer, body: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => s.end(Buffer.concat([header, body])));
    s.on('data', (d) => parts.push(d));
    s.on('end', () => {
      s.end();
      resolve(Buffer.concat(parts));
    });
    s.on('error', reject);
  });
}

const fuzzed = fc.tuple(fc.oneof(mutatedHeader(3), zonedHeader, rawBytes, validHeader), fc.uint8Array({ maxLength: 64 }));

/** Cases against the live proxy: bounded on every push, more under `npm run fuzz` (POISE_FUZZ_RUNS). */
const LIVE_RUNS = Math.max(200, Math.round(Number(process.env.POISE_FUZZ_RUNS ?? 4000) / 4));

describe.each(['v1', 'v2'] as const)('a live proxy with worker threads under fuzzed PROXY headers (--send-proxy %s)', (send) => {
  it(`${LIVE_RUNS} fuzzed clients and every 10th a legitimate one: no worker dies, each legitimate client is served byte-exact, every connection is accounted for`, async () => {
    const backs = [await proxiedEcho(), await proxiedEcho()];
    const { proxy, port } = await proxyOver(backs, { workers: 2, acceptProxy: true, sendProxy: send, acceptProxyTimeoutMs: 2000 });
    const cases = fc.sample(fuzzed, { numRuns: LIVE_RUNS, seed: send === 'v1' ? 101 : 202 });
    const good = fc.sample(fc.tuple(endpoint, endpoint), { numRuns: Math.ceil(LIVE_RUNS / 10), seed: 7 });
    let served = 0;
    let wrong = 0;
    let next = 0;
    const lane = async (): Promise<void> => {
      for (let k = next++; k < cases.length; k = next++) {
        const [header, payload] = cases[k]!;
        await throwAt(port, Buffer.concat([header, Buffer.from(payload)]), k % 3 === 0);
        if (k % 10 === 0) {
          const [src, dst] = good[k / 10]!;
          const body = randomBytes(512 + (k % 2048));
          const echo = await legit(port, send === 'v1' ? encodeProxyV1(src, dst) : encodeProxyV2(src, dst), body);
          if (echo.equals(body)) served++;
          else wrong++;
        }
      }
    };
    await Promise.all(Array.from({ length: 12 }, () => lane()));
    expect(proxy.restarts).toBe(0);
    expect(wrong).toBe(0);
    expect(served).toBe(good.length);
    // Every header a backend received parsed strictly (no zone text, no junk passed on verbatim).
    expect(backs.reduce((a, b) => a + b.badHeaders, 0)).toBe(0);
    // Drained: nothing open, nothing lost; every accepted connection refused or closed.
    await until(() => proxy.counters.open() === 0, 'every connection finished');
    const l = expectLaw(proxy.counters);
    expect(l.lost).toBe(0);
    expect(l.accepted).toBe(cases.length + good.length);
    expect(proxy.counters.active()).toBe(0);
  }, 180_000);
});

describe('an error thrown on one connection path closes that connection alone', () => {
  it('a throwing access log (in a socket close listener) and a throwing spliced listener (in the connect continuation): the thread lives, other clients are served, the law holds, one warning per message', async () => {
    const back = await echo();
    let n = 0;
    const accessLog = {
      info: () => {
        if (++n % 3 === 0) throw new Error('access log disk full');
      },
      isLevelEnabled: () => true,
    };
    const log = captureLog('warn');
    const bal = new Balancer({ logger: log.logger });
    bal.update([{ id: 'a', address: `127.0.0.1:${back.port}` }]);
    const proxy = new TcpProxy({
      balancer: bal,
      logger: log.logger,
      accessLog: accessLog as never,
      clientTimeoutMs: 0,
      serverTimeoutMs: 0,
    });
    const { port } = await proxy.listen();
    cleanup.push(async () => {
      await proxy.close();
      bal.close();
    });
    let spliced = 0;
    proxy.on('spliced', () => {
      if (++spliced % 4 === 0) throw new Error('listener bug');
    });
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown): void => void uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
    cleanup.push(() => {
      process.off('uncaughtException', onUncaught);
      process.off('unhandledRejection', onUncaught);
    });
    let ok = 0;
    let cut = 0;
    for (let i = 0; i < 120; i++) {
      const body = Buffer.from(`hello ${i}`);
      try {
        const echo = await legit(port, Buffer.alloc(0), body);
        if (echo.equals(body)) ok++;
        else cut++;
      } catch {
        cut++;
      }
    }
    await until(() => proxy.counters.open() === 0, 'every connection finished');
    expect(uncaught).toEqual([]);
    // Every 4th splice was closed by its throwing listener; the others echoed.
    expect(cut).toBe(30);
    expect(ok).toBe(90);
    const l = expectLaw(proxy.counters);
    expect(l.accepted).toBe(120);
    expect(l.closed).toBe(120);
    const lines = log.find('proxy: internal error on a connection; closing it');
    expect(lines.map((x) => x['err']).sort()).toEqual(['access log disk full', 'listener bug']);
    expect(await leasesBack(bal as unknown as Parameters<typeof leasesBack>[0])).toBe(0);
  });
});

describe.each([1, 2])('accepted = refused + closed + lost + open after each phase of a mixed run (workers: %i)', (workers) => {
  it('served, reset mid-header, bad header, header timeout, held then reset, held then served, a worker killed', async () => {
    const backs = [await echo(), await echo()];
    const { proxy, port } = await proxyOver(backs, { workers, acceptProxy: true, acceptProxyTimeoutMs: 300, maxConnections: 4 });
    const c = proxy.counters;
    const hdr = encodeProxyV1({ address: '10.1.2.3', port: 4000 }, { address: '127.0.0.1', port });
    // `accepted`: the clients this phase's callers finished with — a client
    // may finish (and reset) before the proxy's accept of it lands, so open
    // alone can read 0 while accepts are still arriving.
    const settle = async (open: number, what: string, accepted?: number): Promise<ReturnType<typeof ledger>> => {
      await until(() => c.open() === open && (accepted === undefined || ledger(c).accepted === accepted), what);
      return expectLaw(c);
    };
    // 1. 20 served.
    for (let i = 0; i < 20; i++) expect(String(await legit(port, hdr, Buffer.from(`s${i}`)))).toBe(`s${i}`);
    let l = await settle(0, 'served');
    expect(l).toEqual({ accepted: 20, refused: 0, closed: 20, lost: 0, open: 0 });
    // 2. 100 reset in the middle of their header (counted nowhere before).
    await Promise.all(Array.from({ length: 100 }, () => throwAt(port, Buffer.from('PROXY TCP4 10.1.'), true)));
    l = await settle(0, 'reset mid-header', 120);
    expect(l).toMatchObject({ accepted: 120, refused: 100, closed: 20 });
    expect(c.refusals('client_abort')).toBe(100);
    // 3. 10 malformed headers.
    await Promise.all(Array.from({ length: 10 }, () => throwAt(port, Buffer.from('PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n'), false)));
    l = await settle(0, 'bad headers', 130);
    expect(c.refusals('bad_header')).toBe(10);
    // 4. 5 that never finish their header: closed by the proxy at its header timeout.
    const late = Array.from({ length: 5 }, () => {
      const s = net.connect({ port, host: '127.0.0.1' }, () => s.write('PROXY TCP4 '));
      s.on('error', () => {});
      return new Promise<void>((r) => s.on('close', () => r()));
    });
    await Promise.all(late);
    l = await settle(0, 'header timeouts', 135);
    expect(c.refusals('timeout')).toBe(5);
    // 5. 4 long-lived connections fill --max-connections 4; 30 more are held, then reset while held.
    const holders = Array.from({ length: 4 }, () => {
      const s = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => s.write(Buffer.concat([hdr, Buffer.from('hold')])));
      s.on('error', () => {});
      return new Promise<net.Socket>((r) => s.once('data', () => r(s)));
    });
    const held = await Promise.all(holders);
    l = await settle(4, 'holders spliced');
    expect(proxy.counters.active()).toBe(4);
    const waiting = Array.from({ length: 30 }, () => {
      const s = net.connect({ port, host: '127.0.0.1' });
      s.on('error', () => {});
      return new Promise<net.Socket>((r) => s.on('connect', () => r(s)));
    });
    const waiters = await Promise.all(waiting);
    await until(() => c.open() === 34, 'held clients accepted');
    // A held client is not read (that is what holding means), so its reset is
    // seen only when a slot serves it: until then it is open, and counted.
    for (const s of waiters) s.resetAndDestroy();
    l = expectLaw(c);
    expect(l.open).toBe(34);
    // 6. 6 more are held behind them; when the holders leave, the 30 reset ones
    //    are served first (FIFO) and end as client aborts, then the 6 in order.
    const queued = Array.from({ length: 6 }, (_, i) => legit(port, hdr, Buffer.from(`q${i}`)));
    await until(() => c.open() === 40, 'queued clients accepted');
    for (const s of held) s.end();
    expect((await Promise.all(queued)).map(String)).toEqual(['q0', 'q1', 'q2', 'q3', 'q4', 'q5']);
    l = await settle(0, 'held served', 20 + 100 + 10 + 5 + 4 + 30 + 6);
    expect(c.refusals('client_abort')).toBe(130);
    expect(l).toEqual({ accepted: 20 + 100 + 10 + 5 + 4 + 30 + 6, refused: 145, closed: 30, lost: 0, open: 0 });
    // 7. A worker thread killed while it holds 3 open connections: they count as lost, exactly.
    const pool = (proxy as unknown as { pool: { worker(i: number): { terminate(): Promise<number> } | undefined } }).pool;
    const hanging = Array.from({ length: 3 }, () => {
      const s = net.connect({ port, host: '127.0.0.1' }, () => s.write('PROXY TCP4 1'));
      s.on('error', () => {});
      return s;
    });
    await until(() => c.open() === 3, 'three in their header');
    const before = c.total(ProxyCounter.WorkerLost);
    for (let i = 0; i < proxy.threads; i++) await pool.worker(i)!.terminate();
    await until(() => proxy.restarts === proxy.threads, 'restarted');
    for (const s of hanging) s.destroy();
    l = expectLaw(c);
    expect(l.lost - before).toBe(3);
    expect(l.open).toBe(0);
  }, 120_000);
});
