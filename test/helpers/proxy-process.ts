/** A `poise proxy` child process whose pino lines (stderr) tests can wait on, and two small TCP probes. */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { until } from './until.js';
import { CLI } from './cli.js';

export interface ProxyProcess {
  readonly child: ChildProcess;
  /** Every JSON log record so far. */
  records(): Record<string, unknown>[];
  /** Records whose message contains `text`. */
  find(text: string): Record<string, unknown>[];
  /** The last `chars` of stderr as written, lines that are not JSON records included (a stack, `poise: ...`). */
  stderrTail(chars?: number): string;
  /** Waits until `probe(records)` holds (bounded: 60 s, a process start under a loaded CI took over 15). */
  until(probe: (records: Record<string, unknown>[]) => boolean, what: string): Promise<void>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL if still running (for finally blocks). */
  kill(): void;
}

/**
 * Starts `poise proxy ...args` (compiled CLI) at log level info, with `env`
 * added to the environment; with `descriptors`, under `ulimit -n` of that
 * many (soft and hard), set by a shell that then execs the proxy.
 */
export function startProxy(args: string[], env: Record<string, string> = {}, opts: { descriptors?: number } = {}): ProxyProcess {
  const argv = [process.execPath, CLI, 'proxy', ...args];
  const [file, rest] =
    opts.descriptors === undefined
      ? [process.execPath, argv.slice(1)]
      : ['sh', ['-c', `ulimit -n ${opts.descriptors} && exec ${argv.map((a) => `'${a}'`).join(' ')}`]];
  const child = spawn(file, rest, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, POISE_LOG_LEVEL: 'info', ...env },
  });
  let text = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (text += d));
  child.stdout!.resume();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const records = (): Record<string, unknown>[] =>
    text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    child,
    records,
    find: (t) => records().filter((r) => String(r['msg']).includes(t)),
    stderrTail: (chars = 2000) => text.slice(-chars),
    until: (probe, what) =>
      until(
        () => {
          if (child.exitCode !== null) throw new Error(`proxy exited with ${child.exitCode} while waiting for ${what}: ${text}`);
          return probe(records());
        },
        what,
        60_000,
      ),
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** True when a connection to 127.0.0.1:port is refused (nothing listens). */
export function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

/** Sends `text` through 127.0.0.1:port and resolves with the first reply. */
export function echo(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => s.write(text));
    s.once('data', (d) => {
      resolve(d.toString());
      s.end();
    });
    s.once('error', reject);
  });
}
