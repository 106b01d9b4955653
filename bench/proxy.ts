/**
 * bench/proxy: `poise proxy` side by side with HAProxy (`mode tcp`) on the
 * same loopback backends and the same load generator.
 *
 *   npm run bench:proxy [-- --quick] [--rounds N] [--duration D] [--node PATH[,PATH]]
 *                       [--poise-bin PATH] [--label NAME] [--profile] [--force]
 *                       [--idle-connections N] [--without haproxy,nginx,wrk]
 *                       [--cases short,keepalive,1MiB,16MiB,idle,slow]
 *                       [--threads 1,2] [--slow-connections N] [--note TEXT]
 *
 * Backends: 4 nginx servers (one nginx, one worker process) when `nginx` is
 * on PATH, else 4 Node HTTP servers in a child process (bench/proxy-backend);
 * the slow-backend and idle-memory cases always use the Node servers (they
 * need a delay and an open-connection count). Load: wrk (1 thread) when on
 * PATH, else bench/proxy-client. HAProxy runs when `haproxy` is on PATH,
 * with `nbthread` equal to poise's `--workers` (1, and 2 where
 * `poise proxy --help` lists `--workers`). Nothing is installed here.
 * Beside them, always: bare Node (bench/proxy-bare), the smallest correct
 * Node TCP proxy with the same threads, run under the same `--node`: every
 * row shows poise/HAProxy and poise/bare Node, the second being how far
 * poise is from what Node itself allows.
 *
 * Cases, each a fresh proxy per system per round, rounds interleaved (the
 * order of the systems rotates every round):
 * - short: `Connection: close`, 64 connections: req/s, p50, p99.
 * - keep-alive: 64 connections: req/s, p99.
 * - 1 MiB (64 connections) and 16 MiB (16 connections) bodies: MiB/s.
 * - slow: 4 Node backends, one 40 ms, three 4 ms; short connections: req/s,
 *   p99 and the slow backend's share of connections; poise p2c:latency,
 *   p2c:connections, least-loaded against HAProxy leastconn and random(2)
 *   and bare Node (round-robin); the proxy's and the backends' CPU per
 *   request, and the req/s the backend delays alone would allow at that
 *   share (`--slow-connections N`, default 64: fewer make it latency-bound).
 * - idle: RSS of the proxy process before and after N idle client
 *   connections (each spliced to a backend): KB per connection.
 * Memory of every system in the main cases: RSS right after it listens
 * (before any traffic) and after the bulk transfers (1 / 16 MiB), so
 * `--threads 1,2,4` gives idle RSS, RSS after bulk and KB per idle
 * connection for 1, 2 and 4 workers.
 *
 * Quiet machine: the figures are only worth keeping on an otherwise idle
 * machine. The bench refuses to start when the 1-minute load average is
 * above 1.5 (`--force` runs anyway), and records for every cell (system ×
 * case × round) the load average at its end, the machine's busy share over
 * the cell (/proc/stat) and the foreign share: busy time that was neither
 * the proxy, the backends, nor this bench and its load generator. A cell
 * with a foreign share above 10 % is flagged in the report; with any
 * flagged, the results file is not written unless `--force`.
 * `--node A,B` runs poise and bare Node under each Node binary (say Node 20
 * and Node 24: `npm install --prefix /tmp/node24 node@24`, then
 * `/tmp/node24/node_modules/node/bin/node`), each labelled with its version;
 * the results record both.
 * `--without` ignores installed peers (to run the fallbacks); `--cases` and
 * `--threads` run a subset; `--note` is stored in the results (say the load).
 * `--profile` then runs a short-connection and a keep-alive load against
 * poise ×1 under `node --cpu-prof` and prints, for the accepting thread,
 * the self time by category (poise's code, net/stream internals, GC, ...;
 * see attribute() in bench/lib/proxy-stats) and the top frames; bare Node
 * ×1 the same. Then the attribution table: per short connection and per
 * keep-alive request, the accepting thread's CPU in µs (/proc), its kernel
 * time, its user time split by category (poise JS, net/stream, other Node,
 * dependencies, GC, V8/native), and poise / bare Node; printed, and written
 * to bench/results/proxy-profile.md (proxy-profile-<label>.md) even when the
 * results are not (its title says how quiet the machine was).
 *
 * Results: bench/results/proxy.json (proxy-<label>.json with --label).
 */
