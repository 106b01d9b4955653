/**
 * bench/proxy-memory: the memory of `poise proxy` beside bare Node
 * (bench/proxy-bare, the same worker threads and young generation) at 1, 2
 * and 4 worker threads: RSS idle before any traffic, KB per idle spliced
 * connection, and RSS after 16 MiB transfers.
 *
 *   node dist/bench/proxy-memory.js [--quick] [--check] [--node PATH[,PATH]] [--threads 1,2,4]
 *                                   [--idle-connections N] [--short-connections N] [--bulk D]
 *                                   [--node-args "A B"] [--poise-bin PATH]
 *
 * Per Node binary, thread count and system, one fresh proxy over 4 Node HTTP
 * backends (bench/proxy-backend, in a child process):
 * - idle: VmRSS 1.5 s after it listens, split by /proc/PID/smaps into
 *   file pages (the node binary and its libraries, shared with every other
 *   process running them), glibc malloc arenas (the main one, `[heap]`, and
 *   the 64 MiB-aligned reservations of the others: one per thread that
 *   malloc'd, up to 8 per core) and the rest of the anonymous memory (V8's
 *   heap pages of every isolate, thread stacks, mmap'd large allocations);
 * - after short connections: 2,000 (`--short-connections`) one-request
 *   connections (`GET /`, `Connection: close`), 50 at a time, then VmRSS;
 * - per connection: N client connections opened 100 at a time, each spliced
 *   to a backend (the backends count them), RSS growth / N;
 * - after bulk: those closed, 4 connections fetching `/16m` for `--bulk`
 *   seconds (bench/proxy-client), then VmRSS and the same split.
 * `--node-args` passes flags to the proxy processes' node (an experiment:
 * `--max-semi-space-size=1`); `MALLOC_ARENA_MAX` and the like come from the
 * environment, which the proxies inherit. `--poise-bin` measures another
 * build's `dist/src/cli/main.js` (a before / after comparison).
 * The machine is shared or not: RSS moves little with load, time does not
 * enter these figures. Nothing is written; the table goes to stdout.
 *
 * `--check` (issue 40's targets, on every row of 2 threads: `poise proxy
 * --workers 2`, the main thread and one worker, beside bare Node's 2 worker
 * threads): idle RSS ≤ bare Node's + 10 MiB, RSS after the short
 * connections ≤ 96 MiB, ≤ 3.3 KB per idle connection; each miss is one
 * line on stderr and the exit code is 1. The targets are Node 24's.
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
const DEFAULT_POISE = path.join(REPO, 'dist', 'src', 'cli', 'main.js');
/** The young-generation cap of poise's proxy workers (its default), given to bare Node's too. */
const YOUNG_MB = 4;

const { values } = parseFlags(process.argv.slice(2), {
  quick: { type: 'boolean' },
  check: { type: 'boolean' },
  'short-connections': { type: 'string' },
  node: { type: 'string' },
  threads: { type: 'string' },
  'idle-connections': { type: 'string' },
  bulk: { type: 'string' },
  'node-args': { type: 'string' },
  'poise-bin': { type: 'string' },
});
const POISE = path.resolve(values['poise-bin'] ?? DEFAULT_POISE);
const quick = values.quick;
const NODES = (values.node ?? process.execPath).split(',').filter((n) => n !== '');
const THREADS = (values.threads ?? (quick ? '2' : '1,2,4')).split(',').map((t) => integerFlag('--threads', t, 1, 64)!);
const IDLE = integerFlag('--idle-connections', values['idle-connections'], 10, 8000) ?? (quick ? 300 : 2000);
const SHORT = integerFlag('--short-connections', values['short-connections'], 1, 100_000) ?? 2000;
const BULK_S = (durationFlag('--bulk', values.bulk, 1000, 600_000) ?? (quick ? 1000 : 5000)) / 1000;
const NODE_ARGS = (values['node-args'] ?? '').split(' ').filter((a) => a !== '');

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** glibc's non-main arenas: HEAP_MAX_SIZE (64 MiB on 64-bit) reservations aligned on their size. */
const ARENA_BYTES = 64 * 2 ** 20;

