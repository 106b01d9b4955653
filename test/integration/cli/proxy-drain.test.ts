// `poise proxy` as a child process (the compiled CLI): --workers, the
// SIGTERM/SIGINT drain with --grace, and --max-connections, over real
// loopback sockets.
import net from 'node:net';
import os from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { reusePortSupported } from '../../../src/proxy/workers.js';
import { countingBackend, type CountingBackend } from '../../helpers/counting-backend.js';
import { freePort } from '../../helpers/ports.js';
import { refused, startProxy, type ProxyProcess } from '../../helpers/proxy-process.js';
import { until } from '../../helpers/until.js';

const MULTI = reusePortSupported();
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

interface Backend extends CountingBackend {
  /** Requests received. */
  requests: number;
}

/** Replies `reply:<request>` after `delayMs`; counts requests and its peak of open connections. */
async function backend(delayMs: number): Promise<Backend> {
  const b = (await countingBackend((s, d) => {
    b.requests++;
    setTimeout(() => s.writable && s.write(`reply:${d.toString()}`), delayMs);
  })) as Backend;
  b.requests = 0;
  cleanup.push(() => b.close());
  return b;
}

async function proxy(args: string[]): Promise<{ p: ProxyProcess; port: number }> {
  const port = await freePort();
  const p = startProxy(['--listen', `127.0.0.1:${port}`, ...args]);
  cleanup.push(() => p.kill());
  await p.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
  return { p, port };
}

function client(port: number): { socket: net.Socket; data: () => string; closed: Promise<void> } {
  let text = '';
  const socket = net.connect({ port, host: '127.0.0.1' });
  socket.setEncoding('utf8').on('data', (d: string) => (text += d));
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  cleanup.push(() => void socket.destroy());
  return { socket, data: () => text, closed };
}

function exited(p: ProxyProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (p.child.exitCode !== null) resolve(p.child.exitCode);
    else p.child.once('exit', (code) => resolve(code));
  });
}

describe('poise proxy --workers', () => {
  it('--workers 2: two reusePort threads on Node >= 22.12, else one thread and exactly one line naming this Node and the requirement', async () => {
    const b = await backend(0);
    const { p } = await proxy(['--backend', `a=127.0.0.1:${b.port}`, '--workers', '2']);
    const ready = p.find('proxy ready');
    const fallback = p.find('one thread accepts');
    if (MULTI) {
      expect(ready[0]!['threads']).toBe(2);
      expect(fallback).toHaveLength(0);
    } else {
      expect(ready[0]!['threads']).toBe(1);
      expect(fallback).toHaveLength(1);
      expect(fallback[0]!['msg']).toBe(
        `proxy: one thread accepts: workers 2 needs Node >= 22.12 on Linux (reusePort); this is Node ${process.version} on ${process.platform}`,
      );
    }
    expect(await p.stop()).toBe(0);
  });

  it('without --workers: a thread per core where reusePort exists, else one thread, and no line about a --workers nobody passed', async () => {
    const b = await backend(0);
    const { p } = await proxy(['--backend', `a=127.0.0.1:${b.port}`]);
    expect(p.find('proxy ready')[0]!['threads']).toBe(MULTI ? Math.min(64, os.availableParallelism()) : 1);
    expect(p.find('one thread accepts')).toHaveLength(0);
    expect(await p.stop()).toBe(0);
  });
});

describe('poise proxy drain on SIGTERM / SIGINT', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s: stops accepting, the in-flight reply is still delivered, then exit 0 with nothing cut',
    async (signal) => {
      const b = await backend(600);
      const { p, port } = await proxy(['--backend', `a=127.0.0.1:${b.port}`, '--workers', '2', '--grace', '20s']);
      const c = client(port);
      c.socket.write('in-flight');
      await until(() => b.requests === 1, 'the backend got the request');
      p.child.kill(signal);
      await p.until((r) => r.some((x) => String(x['msg']).startsWith('proxy draining')), 'proxy draining');
      // Not accepting any more, on any thread: a new client is refused, not accepted and reset.
      expect(await refused(port)).toBe(true);
      await until(() => c.data() !== '', 'the reply');
      expect(c.data()).toBe('reply:in-flight');
      expect(p.child.exitCode).toBe(null); // still draining: the client has not closed yet
      c.socket.end();
      expect(await exited(p)).toBe(0);
      expect(p.find('proxy drained').map((r) => r['cut'])).toEqual([0]);
    },
  );

  it('a connection still open when --grace ends is closed, and the proxy exits 0 (cut 1)', async () => {
    const b = await backend(0);
    const { p, port } = await proxy(['--backend', `a=127.0.0.1:${b.port}`, '--grace', '300ms', '--timeout-client', '0']);
    const c = client(port);
    c.socket.write('x');
    await until(() => c.data() === 'reply:x', 'the first reply');
    p.child.kill('SIGTERM');
    await c.closed;
    expect(await exited(p)).toBe(0);
    expect(p.find('proxy drained').map((r) => r['cut'])).toEqual([1]);
  });

  it('a second signal during the drain exits at once with 0', async () => {
    const b = await backend(0);
    const { p, port } = await proxy(['--backend', `a=127.0.0.1:${b.port}`, '--grace', '10m']);
    const c = client(port);
    c.socket.write('x');
    await until(() => c.data() === 'reply:x', 'the reply');
    p.child.kill('SIGTERM');
    await p.until((r) => r.some((x) => String(x['msg']).startsWith('proxy draining')), 'proxy draining');
    p.child.kill('SIGTERM');
    expect(await exited(p)).toBe(0);
    expect(p.find('second signal')).toHaveLength(1);
    expect(p.find('proxy drained')).toHaveLength(0);
  });
});

describe('poise proxy --max-connections', () => {
  it('--max-connections 2 with --workers 2: 12 clients at once, never more than 2 at the backend, all served', async () => {
    const b = await backend(40);
    const { p, port } = await proxy(['--backend', `a=127.0.0.1:${b.port}`, '--workers', '2', '--max-connections', '2']);
    const clients = Array.from({ length: 12 }, (_, i) => {
      const c = client(port);
      c.socket.write(`c${i}`);
      c.socket.once('data', () => c.socket.end()); // each closes once answered, freeing its slot
      return c;
    });
    await Promise.all(clients.map((c) => c.closed));
    expect(clients.map((c) => c.data())).toEqual(Array.from({ length: 12 }, (_, i) => `reply:c${i}`));
    expect(b.requests).toBe(12);
    expect(b.peak).toBe(2);
    expect(await p.stop()).toBe(0);
  });
});