import { type ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { durationFlag, integerFlag, parseFlags } from '../src/cli/args.js';
import { freePort } from './lib/free-port.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { CLK_TCK, machineTicks, processTicks, rssBytes, selfTicks, threadTicks, threadTimes, treeTicks } from './lib/proc.js';
import {
  type Attribution,
  attribute,
  type Comparison,
  type CpuProfile,
  type Frame,
  type LoadResult,
  parseWrk,
  ratioRows,
  summarize,
  topFrames,
  type Target,
} from './lib/proxy-stats.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, ...(HERE.includes(`${path.sep}dist${path.sep}`) ? ['..', '..'] : ['..']));

const { values } = parseFlags(process.argv.slice(2), {
  quick: { type: 'boolean' },
  rounds: { type: 'string' },
  duration: { type: 'string' },
  node: { type: 'string' },
  'poise-bin': { type: 'string' },
  label: { type: 'string' },
  profile: { type: 'boolean' },
  'idle-connections': { type: 'string' },
  without: { type: 'string' },
  cases: { type: 'string' },
  threads: { type: 'string' },
  note: { type: 'string' },
  'slow-connections': { type: 'string' },
  force: { type: 'boolean' },
});
if (values.help) {
  process.stdout.write(
    `${readFileSync(fileURLToPath(import.meta.url), 'utf8')
      .split('*/')[0]!
      .replace(/^\/\*\*\n/, '')
      .replace(/^ \* ?/gm, '')}\n`,
  );
  process.exit(0);
}
const quick = values.quick;
const ROUNDS = integerFlag('--rounds', values.rounds, 1, 50) ?? (quick ? 1 : 3);
/** Seconds of load per case and round (`--duration`, the CLI's duration grammar: `5s`, `1m`). */
const SECONDS = (durationFlag('--duration', values.duration, 1000, 600_000) ?? (quick ? 1000 : 5000)) / 1000;
const IDLE = integerFlag('--idle-connections', values['idle-connections'], 10, 8000) ?? (quick ? 300 : 2000);
/** The Node binaries poise and bare Node run under (`--node A,B`); the first is the default one. */
const NODES = (values.node ?? process.execPath).split(',').filter((n) => n !== '');
const NODE = NODES[0]!;
/** Above this 1-minute load average the machine is not quiet: the bench refuses to start unless --force. */
const MAX_LOADAVG = 1.5;
/** A cell whose foreign busy share (busy time none of ours) exceeds this is flagged; any flagged keeps the results unwritten unless --force. */
const MAX_FOREIGN_PCT = 10;
const POISE = path.resolve(values['poise-bin'] ?? path.join(REPO, 'dist', 'src', 'cli', 'main.js'));
const CONNECTIONS = 64;
const SLOW_DELAYS = [40, 4, 4, 4];
/** Connections of the slow case (64 like the others): fewer make it latency-bound instead of CPU-bound. */
const SLOW_CONNECTIONS = integerFlag('--slow-connections', values['slow-connections'], 1, 4096) ?? CONNECTIONS;

// ---------------------------------------------------------------- environment

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function firstLine(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n')[0]!.trim();
}

const PEERS = ['haproxy', 'nginx', 'wrk'] as const;
const without = (values.without ?? '').split(',').filter((w) => w !== '');
for (const w of without)
  if (!(PEERS as readonly string[]).includes(w))
    throw new Error(`--without: must list some of ${PEERS.join(', ')}, got ${JSON.stringify(w)}`);
/** Which peers are used: on PATH and not excluded by --without (which exercises the fallbacks). */
const HAVE = Object.fromEntries(PEERS.map((p) => [p, !without.includes(p) && onPath(p)])) as Record<(typeof PEERS)[number], boolean>;
const NODE_VERSIONS = NODES.map((n) => firstLine(n, ['--version']));
const versions = {
  benchNode: process.version,
  proxyNode: NODE_VERSIONS[0],
  proxyNodePath: NODE,
  /** Every Node poise and bare Node ran under (`--node A,B`), in order. */
  proxyNodes: NODES.map((p, i) => ({ path: p, version: NODE_VERSIONS[i] })),
  poiseBin: POISE,
  haproxy: HAVE.haproxy ? firstLine('haproxy', ['-v']) : 'not installed',
  nginx: HAVE.nginx ? firstLine('nginx', ['-v']) : 'not installed',
  wrk: HAVE.wrk ? firstLine('wrk', ['-v']) : 'not installed',
};
const proxyHelp = spawnSync(NODE, [POISE, 'proxy', '--help'], { encoding: 'utf8' }).stdout ?? '';
if (!proxyHelp.includes('--listen')) throw new Error(`${POISE}: \`poise proxy --help\` did not answer (build first: npm run build)`);
const WORKERS_FLAG = /--workers\b/.test(proxyHelp);
const THREADS = (values.threads ?? (WORKERS_FLAG ? '1,2' : '1')).split(',').map((t) => {
  const n = integerFlag('--threads', t, 1, 64)!;
  if (n > 1 && !WORKERS_FLAG) throw new Error(`--threads: ${POISE} has no --workers, so one thread only, got ${n}`);
  return n;
});

const tmp = mkdtempSync(path.join(os.tmpdir(), 'poise-bench-proxy-'));
chmodSync(tmp, 0o755); // nginx's workers run as another user and read the bodies from here
const children = new Set<ChildProcess>();
function cleanup(): void {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const s of ['SIGINT', 'SIGTERM'] as const)
  process.once(s, () => {
    cleanup();
    process.exit(130);
  });

function track<C extends ChildProcess>(c: C): C {
  children.add(c);
  c.once('exit', () => children.delete(c));
  return c;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves once 127.0.0.1:port accepts; throws after `ms` or when `child` exits first. */
async function accepting(port: number, child: ChildProcess, what: string, ms = 15_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${what} exited (${child.exitCode ?? child.signalCode}) before listening`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`${what} is not listening on ${port} after ${ms} ms`);
    await sleep(50);
  }
}

/** SIGTERM; a second SIGTERM after 3 s (poise: "exit at once"), SIGKILL after 6 s. */
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const t1 = setTimeout(() => child.kill('SIGTERM'), 3000);
  const t2 = setTimeout(() => child.kill('SIGKILL'), 6000);
  await exited;
  clearTimeout(t1);
  clearTimeout(t2);
}

// ---------------------------------------------------------------- backends

interface Backends {
  kind: 'nginx' | 'node';
  ports: number[];
  /** The process serving every backend (its CPU is read in the slow case). */
  pid: number;
  counts(): Promise<{ connections: number[]; open: number[] }>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

async function nodeBackends(delaysMs: number[]): Promise<Backends> {
  const child = track(
    fork(path.join(HERE, 'proxy-backend.js'), [JSON.stringify({ delaysMs })], {
      execPath: process.execPath,
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    }),
  );
  const ask = <T>(m: string): Promise<T> =>
    new Promise((resolve) => {
      child.once('message', (r) => resolve(r as T));
      child.send(m);
    });
  const { ports } = await new Promise<{ ports: number[] }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { ports: number[] }));
    child.once('exit', (code) => reject(new Error(`node backends exited with ${code}`)));
  });
  return {
    kind: 'node',
    ports,
    pid: child.pid!,
    counts: () => ask('counts'),
    reset: async () => void (await ask('reset')),
    close: async () => {
      child.disconnect();
      await stop(child);
    },
  };
}

async function nginxBackends(): Promise<Backends> {
  const dir = path.join(tmp, 'nginx');
  mkdirSync(path.join(dir, 'www'), { recursive: true });
  mkdirSync(path.join(dir, 'tmp'), { recursive: true });
  writeFileSync(path.join(dir, 'www', '1m'), Buffer.alloc(2 ** 20, 0x61));
  writeFileSync(path.join(dir, 'www', '16m'), Buffer.alloc(2 ** 24, 0x61));
  const ports = [await freePort(), await freePort(), await freePort(), await freePort()];
  const t = path.join(dir, 'tmp');
  const conf = `daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  default_type text/plain;
  client_body_temp_path ${t}/body; proxy_temp_path ${t}/proxy; fastcgi_temp_path ${t}/fastcgi; uwsgi_temp_path ${t}/uwsgi; scgi_temp_path ${t}/scgi;
${ports.map((p) => `  server { listen 127.0.0.1:${p} backlog=4096; root ${dir}/www; location = / { return 200 "ok\\n"; } }`).join('\n')}
}
`;
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const child = track(
    spawn('nginx', ['-e', `${dir}/error.log`, '-p', dir, '-c', path.join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'inherit'] }),
  );
  for (const p of ports) await accepting(p, child, 'nginx');
  const none = async (): Promise<never> => {
    throw new Error('nginx backends keep no counts');
  };
  return { kind: 'nginx', ports, pid: child.pid!, counts: none, reset: none, close: () => stop(child) };
}

// ---------------------------------------------------------------- proxies

interface SystemSpec {
  kind: 'poise' | 'haproxy' | 'bare';
  threads: number;
  /** The index in NODES of the Node binary (poise and bare; 0 for HAProxy). */
  node?: number;
  /** poise --policy, HAProxy `balance`, or bare Node's 'round-robin'. */
  policy: string;
}

/** The young-generation cap of poise's proxy workers (TcpProxy's youngGenerationMb default), given to bare Node's workers too. */
const YOUNG_MB = 4;

const label = (s: SystemSpec): string =>
  `${s.kind} ${s.policy} ×${s.threads}${NODES.length > 1 && s.kind !== 'haproxy' ? ` node ${NODE_VERSIONS[s.node ?? 0]}` : ''}`;

interface Running {
  port: number;
  pid: number;
  stop(): Promise<void>;
}

async function startSystem(s: SystemSpec, ports: number[], extraNodeArgs: string[] = []): Promise<Running> {
  const port = await freePort();
  let child: ChildProcess;
  if (s.kind === 'poise') {
    const args = [
      ...extraNodeArgs,
      POISE,
      'proxy',
      '--listen',
      `127.0.0.1:${port}`,
      ...ports.flatMap((p, i) => ['--backend', `b${i}=127.0.0.1:${p}`]),
      '--policy',
      s.policy,
      '--log-level',
      'error',
      ...(WORKERS_FLAG ? ['--workers', String(s.threads)] : []),
    ];
    child = track(spawn(NODES[s.node ?? 0]!, args, { stdio: ['ignore', 'ignore', 'inherit'] }));
  } else if (s.kind === 'bare') {
    const job = { port, backends: ports, threads: s.threads, youngMb: YOUNG_MB };
    child = track(
      spawn(NODES[s.node ?? 0]!, [...extraNodeArgs, path.join(HERE, 'proxy-bare.js'), JSON.stringify(job)], {
        stdio: ['ignore', 'ignore', 'inherit'],
      }),
    );
  } else {
    const cfg = path.join(tmp, `haproxy-${port}.cfg`);
    writeFileSync(
      cfg,
      `global
  nbthread ${s.threads}
  maxconn 8000
defaults
  mode tcp
  retries 3
  option redispatch
  timeout connect 2s
  timeout client 30s
  timeout server 30s
frontend fe
  bind 127.0.0.1:${port}
  default_backend be
backend be
  balance ${s.policy}
${ports.map((p, i) => `  server b${i} 127.0.0.1:${p}`).join('\n')}
`,
    );
    child = track(spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'ignore', 'inherit'] }));
  }
  await accepting(port, child, label(s));
  await sleep(200); // other workers' listeners, HAProxy's threads
  return { port, pid: child.pid!, stop: () => stop(child) };
}

/** One cell's quietness: load average at its end, the machine's busy share, and the share that was none of ours. */
interface CellQuiet {
  cell: string;
  loadavg: number;
  busyPct: number;
  foreignPct: number;
}
const cells: CellQuiet[] = [];

/** Starts measuring a cell over the given pids (proxy, backends); `end()` records and returns it. */
function quietCell(cell: string, pids: number[]): { end(): CellQuiet } {
  const m0 = machineTicks();
  const own0 = selfTicks() + pids.reduce((a, p) => a + treeTicks(p), 0);
  return {
    end(): CellQuiet {
      const m1 = machineTicks();
      const own = selfTicks() + pids.reduce((a, p) => a + treeTicks(p), 0) - own0;
      const total = Math.max(1, m1.total - m0.total);
      const busy = m1.busy - m0.busy;
      const q = {
        cell,
        loadavg: os.loadavg()[0]!,
        busyPct: (busy / total) * 100,
        foreignPct: (Math.max(0, busy - own) / total) * 100,
      };
      cells.push(q);
      return q;
    },
  };
}

// ---------------------------------------------------------------- load

interface Load {
  path: string;
  connections: number;
  close: boolean;
}

const CASES = {
  short: { path: '/', connections: CONNECTIONS, close: true },
  keepalive: { path: '/', connections: CONNECTIONS, close: false },
  '1MiB': { path: '/1m', connections: CONNECTIONS, close: false },
  '16MiB': { path: '/16m', connections: 16, close: false },
} as const satisfies Record<string, Load>;
type CaseName = keyof typeof CASES;

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] }));
    let out = '';
    c.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    c.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exited with ${code}: ${out}`))));
  });
}

