/**
 * bench/proxy-memory: the memory of `poise proxy` beside bare Node
 * (bench/proxy-bare, the same worker threads and young generation) at 1, 2
 * and 4 worker threads: RSS idle before any traffic, KB per idle spliced
 * connection, and RSS after 16 MiB transfers.
 *
 *   node dist/bench/proxy-memory.js [--quick] [--node PATH[,PATH]] [--threads 1,2,4]
 *                                   [--idle-connections N] [--bulk D] [--node-args "A B"]
 *
 * Per Node binary, thread count and system, one fresh proxy over 4 Node HTTP
 * backends (bench/proxy-backend, in a child process):
 * - idle: VmRSS 1.5 s after it listens, and the anonymous share of it
 *   (/proc/PID/smaps_rollup: the rest is the node binary's file pages);
 * - per connection: N client connections opened 100 at a time, each spliced
 *   to a backend (the backends count them), RSS growth / N;
 * - after bulk: those closed, 4 connections fetching `/16m` for `--bulk`
 *   seconds (bench/proxy-client), then VmRSS.
 * `--node-args` passes flags to the proxy processes' node (an experiment:
 * `--max-semi-space-size=1`); `MALLOC_ARENA_MAX` and the like come from the
 * environment, which the proxies inherit.
 * The machine is shared or not: RSS moves little with load, time does not
 * enter these figures. Nothing is written; the table goes to stdout.
 */
import { type ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { durationFlag, integerFlag, parseFlags } from '../src/cli/args.js';
import { freePort } from './lib/free-port.js';
import { formatTable } from './lib/harness.js';
import { rssBytes } from './lib/proc.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, ...(HERE.includes(`${path.sep}dist${path.sep}`) ? ['..', '..'] : ['..']));
const POISE = path.join(REPO, 'dist', 'src', 'cli', 'main.js');
/** The young-generation cap of poise's proxy workers (its default), given to bare Node's too. */
const YOUNG_MB = 4;

const { values } = parseFlags(process.argv.slice(2), {
  quick: { type: 'boolean' },
  node: { type: 'string' },
  threads: { type: 'string' },
  'idle-connections': { type: 'string' },
  bulk: { type: 'string' },
  'node-args': { type: 'string' },
});
const quick = values.quick;
const NODES = (values.node ?? process.execPath).split(',').filter((n) => n !== '');
const THREADS = (values.threads ?? (quick ? '2' : '1,2,4')).split(',').map((t) => integerFlag('--threads', t, 1, 64)!);
const IDLE = integerFlag('--idle-connections', values['idle-connections'], 10, 8000) ?? (quick ? 300 : 2000);
const BULK_S = (durationFlag('--bulk', values.bulk, 1000, 600_000) ?? (quick ? 1000 : 5000)) / 1000;
const NODE_ARGS = (values['node-args'] ?? '').split(' ').filter((a) => a !== '');

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** VmRSS and the anonymous part of it, MB. */
function rss(pid: number): { rssMB: number; anonMB: number } {
  const m = /^Anonymous:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return { rssMB: rssBytes(pid) / 1e6, anonMB: Number(m?.[1] ?? Number.NaN) / 1e3 };
}

async function untilAccepting(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`proxy exited with code ${child.exitCode} before listening`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`proxy on ${port} not accepting after 30 s`);
    await sleep(50);
  }
}

const backend = fork(path.join(HERE, 'proxy-backend.js'), [JSON.stringify({ delaysMs: [0, 0, 0, 0] })], { stdio: 'inherit' });
children.add(backend);
const ports = await new Promise<number[]>((resolve) => backend.once('message', (m) => resolve((m as { ports: number[] }).ports)));
const openAtBackends = (): Promise<number> =>
  new Promise((resolve) => {
    backend.once('message', (m) => resolve((m as { open: number[] }).open.reduce((a, b) => a + b, 0)));
    backend.send('counts');
  });

async function start(node: string, kind: 'poise' | 'bare', threads: number): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const args =
    kind === 'poise'
      ? [POISE, 'proxy', '--listen', `127.0.0.1:${port}`, ...ports.flatMap((p, i) => ['--backend', `b${i}=127.0.0.1:${p}`])]
      : [path.join(HERE, 'proxy-bare.js'), JSON.stringify({ port, backends: ports, threads, youngMb: YOUNG_MB })];
  if (kind === 'poise') args.push('--policy', 'p2c:connections', '--log-level', 'error', '--workers', String(threads));
  const child = spawn(node, [...NODE_ARGS, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.add(child);
  await untilAccepting(port, child);
  return { child, port };
}

async function idleConnections(pid: number, port: number): Promise<number> {
  const base = await openAtBackends();
  const before = rssBytes(pid);
  const sockets: net.Socket[] = [];
  for (let i = 0; i < IDLE; i += 100)
    await Promise.all(
      Array.from(
        { length: Math.min(100, IDLE - i) },
        () =>
          new Promise<void>((resolve, reject) => {
            const s = net.connect({ host: '127.0.0.1', port }, () => resolve());
            s.once('error', reject);
            sockets.push(s);
          }),
      ),
    );
  const deadline = Date.now() + 30_000;
  while ((await openAtBackends()) - base < IDLE && Date.now() < deadline) await sleep(100);
  await sleep(1000);
  const held = (await openAtBackends()) - base;
  if (held < IDLE) throw new Error(`only ${held} of ${IDLE} idle connections reached the backends`);
  const perConnKB = (rssBytes(pid) - before) / IDLE / 1024;
  for (const s of sockets) s.destroy();
  while ((await openAtBackends()) > base && Date.now() < deadline + 30_000) await sleep(100);
  return perConnKB;
}

function bulk(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const job = { port, path: '/16m', connections: 4, seconds: BULK_S, close: false };
    const c = fork(path.join(HERE, 'proxy-client.js'), [JSON.stringify(job)], { stdio: 'ignore' });
    children.add(c);
    c.once('exit', (code) => (children.delete(c), code === 0 ? resolve() : reject(new Error(`proxy-client exited ${code}`))));
  });
}

const rows: Record<string, unknown>[] = [];
for (const node of NODES) {
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  for (const threads of THREADS)
    for (const kind of ['poise', 'bare'] as const) {
      const { child, port } = await start(node, kind, threads);
      await sleep(1500);
      const idle = rss(child.pid!);
      const perConnKB = await idleConnections(child.pid!, port);
      await bulk(port);
      const after = rss(child.pid!);
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      children.delete(child);
      rows.push({
        node: version,
        system: kind,
        threads,
        'idle RSS MB': idle.rssMB,
        'idle anon MB': idle.anonMB,
        'KB/idle conn': perConnKB,
        'RSS after 16 MiB MB': after.rssMB,
        'after anon MB': after.anonMB,
      });
      process.stderr.write(`proxy-memory: ${version} ${kind} ×${threads} done\n`);
    }
}
process.stdout.write(
  `${formatTable(rows)}\n(${IDLE} idle connections; ${BULK_S} s of 16 MiB bodies over 4 connections; node args ${NODE_ARGS.join(' ') || 'none'}; MALLOC_ARENA_MAX ${process.env['MALLOC_ARENA_MAX'] ?? 'unset'})\n`,
);
backend.disconnect();
process.exit(0);
