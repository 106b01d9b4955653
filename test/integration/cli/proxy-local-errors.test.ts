/**
 * Local resource errors for real: a child `poise proxy` under `ulimit -n 64`
 * with 200 clients (400 descriptors) refuses what it cannot open (EMFILE on connect is this
 * host's, never the backend's) and ejects no backend. The in-process laws
 * with an injected socket factory: test/outbound/local-errors.test.ts.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI } from '../../helpers/cli.js';
import { echoServer } from '../../helpers/echo-server.js';
import { freePort } from '../../helpers/ports.js';
import { until } from '../../helpers/until.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('local errors in a poise proxy process', () => {
  it('a child poise proxy under ulimit -n 64 with 200 clients refuses what it cannot open and ejects no backend', async () => {
    const backends = await Promise.all(['a', 'b', 'c', 'd'].map((name) => echoServer(name)));
    for (const b of backends) cleanups.push(() => b.close());
    const ports = backends.map((b) => b.port);
    const listen = await freePort();
    // --workers 0: the main thread accepts, so the connects hit EMFILE. With a
    // worker thread accepting, the accepts hit it first and the clients over
    // the limit were reset (182 of 200 here, with no connect failing; libuv's
    // accept-side EMFILE handling, not ours): --max-connections is the remedy.
    const args = [CLI, 'proxy', '--listen', `127.0.0.1:${listen}`, '--policy', 'round-robin', '--log-level', 'info', '--workers', '0'];
    ports.forEach((p, i) => {
      args.push('--backend', `${'abcd'[i]}=127.0.0.1:${p}`);
    });
    const quoted = [process.execPath, ...args].map((a) => `'${a}'`).join(' ');
    // 64: the proxy holds about 25 descriptors at rest; its modules load one file at a time
    // (core/ordered-import.ts; Node 20's loader would open a graph's files all at once).
    const child = spawn('sh', ['-c', `ulimit -n 64 && exec ${quoted}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, POISE_LOG_LEVEL: 'info' },
    });
    cleanups.push(() => child.exitCode === null && child.kill('SIGKILL'));
    let log = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (log += d));
    child.stdout.resume();
    await until(() => log.includes('proxy ready'), 'the proxy to listen');
    // 200 clients at once, each holding its connection and its backend's: far more than 64 descriptors.
    const clients: net.Socket[] = [];
    let served = 0;
    for (let i = 0; i < 200; i++) {
      const s = net.connect({ host: '127.0.0.1', port: listen });
      clients.push(s);
      s.on('error', () => {});
      s.once('connect', () => s.write('?'));
      s.once('data', () => served++);
    }
    await until(() => log.includes('local resource exhausted'), 'a local-resource refusal to be logged');
    await until(() => served > 0, 'some clients to be served');
    for (const s of clients) s.destroy();
    /** One request: the backend's reply (its name, a colon, the request), or undefined when the proxy closed the client without a reply (refused). */
    const ask = (): Promise<string | undefined> =>
      new Promise<string | undefined>((resolve, reject) => {
        const s = net.connect({ host: '127.0.0.1', port: listen }, () => s.write('?'));
        s.once('data', (d) => (resolve(d.toString()), s.destroy()));
        s.once('close', () => resolve(undefined));
        s.once('error', reject);
      });
    // The proxy closes the 200 clients' descriptors as it reads their resets:
    // until it has, a request may still be refused for want of one. Wait for a reply.
    await until(async () => (await ask()) !== undefined, 'a request served after the clients left');
    // Every backend is still in rotation: 40 sequential requests, exactly 10 each (round robin over all 4).
    const seen: Record<string, number> = {};
    for (let i = 0; i < 40; i++) {
      const reply = await ask();
      expect(reply, `request ${i} refused`).toBeDefined();
      seen[reply!] = (seen[reply!] ?? 0) + 1;
    }
    expect(seen).toEqual({ 'a:?': 10, 'b:?': 10, 'c:?': 10, 'd:?': 10 });
    expect(log).not.toContain('backend ejected');
    // Rate-limited: far fewer refusal lines than refusals.
    expect(log.split('\n').filter((l) => l.includes('local resource exhausted')).length).toBeLessThanOrEqual(2);
    child.kill('SIGTERM');
    expect(await new Promise((r) => child.once('exit', r))).toBe(0);
  });
});