async function load(port: number, l: Load, seconds: number): Promise<LoadResult> {
  if (HAVE.wrk) {
    const out = await run('wrk', [
      '-t1',
      `-c${l.connections}`,
      `-d${Math.max(1, Math.round(seconds))}s`,
      '--latency',
      '--timeout',
      '10s',
      ...(l.close ? ['-H', 'Connection: close'] : []),
      `http://127.0.0.1:${port}${l.path}`,
    ]);
    return checked(parseWrk(out), l);
  }
  const out = await run(process.execPath, [path.join(HERE, 'proxy-client.js'), JSON.stringify({ port, ...l, seconds })]);
  return checked(JSON.parse(out) as LoadResult, l);
}

/** A reply that is not 2xx/3xx is a set-up fault (a body nginx cannot read, a wrong path), never a figure. */
function checked(r: LoadResult, l: Load): LoadResult {
  if (r.non2xx > 0) throw new Error(`GET ${l.path}: ${r.non2xx} of ${r.requests} replies were not 2xx/3xx; the backends are misconfigured`);
  if (r.requests === 0 && r.bytesPerSec === 0) throw new Error(`GET ${l.path}: nothing was read`);
  return r;
}

/**
 * Opens `n` idle client connections through the proxy, 100 at a time (each
 * batch connected before the next, so no accept backlog overflows), waits
 * until the backends hold as many as connected, and divides the RSS growth
 * by that number.
 */