/** Where a process's resident memory is, MiB (the unit of issue 29's targets): VmRSS, file pages, malloc arenas, other anonymous memory. */
function rssSplit(pid: number): { rss: number; file: number; arenas: number; other: number } {
  interface Mapping {
    start: number;
    end: number;
    perm: string;
    name: string;
    rssKB: number;
  }
  const maps: Mapping[] = [];
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) {
      maps.push({ start: Number.parseInt(head[1]!, 16), end: Number.parseInt(head[2]!, 16), perm: head[3]!, name: head[4]!, rssKB: 0 });
      continue;
    }
    const r = /^Rss:\s+(\d+) kB/.exec(line);
    const last = maps[maps.length - 1];
    if (r !== null && last !== undefined) last.rssKB = Number(r[1]);
  }
  let file = 0;
  let arena = 0;
  let other = 0;
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]!;
    const next = maps[i + 1];
    // An arena is mapped rw up to its top, the rest of its 64 MiB PROT_NONE until it grows.
    const isArena =
      m.name === '[heap]' ||
      (m.name === '' &&
        m.perm === 'rw-p' &&
        m.start % ARENA_BYTES === 0 &&
        (m.end - m.start === ARENA_BYTES ||
          (next !== undefined && next.start === m.end && next.name === '' && next.perm === '---p' && next.end - m.start === ARENA_BYTES)));
    if (m.name.startsWith('/')) file += m.rssKB;
    else if (isArena) arena += m.rssKB;
    else other += m.rssKB;
  }
  return { rss: rssBytes(pid) / 2 ** 20, file: file / 1024, arenas: arena / 1024, other: other / 1024 };
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

/** `n` one-request connections (`GET /`, `Connection: close`), `at` at a time: each reads its whole reply, then the server's FIN. */
async function shortConnections(port: number, n: number, at = 50): Promise<void> {
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => s.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'));
      s.resume();
      s.once('end', () => (s.destroy(), resolve()));
      s.once('error', reject);
    });
  for (let i = 0; i < n; i += at) await Promise.all(Array.from({ length: Math.min(at, n - i) }, one));
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
      const idle = rssSplit(child.pid!);
      await shortConnections(port, SHORT);
      await sleep(1500);
      const short = rssBytes(child.pid!) / 2 ** 20;
      const perConnKB = await idleConnections(child.pid!, port);
      await bulk(port);
      const after = rssSplit(child.pid!);
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      children.delete(child);
      rows.push({
        node: version,
        system: kind,
        threads,
        'idle RSS MiB': idle.rss,
        'file MiB': idle.file,
        'arenas MiB': idle.arenas,
        'V8 + other MiB': idle.other,
        [`RSS after ${SHORT} short conns, MiB`]: short,
        'KB/idle conn': perConnKB,
        'RSS after 16 MiB bodies, MiB': after.rss,
        'after: arenas MiB': after.arenas,
        'after: V8 + other MiB': after.other,
      });
      process.stderr.write(`proxy-memory: ${version} ${kind} ×${threads} done\n`);
    }
}
process.stdout.write(
  `${formatTable(rows)}\n(${SHORT} short connections; ${IDLE} idle connections; ${BULK_S} s of 16 MiB bodies over 4 connections; node args ${NODE_ARGS.join(' ') || 'none'}; MALLOC_ARENA_MAX ${process.env['MALLOC_ARENA_MAX'] ?? 'unset'})\n`,
);
backend.disconnect();
process.exit(values.check ? check(rows) : 0);

/** `--check`: issue 40's targets on the 2-thread rows; one stderr line per miss; the exit code. */
function check(all: Record<string, unknown>[]): number {
  const num = (row: Record<string, unknown> | undefined, k: string): number => Number(row?.[k]);
  const misses: string[] = [];
  const pairs = all.filter((r) => r['system'] === 'poise' && r['threads'] === 2);
  if (pairs.length === 0) misses.push('--check: no row of 2 threads (give --threads with 2)');
  for (const p of pairs) {
    const bare = all.find((r) => r['system'] === 'bare' && r['threads'] === 2 && r['node'] === p['node']);
    const at = `${String(p['node'])} poise ×2`;
    const idle = num(p, 'idle RSS MiB');
    if (!(idle <= num(bare, 'idle RSS MiB') + 10))
      misses.push(`${at}: idle RSS ${idle.toFixed(1)} MiB > bare Node's ${num(bare, 'idle RSS MiB').toFixed(1)} + 10`);
    const short = num(p, `RSS after ${SHORT} short conns, MiB`);
    if (!(short <= 96)) misses.push(`${at}: RSS after ${SHORT} short connections ${short.toFixed(1)} MiB > 96`);
    const kb = num(p, 'KB/idle conn');
    if (!(kb <= 3.3)) misses.push(`${at}: ${kb.toFixed(2)} KB per idle connection > 3.3`);
  }
  for (const m of misses) process.stderr.write(`proxy-memory: target missed: ${m}\n`);
  return misses.length === 0 ? 0 : 1;
}
