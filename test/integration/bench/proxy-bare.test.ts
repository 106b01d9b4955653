/**
 * bench/proxy-bare, the "bare Node" ceiling of bench:proxy, is only a fair
 * ceiling if it is a correct proxy: bytes exact both ways under concurrency,
 * half-close in both directions, exact round-robin, TCP_NODELAY on both of
 * its sockets. Runs the compiled file (dist/, built by `npm test`'s pretest)
 * in a child process with real loopback sockets.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { dial as dialFrom, readAll } from '../../helpers/loopback.js';
import { noDelayOf } from '../../helpers/sockopt.js';
import { listenLoopback } from '../../helpers/loopback.js';
import { until } from '../../helpers/until.js';

const BARE = fileURLToPath(new URL('../../../dist/bench/proxy-bare.js', import.meta.url));
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A half-open loopback server; `onConnection` gets each socket. */
const backend = (onConnection: (s: net.Socket) => void): Promise<number> => listenLoopback(cleanups, onConnection, { allowHalfOpen: true });

/** Starts the bare proxy on a free port and resolves with it once every thread listens. */
async function bare(backends: number[], threads = 1): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, [BARE, JSON.stringify({ port: 0, backends, threads, youngMb: 4 })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /listening 127\.0\.0\.1:(\d+)/.exec(out);
      if (m !== null) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`proxy-bare exited with ${code}: ${out}`)));
  });
  return { port, child };
}

const dial = (port: number): Promise<net.Socket> => dialFrom(cleanups, port);

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const MiB = 1 << 20;

describe('bench/proxy-bare', () => {
  it('200 concurrent clients each echo 256 KiB through 4 backends: every byte back, in order, and exact round-robin', async () => {
    const accepted = [0, 0, 0, 0];
    const ports = await Promise.all(
      accepted.map((_, i) =>
        backend((s) => {
          accepted[i]!++;
          s.pipe(s);
        }),
      ),
    );
    const { port } = await bare(ports);
    // Sequential connects first: one thread, one counter, so 8 connections land 2, 2, 2, 2.
    for (let i = 0; i < 8; i++) {
      const c = await dial(port);
      const back = readAll(c);
      c.end('x');
      expect((await back).toString()).toBe('x');
    }
    expect(accepted).toEqual([2, 2, 2, 2]);
    const one = async (): Promise<boolean> => {
      const body = randomBytes(256 * 1024);
      const c = await dial(port);
      const back = readAll(c);
      c.end(body);
      return sha(await back) === sha(body);
    };
    const results = await Promise.all(Array.from({ length: 200 }, one));
    expect(results.filter((ok) => !ok)).toHaveLength(0);
    expect(accepted.reduce((a, b) => a + b, 0)).toBe(208);
    for (const n of accepted) expect(n).toBe(52);
  });

  it('backend FIN first: the client still sends 1 MiB and the backend receives it byte-exact', async () => {
    const payload = randomBytes(MiB);
    let received: Promise<Buffer> | undefined;
    const p = await backend((s) => {
      received = readAll(s);
      s.end('bye');
    });
    const { port } = await bare([p]);
    const c = await dial(port);
    expect((await readAll(c)).toString()).toBe('bye');
    c.end(payload);
    const got = await received!;
    expect(got.length).toBe(MiB);
    expect(got.equals(payload)).toBe(true);
  });

  it('client FIN first: the backend still sends 1 MiB and the client receives it byte-exact', async () => {
    const upload = randomBytes(MiB);
    const reply = randomBytes(MiB);
    let uploaded: Buffer | undefined;
    const p = await backend((s) => {
      void readAll(s).then((got) => {
        uploaded = got;
        s.end(reply);
      });
    });
    const { port } = await bare([p]);
    const c = await dial(port);
    const download = readAll(c);
    c.end(upload);
    const got = await download;
    expect(uploaded!.equals(upload)).toBe(true);
    expect(got.equals(reply)).toBe(true);
  });

  it('sets TCP_NODELAY on the accepted and the upstream socket (read back from the kernel)', async () => {
    let upstreamPeer: [number, number] | undefined;
    const p = await backend((s) => {
      upstreamPeer = [s.remotePort!, s.localPort!];
    });
    const { port, child } = await bare([p]);
    const c = await dial(port);
    c.write('hello');
    await until(() => upstreamPeer !== undefined, 'the upstream connection at the backend', 2000);
    // The proxy's two sockets: local port `port` with the client's port as peer, and the upstream socket to the backend.
    const flags = noDelayOf(child.pid!, [
      [port, c.localPort!],
      [upstreamPeer![0], upstreamPeer![1]],
    ]);
    expect(flags).toEqual([true, true]);
  });
});