async function idleRss(sys: Running, backends: Backends, n: number): Promise<{ idleRssBytes: number; perConnBytes: number; held: number }> {
  await sleep(500);
  const before = rssBytes(sys.pid);
  const openAtBackends = async (): Promise<number> => (await backends.counts()).open.reduce((a, b) => a + b, 0);
  const base = await openAtBackends();
  const sockets: net.Socket[] = [];
  let connected = 0;
  for (let i = 0; i < n; i += 100) {
    const batch = Array.from({ length: Math.min(100, n - i) }, () => {
      const s = net.connect({ host: '127.0.0.1', port: sys.port });
      sockets.push(s);
      return new Promise<void>((resolve) => {
        s.once('connect', () => {
          connected++;
          resolve();
        });
        s.once('error', () => resolve());
      });
    });
    await Promise.all(batch);
  }
  const until = Date.now() + 30_000;
  let held = (await openAtBackends()) - base;
  while (held < connected && Date.now() < until) {
    await sleep(100);
    held = (await openAtBackends()) - base;
  }
  await sleep(1000);
  const after = rssBytes(sys.pid);
  held = Math.min(connected, (await openAtBackends()) - base);
  for (const s of sockets) s.destroy();
  await sleep(300);
  if (held < n * 0.9) throw new Error(`idle: only ${held} of ${n} connections reached the backends (${connected} connected to the proxy)`);
  return { idleRssBytes: before, perConnBytes: (after - before) / held, held };
}

// ---------------------------------------------------------------- rounds

type Figures = Record<string, number[]>;
/** raw[system label][figure] = one value per round. */
const raw: Record<string, Figures> = {};
const errors: Record<string, number> = {};
function record(sys: SystemSpec, figure: string, v: number): void {
  const f = raw[label(sys)] ?? {};
  raw[label(sys)] = f;
  const list = f[figure] ?? [];
  f[figure] = list;
  list.push(v);
}

const bareSpec = (threads: number, node = 0): SystemSpec => ({ kind: 'bare', threads, policy: 'round-robin', node });
const nodeIndices = NODES.map((_, i) => i);
/** poise and bare Node under every --node, HAProxy once. */
const pairs = (threads: number): SystemSpec[] => [
  ...nodeIndices.map((node): SystemSpec => ({ kind: 'poise', threads, policy: 'p2c:connections', node })),
  ...(HAVE.haproxy ? [{ kind: 'haproxy' as const, threads, policy: 'random(2)' }] : []),
  ...nodeIndices.map((node) => bareSpec(threads, node)),
];
const slowSystems = (threads: number): SystemSpec[] => [
  ...nodeIndices.flatMap((node): SystemSpec[] =>
    ['p2c:latency', 'p2c:connections', 'least-loaded'].map((policy) => ({ kind: 'poise', threads, policy, node })),
  ),
  ...(HAVE.haproxy ? (['leastconn', 'random(2)'] as const).map((policy) => ({ kind: 'haproxy' as const, threads, policy })) : []),
  ...nodeIndices.map((node) => bareSpec(threads, node)),
];
const rotate = <T>(xs: T[], by: number): T[] => xs.map((_, i) => xs[(i + by) % xs.length]!);

const ALL_CASES = [...(Object.keys(CASES) as CaseName[]), 'idle', 'slow'] as const;
const selected = (values.cases ?? ALL_CASES.join(',')).split(',');
for (const c of selected)
  if (!(ALL_CASES as readonly string[]).includes(c))
    throw new Error(`--cases: must list some of ${ALL_CASES.join(', ')}, got ${JSON.stringify(c)}`);
const caseNames = (Object.keys(CASES) as CaseName[]).filter((c) => selected.includes(c));
const IDLE_CASE = selected.includes('idle');
const SLOW_CASE = selected.includes('slow');
const stepsPerRound = THREADS.reduce(
  (a, t) => a + pairs(t).length * (caseNames.length + (IDLE_CASE ? 1 : 0)) + (SLOW_CASE ? slowSystems(t).length : 0),
  0,
);
const totalSteps = stepsPerRound * ROUNDS;
let step = 0;
const t0 = Date.now();
function tick(what: string): void {
  step++;
  const elapsed = (Date.now() - t0) / 1000;
  const eta = step > 1 ? ((elapsed / (step - 1)) * (totalSteps - step + 1)).toFixed(0) : '?';
  progress(`[${step}/${totalSteps}] ${what} (elapsed ${elapsed.toFixed(0)} s, ~${eta} s left)`);
}

console.log(
  `bench:proxy — poise proxy${HAVE.haproxy ? ' vs HAProxy (mode tcp)' : ' alone: haproxy is not on PATH, so there is nothing to compare against'}; ` +
    `${ROUNDS} interleaved round(s) of ${SECONDS} s per case; threads ${THREADS.join(', ')}${WORKERS_FLAG ? '' : ' (this poise proxy has no --workers: one thread only)'}`,
);
console.log(
  `backends: ${HAVE.nginx ? '4 nginx servers (1 worker process)' : '4 Node HTTP servers (nginx is not on PATH)'}; slow/idle cases: 4 Node HTTP servers; load: ${HAVE.wrk ? 'wrk -t1' : 'bench/proxy-client (wrk is not on PATH)'}`,
);
console.log(
  `proxy node ${NODE_VERSIONS.map((v, i) => `${v} (${NODES[i]})`).join(', ')}; bench node ${versions.benchNode}; ${versions.haproxy}`,
);

