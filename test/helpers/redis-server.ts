/**
 * Starts real `redis-server` processes on free loopback ports for tests.
 * Every server started here is SIGKILLed when the test process exits, even
 * when a test fails before its afterAll (a frozen one too: SIGKILL needs no
 * SIGCONT); call `stop()` in afterAll anyway.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.js';
import { until } from './until.js';

const live = new Set<ChildProcess>();
function killAll(): void {
  for (const child of live) child.kill('SIGKILL');
}
process.on('exit', killAll);

/** A running test Redis. */
export interface TestRedis {
  readonly port: number;
  readonly url: string;
  /** Data directory when started with `persist`. */
  readonly dir: string | undefined;
  /** PEM of the self-signed certificate when started with `tls` (pass as `redisOptions.tls.ca`). */
  readonly ca: string | undefined;
  /** SIGKILL (a crash: no shutdown save); resolves when the process is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port (and the same data directory, if any). */
  restart(): Promise<void>;
  /** SIGSTOP: the process stays, its connections stay open, nothing answers (a frozen Redis, a black hole). */
  freeze(): void;
  /** SIGCONT after {@link freeze}: it answers what was sent meanwhile, in order. */
  thaw(): void;
  /** Kills it and removes its data directory. Idempotent. */
  stop(): Promise<void>;
}

function ping(port: number, secure: boolean): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = secure ? tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }) : net.connect({ host: '127.0.0.1', port });
    let buf = '';
    sock.setTimeout(500, () => {
      sock.destroy();
      resolve(false);
    });
    sock.on(secure ? 'secureConnect' : 'connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) {
        sock.destroy();
        // A password-protected server answers NOAUTH: it is up.
        resolve(buf.startsWith('+PONG') || buf.startsWith('-NOAUTH'));
      }
    });
    sock.on('error', () => resolve(false));
  });
}

async function waitReady(port: number, child: ChildProcess, secure: boolean, deadlineMs = 10_000): Promise<void> {
  await until(
    async () => {
      if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited with code ${child.exitCode}`);
      return ping(port, secure);
    },
    `redis-server on port ${port} to answer PING`,
    deadlineMs,
    25,
  );
}

/**
 * Starts `redis-server` on a free port. `persist: true` keeps its data in a
 * temporary directory with an fsync-always append-only file, so `kill()` +
 * `restart()` comes back with every acknowledged write. `port` pins the port
 * (for a client configured before the server exists).
 */
export async function startRedis(opts: { persist?: boolean; password?: string; port?: number; tls?: boolean } = {}): Promise<TestRedis> {
  const port = opts.port ?? (await freePort());
  const dir = opts.persist || opts.tls ? mkdtempSync(path.join(os.tmpdir(), 'poise-redis-')) : undefined;
  const args = opts.tls ? ['--port', '0', '--tls-port', String(port)] : ['--port', String(port)];
  args.push('--bind', '127.0.0.1', '--save', '');
  let ca: string | undefined;
  if (opts.tls) {
    const { cert, key, pem } = selfSignedCert(dir!);
    ca = pem;
    args.push('--tls-cert-file', cert, '--tls-key-file', key, '--tls-ca-cert-file', cert, '--tls-auth-clients', 'no');
  }
  if (!opts.persist) args.push('--appendonly', 'no');
  else args.push('--dir', dir!, '--appendonly', 'yes', '--appendfsync', 'always');
  if (opts.password !== undefined) args.push('--requirepass', opts.password);
  let child: ChildProcess | undefined;
  const launch = async (): Promise<void> => {
    const c = spawn('redis-server', args, { stdio: 'ignore' });
    live.add(c);
    c.on('exit', () => live.delete(c));
    child = c;
    try {
      await waitReady(port, c, opts.tls === true);
    } catch (err) {
      c.kill('SIGKILL');
      throw err;
    }
  };
  const kill = async (): Promise<void> => {
    const c = child;
    child = undefined;
    if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  };
  const signal = (sig: NodeJS.Signals): void => {
    if (child === undefined || child.exitCode !== null || child.signalCode !== null)
      throw new Error(`redis-server on port ${port} is not running`);
    child.kill(sig);
  };
  await launch();
  const auth = opts.password === undefined ? '' : `:${encodeURIComponent(opts.password)}@`;
  return {
    port,
    url: `${opts.tls ? 'rediss' : 'redis'}://${auth}127.0.0.1:${port}`,
    dir,
    ca,
    kill,
    restart: launch,
    freeze: () => signal('SIGSTOP'),
    thaw: () => signal('SIGCONT'),
    async stop() {
      await kill();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A self-signed certificate for 127.0.0.1 (openssl, 1 day) in `dir`: its paths and the PEM text (the CA of a client). */
export function selfSignedCert(dir: string): { cert: string; key: string; pem: string } {
  const cert = path.join(dir, 'server.crt');
  const key = path.join(dir, 'server.key');
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  if (made.status !== 0) throw new Error('openssl could not create a test certificate');
  return { cert, key, pem: readFileSync(cert, 'utf8') };
}