const loadAtStart = os.loadavg();
if (loadAtStart[0]! > MAX_LOADAVG && values.force !== true) {
  console.error(
    `bench:proxy: the machine is not quiet (1-minute load average ${loadAtStart[0]!.toFixed(2)} > ${MAX_LOADAVG}); ` +
      'figures taken now do not reproduce. Wait for it to settle, or pass --force to run anyway (the load is recorded).',
  );
  process.exit(1);
}
const common = HAVE.nginx ? await nginxBackends() : await nodeBackends([0, 0, 0, 0]);
const slow = await nodeBackends(SLOW_DELAYS);
try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const threads of THREADS) {
      for (const sys of rotate(pairs(threads), r)) {
        if (caseNames.length > 0) {
          const p = await startSystem(sys, common.ports);
          // Before any traffic: what the proxy costs just listening.
          record(sys, 'rss.startMB', rssBytes(p.pid) / 2 ** 20);
          await load(p.port, CASES.short, 1); // warm-up, not counted
          for (const name of caseNames) {
            tick(`round ${r + 1}: ${label(sys)} ${name}`);
            // A 16 MiB reply takes most of a second here: at least 3 s, so that whole replies dominate the bytes read.
            const cpu0 = processTicks(p.pid);
            const quiet = quietCell(`round ${r + 1} ${label(sys)} ${name}`, [p.pid, common.pid]);
            const res = await load(p.port, CASES[name], name === '16MiB' ? Math.max(3, SECONDS) : SECONDS);
            const cpuSeconds = (processTicks(p.pid) - cpu0) / CLK_TCK;
            const q = quiet.end();
            record(sys, `${name}.loadavg`, q.loadavg);
            record(sys, `${name}.busyPct`, q.busyPct);
            record(sys, `${name}.foreignPct`, q.foreignPct);
            errors[label(sys)] = (errors[label(sys)] ?? 0) + res.errors;
            if (name === 'short' || name === 'keepalive') {
              record(sys, `${name}.reqPerSec`, res.reqPerSec);
              record(sys, `${name}.p50Ms`, res.p50Ms);
              record(sys, `${name}.p99Ms`, res.p99Ms);
              record(sys, `${name}.cpuUsPerReq`, (cpuSeconds / res.requests) * 1e6);
            } else {
              record(sys, `${name}.MiBps`, res.bytesPerSec / 2 ** 20);
              record(sys, `${name}.cpuMsPerMiB`, (cpuSeconds / ((res.bytesPerSec * res.seconds) / 2 ** 20)) * 1e3);
            }
          }
          // After the bulk transfers (the last cases run): what the proxy kept.
          if (caseNames.includes('1MiB') || caseNames.includes('16MiB')) record(sys, 'rss.afterBulkMB', rssBytes(p.pid) / 2 ** 20);
          await p.stop();
        }
        if (!IDLE_CASE) continue;
        tick(`round ${r + 1}: ${label(sys)} idle memory`);
        const m = await startSystem(sys, slow.ports);
        const mem = await idleRss(m, slow, IDLE);
        await m.stop();
        record(sys, 'idle.rssMB', mem.idleRssBytes / 1e6);
        record(sys, 'idle.KBperConn', mem.perConnBytes / 1024);
        record(sys, 'idle.held', mem.held);
      }
      for (const sys of SLOW_CASE ? rotate(slowSystems(threads), r) : []) {
        tick(`round ${r + 1}: ${label(sys)} slow backend`);
        const p = await startSystem(sys, slow.ports);
        await load(p.port, CASES.short, 1);
        await slow.reset();
        const cpu0 = processTicks(p.pid);
        const backendCpu0 = processTicks(slow.pid);
        const quiet = quietCell(`round ${r + 1} ${label(sys)} slow`, [p.pid, slow.pid]);
        const res = await load(p.port, { ...CASES.short, connections: SLOW_CONNECTIONS }, SECONDS);
        quiet.end();
        const cpuSeconds = (processTicks(p.pid) - cpu0) / CLK_TCK;
        const backendCpuSeconds = (processTicks(slow.pid) - backendCpu0) / CLK_TCK;
        const { connections } = await slow.counts();
        await p.stop();
        const total = connections.reduce((a, b) => a + b, 0);
        errors[label(sys)] = (errors[label(sys)] ?? 0) + res.errors;
        record(sys, 'slow.reqPerSec', res.reqPerSec);
        record(sys, 'slow.p99Ms', res.p99Ms);
        record(sys, 'slow.sharePct', total === 0 ? Number.NaN : (connections[0]! / total) * 100);
        record(sys, 'slow.cpuUsPerReq', (cpuSeconds / res.requests) * 1e6);
        record(sys, 'slow.backendCpuUsPerReq', (backendCpuSeconds / res.requests) * 1e6);
        /** Little's law: the req/s the connections would reach if only the backends' delays limited them, at this slow share. */
        const share = total === 0 ? 0 : connections[0]! / total;
        record(sys, 'slow.latencyBoundReqPerSec', SLOW_CONNECTIONS / ((share * SLOW_DELAYS[0]! + (1 - share) * SLOW_DELAYS[1]!) / 1000));
      }
    }
  }
  progressDone();
} catch (err) {
  progressDone();
  throw err;
}

// ---------------------------------------------------------------- profile

/** One profiled load: the busiest thread's self time by category, its top frames, and every thread's CPU. */
interface ProfileRun {
  system: string;
  load: 'short' | 'keepalive';
  reqPerSec: number;
  /** The profiled thread: `main` or `worker <threadId>`, the one with the most busy samples. */
  thread: string;
  attribution: Attribution;
  frames: Frame[];
  cpu: string;
  /** Requests served while profiled (one per connection under `short`). */
  requests: number;
  /** CPU of the whole process per request, µs (/proc: user and system time of every thread). */
  processUs: { user: number; sys: number };
  /** CPU of the busiest OS thread (the accepting one) per request, µs. */
  threadUs: { user: number; sys: number };
}
const profiles: ProfileRun[] = [];
if (values.profile) {
  for (const sys of [{ kind: 'poise', threads: 1, policy: 'p2c:connections' }, bareSpec(1)] as SystemSpec[]) {
    for (const loadName of ['short', 'keepalive'] as const) {
      const dir = path.join(tmp, `prof-${sys.kind}-${loadName}`);
      mkdirSync(dir);
      progress(`profile: ${label(sys)} under ${loadName}, node --cpu-prof`);
      const p = await startSystem(sys, common.ports, ['--cpu-prof', '--cpu-prof-dir', dir]);
      await load(p.port, CASES.short, 1); // warm-up, as in the rounds
      const cpu0 = threadTicks(p.pid);
      const times0 = threadTimes(p.pid);
      const t = Date.now();
      const res = await load(p.port, CASES[loadName], SECONDS);
      const cpu1 = threadTicks(p.pid);
      const times1 = threadTimes(p.pid);
      const wall = (Date.now() - t) / 1000;
      const requests = Math.max(1, Math.round(res.reqPerSec * wall));
      const perReqUs = (ticks: number): number => (ticks / CLK_TCK / requests) * 1e6;
      const deltas = [...times1.entries()].map(([tid, b]) => {
        const a = times0.get(tid) ?? { user: 0, sys: 0 };
        return { user: b.user - a.user, sys: b.sys - a.sys };
      });
      const sum = deltas.reduce((x, d) => ({ user: x.user + d.user, sys: x.sys + d.sys }), { user: 0, sys: 0 });
      const busiest = deltas.reduce((x, d) => (d.user + d.sys > x.user + x.sys ? d : x), { user: 0, sys: 0 });
      await p.stop();
      progressDone();
      // Per-thread CPU from /proc (the profile cannot say it: a thread blocked in Atomics.wait samples as running JS).
      const cpu = [...cpu1.entries()]
        .map(([tid, ticks]) => ({ tid, pct: ((ticks - (cpu0.get(tid) ?? 0)) / CLK_TCK / wall) * 100 }))
        .filter((b) => b.pct >= 1)
        .sort((x, y) => y.pct - x.pct)
        .map((b) => `${b.tid === p.pid ? 'main thread' : `thread ${b.tid}`} ${b.pct.toFixed(0)} %`)
        .join(', ');
      // CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile: thread 0 is the main thread, the workers
      // have other ids (and a thread blocked in Atomics.wait samples as busy JS), so the accepting
      // thread is the one with the most samples in socket work (net/stream internals and poise's code).
      const runs = readdirSync(dir)
        .filter((f) => f.endsWith('.cpuprofile'))
        .map((f) => {
          const prof = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as CpuProfile;
          const a = attribute(prof);
          const busy = a.samples * (1 - a.pct.idle / 100);
          return { tid: Number(f.split('.').at(-3)), prof, a, busy: (busy * (a.pct['net/stream'] + a.pct.poise)) / 100 };
        })
        .sort((x, y) => y.busy - x.busy);
      const top = runs[0];
      if (top === undefined) {
        // Reported, not thrown: the rounds' figures are still written.
        console.error(`profile: ${label(sys)} under ${loadName} wrote no .cpuprofile (did it exit cleanly?)`);
        continue;
      }
      profiles.push({
        system: label(sys),
        load: loadName,
        reqPerSec: res.reqPerSec,
        thread: top.tid === 0 ? 'main' : `worker ${top.tid}`,
        attribution: top.a,
        frames: topFrames(top.prof, 12),
        cpu,
        requests,
        processUs: { user: perReqUs(sum.user), sys: perReqUs(sum.sys) },
        threadUs: { user: perReqUs(busiest.user), sys: perReqUs(busiest.sys) },
      });
    }
  }
}
await slow.close();
await common.close();

// ---------------------------------------------------------------- report

const fig = (sys: SystemSpec, figure: string): ReturnType<typeof summarize> | undefined => {
  const v = raw[label(sys)]?.[figure];
  return v === undefined ? undefined : summarize(v);
};
const comparisons: Comparison[] = [];
const add = (
  scenario: string,
  metric: string,
  unit: string,
  better: 'higher' | 'lower',
  poiseSys: SystemSpec,
  hapSys: SystemSpec | undefined,
  figure: string,
  target?: Target,
): void => {
  const poise = fig(poiseSys, figure);
  if (poise === undefined) return;
  const haproxy = hapSys === undefined ? undefined : fig(hapSys, figure);
  const bare = fig(bareSpec(poiseSys.threads, poiseSys.node), figure);
  comparisons.push({
    scenario: NODES.length > 1 ? `${scenario} (node ${NODE_VERSIONS[poiseSys.node ?? 0]})` : scenario,
    metric,
    unit,
    threads: poiseSys.threads,
    better,
    poise,
    ...(haproxy === undefined ? {} : { haproxy }),
    ...(bare === undefined ? {} : { bare }),
    ...(target === undefined ? {} : { target }),
  });
};
for (const [t, node] of THREADS.flatMap((t) => nodeIndices.map((n) => [t, n] as const))) {
  const ps: SystemSpec = { kind: 'poise', threads: t, policy: 'p2c:connections', node };
  const hs = pairs(t).find((s) => s.kind === 'haproxy');
  add('short', 'req/s', 'req/s', 'higher', ps, hs, 'short.reqPerSec', { kind: 'ratio', op: '>=', value: 0.8 });
  add('short', 'p50', 'ms', 'lower', ps, hs, 'short.p50Ms');
  add('short', 'p99', 'ms', 'lower', ps, hs, 'short.p99Ms');
  add('short', 'proxy CPU per request', 'µs', 'lower', ps, hs, 'short.cpuUsPerReq');
  add('keep-alive', 'req/s', 'req/s', 'higher', ps, hs, 'keepalive.reqPerSec', { kind: 'ratio', op: '>=', value: 0.9 });
  add('keep-alive', 'p99', 'ms', 'lower', ps, hs, 'keepalive.p99Ms');
  add('keep-alive', 'proxy CPU per request', 'µs', 'lower', ps, hs, 'keepalive.cpuUsPerReq');
  add('1 MiB', 'throughput', 'MiB/s', 'higher', ps, hs, '1MiB.MiBps', { kind: 'ratio', op: '>=', value: 0.8 });
  add('1 MiB', 'proxy CPU per MiB', 'ms', 'lower', ps, hs, '1MiB.cpuMsPerMiB');
  add('16 MiB', 'throughput', 'MiB/s', 'higher', ps, hs, '16MiB.MiBps', { kind: 'ratio', op: '>=', value: 0.8 });
  add('16 MiB', 'proxy CPU per MiB', 'ms', 'lower', ps, hs, '16MiB.cpuMsPerMiB');
  add('idle', 'per connection', 'KB', 'lower', ps, hs, 'idle.KBperConn', { kind: 'absolute', op: '<=', value: 6 });
  add('idle', 'RSS before', 'MB', 'lower', ps, hs, 'idle.rssMB');
  // The issue's memory targets are for 2 workers.
  add(
    'memory',
    'RSS listening, before traffic',
    'MiB',
    'lower',
    ps,
    hs,
    'rss.startMB',
    t === 2 ? { kind: 'absolute', op: '<=', value: 64 } : undefined,
  );
  add(
    'memory',
    'RSS after the bulk transfers',
    'MiB',
    'lower',
    ps,
    hs,
    'rss.afterBulkMB',
    t === 2 ? { kind: 'absolute', op: '<=', value: 128 } : undefined,
  );
  const leastconn: SystemSpec | undefined = HAVE.haproxy ? { kind: 'haproxy', threads: t, policy: 'leastconn' } : undefined;
  for (const policy of ['p2c:latency', 'p2c:connections', 'least-loaded']) {
    const s: SystemSpec = { kind: 'poise', threads: t, policy, node };
    add(`slow ${policy} vs leastconn`, 'req/s', 'req/s', 'higher', s, leastconn, 'slow.reqPerSec', { kind: 'ratio', op: '>=', value: 1 });
    add(`slow ${policy} vs leastconn`, 'p99', 'ms', 'lower', s, leastconn, 'slow.p99Ms');
    add(`slow ${policy} vs leastconn`, 'slow share', '%', 'lower', s, leastconn, 'slow.sharePct', { kind: 'ratio', op: '<=', value: 1 });
    add(`slow ${policy} vs leastconn`, 'proxy CPU per request', 'µs', 'lower', s, leastconn, 'slow.cpuUsPerReq');
  }
}

console.log(
  `\nmedians of ${ROUNDS} round(s), ± spread = (max − min) / median; load average ${loadAtStart[0]!.toFixed(1)} at start, ${os.loadavg()[0]!.toFixed(1)} at end on ${os.cpus().length} cores`,
);
console.log(formatTable(ratioRows(comparisons)));
const slowRows = THREADS.flatMap((t) =>
  (SLOW_CASE ? slowSystems(t) : []).map((s) => ({
    system: label(s),
    'req/s': fig(s, 'slow.reqPerSec')!.median,
    'p99 ms': fig(s, 'slow.p99Ms')!.median,
    'slow share %': fig(s, 'slow.sharePct')!.median,
    'proxy CPU µs/req': fig(s, 'slow.cpuUsPerReq')!.median,
    'backends CPU µs/req': fig(s, 'slow.backendCpuUsPerReq')!.median,
    'latency-bound req/s': fig(s, 'slow.latencyBoundReqPerSec')!.median,
    errors: errors[label(s)] ?? 0,
  })),
);
if (SLOW_CASE) {
  console.log(
    `\nslow backend (b0 ${SLOW_DELAYS[0]} ms, others ${SLOW_DELAYS[1]} ms; short connections, ${SLOW_CONNECTIONS} at once), medians; ` +
      'latency-bound req/s = connections / (mean backend delay at that slow share): what the backends alone would allow',
  );
  console.log(formatTable(slowRows));
}
const noisy = cells.filter((c) => c.foreignPct > MAX_FOREIGN_PCT);
console.log(
  `\nquietness per cell (load average at its end, machine busy %, foreign % = busy time none of ours): ` +
    `${cells.length} cells, load average ${Math.min(...cells.map((c) => c.loadavg)).toFixed(2)}–${Math.max(...cells.map((c) => c.loadavg)).toFixed(2)}, ` +
    `foreign share max ${Math.max(0, ...cells.map((c) => c.foreignPct)).toFixed(1)} %; ${noisy.length} above ${MAX_FOREIGN_PCT} %`,
);
if (noisy.length > 0)
  console.log(formatTable(noisy.map((c) => ({ cell: c.cell, loadavg: c.loadavg, 'busy %': c.busyPct, 'foreign %': c.foreignPct }))));
const errorRuns = Object.entries(errors).filter(([, n]) => n > 0);
if (errorRuns.length > 0) console.log(`\nload-generator errors (all rounds): ${errorRuns.map(([k, n]) => `${k}: ${n}`).join('; ')}`);
for (const pr of profiles) {
  const a = pr.attribution;
  const folders = Object.entries(a.poiseByFolder)
    .sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `${k} ${v.toFixed(1)} %`)
    .join(', ');
  console.log(
    `\nprofile: ${pr.system} under ${pr.load} (${pr.reqPerSec.toFixed(0)} req/s while profiled; ${pr.thread} thread; CPU: ${pr.cpu}); ` +
      `idle ${a.pct.idle.toFixed(0)} % of ${a.samples} samples; of the busy ones: poise ${a.pct.poise.toFixed(1)} % (${folders || 'none'}), ` +
      `net/stream ${a.pct['net/stream'].toFixed(1)} %, other Node ${a.pct['node other'].toFixed(1)} %, dependencies ${a.pct.dependencies.toFixed(1)} %, ` +
      `GC ${a.pct.gc.toFixed(1)} %, (program) ${a.pct.program.toFixed(1)} %`,
  );
  console.log(formatTable(pr.frames.map((f) => ({ 'self % (all samples)': f.selfPct, frame: f.name }))));
}

// The attribution table (issue 29): per short connection and per keep-alive request, where the
// accepting thread's CPU goes, poise beside bare Node. Kernel time is /proc's system time of that
// thread; its user time is split by the profile's busy self time per category (a frame's share of
// the busy samples; a syscall's kernel time is in "kernel", so this split is of user time only and
// approximate where a frame's samples include its syscalls). "V8/native" is the profile's
// (program): V8's runtime and IC misses, libuv, epoll returns.
if (profiles.length > 0) {
  const us = (pr: ProfileRun, cat: keyof Attribution['pct']): number => (pr.attribution.pct[cat] / 100) * pr.threadUs.user;
  const rowOf = (pr: ProfileRun): Record<string, unknown> => ({
    system: pr.system,
    load: pr.load === 'short' ? 'per short connection' : 'per keep-alive request',
    'req/s': Math.round(pr.reqPerSec),
    'process µs': pr.processUs.user + pr.processUs.sys,
    'thread µs': pr.threadUs.user + pr.threadUs.sys,
    'kernel µs': pr.threadUs.sys,
    'poise JS µs': us(pr, 'poise'),
    'net/stream µs': us(pr, 'net/stream'),
    'other Node µs': us(pr, 'node other'),
    'deps µs': us(pr, 'dependencies'),
    'GC µs': us(pr, 'gc'),
    'V8/native µs': us(pr, 'program'),
    'idle % (samples)': pr.attribution.pct.idle,
  });
  const rows = profiles.map(rowOf);
  // poise / bare Node per load, for every µs column.
  for (const loadName of ['short', 'keepalive'] as const) {
    const p = profiles.find((x) => x.load === loadName && x.system.startsWith('poise'));
    const b = profiles.find((x) => x.load === loadName && x.system.startsWith('bare'));
    if (p === undefined || b === undefined) continue;
    const rp = rowOf(p);
    const rb = rowOf(b);
    const ratio: Record<string, unknown> = { system: 'poise / bare', load: rp.load };
    for (const k of Object.keys(rp))
      if (k.endsWith('µs') || k === 'req/s') ratio[k] = (rb[k] as number) === 0 ? undefined : (rp[k] as number) / (rb[k] as number);
    rows.push(ratio);
  }
  const table = formatTable(rows);
  const quietness = `load average ${os.loadavg()[0]!.toFixed(2)} at the end; ${noisy.length} of ${cells.length} cells above ${MAX_FOREIGN_PCT} % foreign`;
  console.log(`
attribution (CPU µs per request of the accepting thread; ${quietness}):\n${table}`);
  const mdRows = rows.map((r) =>
    Object.values(r).map((v) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : String(v ?? ''))),
  );
  const md = [
    `# bench:proxy --profile attribution (${new Date().toISOString()}, ${quick ? 'quick, ' : ''}${quietness})`,
    '',
    `${SECONDS} s per load under node --cpu-prof (${NODE_VERSIONS[0]}), ${CONNECTIONS} connections; µs of CPU per request.`,
    '',
    `| ${Object.keys(rows[0]!).join(' | ')} |`,
    `|${Object.keys(rows[0]!)
      .map(() => '---')
      .join('|')}|`,
    ...mdRows.map((cells) => `| ${cells.join(' | ')} |`),
    '',
  ].join('\n');
  const mdFile = path.join(REPO, 'bench', 'results', `proxy-profile${values.label === undefined ? '' : `-${values.label}`}.md`);
  mkdirSync(path.dirname(mdFile), { recursive: true });
  writeFileSync(mdFile, md);
  console.log(`attribution table written to ${path.relative(REPO, mdFile)} (not quiet unless the line above says so)`);
}

if (noisy.length > 0 && values.force !== true) {
  console.log(
    `\nresults NOT written: ${noisy.length} cell(s) had more than ${MAX_FOREIGN_PCT} % of the machine busy with something else. ` +
      'Rerun on a quiet machine, or pass --force to keep these figures (the cells are recorded with them).',
  );
  process.exit(2);
}
const file = writeResults(values.label === undefined ? 'proxy' : `proxy-${values.label}`, {
  versions,
  config: {
    rounds: ROUNDS,
    secondsPerCase: SECONDS,
    threads: THREADS,
    workersFlag: WORKERS_FLAG,
    backends: common.kind === 'nginx' ? '4 nginx servers, 1 worker process' : '4 Node HTTP servers (bench/proxy-backend)',
    slowAndIdleBackends: `4 Node HTTP servers, delays ${SLOW_DELAYS.join('/')} ms (slow) and the same servers for idle`,
    slowConnections: SLOW_CONNECTIONS,
    ...(values.note === undefined ? {} : { note: values.note }),
    bare: `bench/proxy-bare: net.createServer, round-robin, setNoDelay both sides, pipe both ways; the same worker-thread shape as poise (${YOUNG_MB} MB young generation)`,
    loadGenerator: HAVE.wrk ? 'wrk -t1 --timeout 10s' : 'bench/proxy-client (closed loop)',
    connections: Object.fromEntries(caseNames.map((n) => [n, CASES[n].connections])),
    idleConnections: IDLE,
    /** 1/5/15-minute load averages: this machine may be shared, and the absolute figures move with it (ratios less so, rounds being interleaved). */
    loadAverage: { start: loadAtStart, end: os.loadavg() },
    forced: values.force === true,
    haproxy: HAVE.haproxy
      ? 'mode tcp, retries 3, option redispatch, timeout connect 2s, client/server 30s, maxconn 8000; balance random(2) (vs p2c:connections) and leastconn'
      : 'not installed',
  },
  comparisons: comparisons.map((c) => ({
    ...c,
    ratio: c.haproxy === undefined ? null : c.poise.median / c.haproxy.median,
    bareRatio: c.bare === undefined ? null : c.poise.median / c.bare.median,
  })),
  slow: slowRows,
  /** Every cell's load average, machine busy share and foreign share (see the header comment). */
  cells,
  errors,
  raw,
  ...(profiles.length === 0 ? {} : { profiles }),
});
console.log(`\nresults: ${file}`);
