/**
 * bench/clock: what the shared clock costs an idle process, and a read.
 *
 *   npm run bench:clock [-- --quick] [--seconds N] [--settle N] [--workers N] [--node PATH]
 *
 * - idle: starts `poise proxy --workers N` (default 2) over a loopback
 *   backend, lets it settle (`--settle` seconds, default 12; 2 with
 *   --quick: V8's memory reducer collects a few seconds after start-up's
 *   allocations, ~8 s here, and a window that includes it measures
 *   start-up, not idling), then reads the CPU time of every thread
 *   of the proxy process from /proc over `--seconds` (default 10; 2 with
 *   --quick) with no traffic: the whole process's CPU as % of one core, and
 *   the busiest thread's. bench/proxy-bare (the same threads, no poise)
 *   beside it is the floor. Before the clock slept when unread, its ticker
 *   thread alone cost 1.7–2.3 % of a core here.
 * - read: ns per read of the shared clock in this thread while reads keep
 *   the ticker awake (one plain load), beside one `Atomics.load` and
 *   `performance.now()`.
 *
 * Prints a table; writes bench/results/clock.json unless --quick.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { integerFlag, parseFlags } from '../src/cli/args.js';
import { clockReader, processClockBuffer } from '../src/runtime/clock.js';
import { formatTable, writeResults } from './lib/harness.js';
import { CLK_TCK, threadTicks } from './lib/proc.js';
import { freePort } from './lib/redis.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, ...(HERE.includes(`${path.sep}dist${path.sep}`) ? ['..', '..'] : ['..']));
const { values } = parseFlags(process.argv.slice(2), {
  quick: { type: 'boolean' },
  seconds: { type: 'string' },
  settle: { type: 'string' },
  workers: { type: 'string' },
  node: { type: 'string' },
});
const quick = values.quick === true;
const SECONDS = integerFlag('--seconds', values.seconds, 1, 600) ?? (quick ? 2 : 10);
const SETTLE = integerFlag('--settle', values.settle, 0, 600) ?? (quick ? 2 : 12);
const WORKERS = integerFlag('--workers', values.workers, 0, 16) ?? 2;
const NODE = values.node ?? process.execPath;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Waits for `line` on the child's stdout or stderr. */
function readyLine(child: ChildProcess, line: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const on = (d: Buffer): void => {
      seen += d.toString();
      if (line.test(seen)) resolve();
    };
    child.stdout?.on('data', on);
    child.stderr?.on('data', on);
    child.once('exit', (code) => reject(new Error(`exited with ${code} before ${line}: ${seen.slice(-400)}`)));
  });
}

async function idleCpu(kind: 'poise' | 'bare', backendPort: number): Promise<Record<string, unknown>> {
  const listen = await freePort();
  const args =
    kind === 'poise'
      ? [
          path.join(REPO, 'dist', 'src', 'cli', 'main.js'),
          'proxy',
          '--listen',
          `127.0.0.1:${listen}`,
          '--backend',
          `b0=127.0.0.1:${backendPort}`,
          '--workers',
          String(WORKERS),
          '--log-level',
          'info',
        ]
      : [path.join(HERE, 'proxy-bare.js'), JSON.stringify({ port: 0, backends: [backendPort], threads: Math.max(1, WORKERS), youngMb: 4 })];
  const child = spawn(NODE, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    await readyLine(child, kind === 'poise' ? /proxy (ready|listening)/ : /proxy-bare listening/);
    await sleep(SETTLE * 1000); // start-up work (module loading, first GCs, the memory reducer's collections) settles
    const t0 = threadTicks(child.pid!);
    const start = performance.now();
    await sleep(SECONDS * 1000);
    const t1 = threadTicks(child.pid!);
    const wall = (performance.now() - start) / 1000;
    const per = [...t1.entries()].map(([tid, t]) => (t - (t0.get(tid) ?? 0)) / CLK_TCK / wall);
    const total = per.reduce((a, b) => a + b, 0);
    return {
      system: `${kind} ×${WORKERS}`,
      'idle CPU % of a core': total * 100,
      'busiest thread %': Math.max(0, ...per) * 100,
      threads: t1.size,
      seconds: Math.round(wall * 10) / 10,
    };
  } finally {
    child.kill('SIGKILL');
  }
}

function readCost(): Record<string, unknown>[] {
  const buffer = processClockBuffer();
  const now = clockReader(buffer);
  const words = new Int32Array(buffer);
  const n = quick ? 2_000_000 : 20_000_000;
  const time = (f: () => number): number => {
    let sink = 0;
    for (let i = 0; i < n / 10; i++) sink += f(); // warm-up
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) sink += f();
    const ns = Number(process.hrtime.bigint() - t) / n;
    if (sink === -1) console.log(sink);
    return ns;
  };
  return [
    { read: 'shared clock (ticker awake)', 'ns per read': time(now) },
    { read: 'Atomics.load of one word', 'ns per read': time(() => Atomics.load(words, 0)) },
    { read: 'performance.now()', 'ns per read': time(() => performance.now()) },
  ];
}

const backend = net.createServer((s) => s.pipe(s));
await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
const backendPort = (backend.address() as net.AddressInfo).port;
const idle = [await idleCpu('poise', backendPort), await idleCpu('bare', backendPort)];
backend.close();
const reads = readCost();
console.log(`bench:clock — ${NODE}, ${SECONDS} s idle per system${quick ? ' (quick: not written)' : ''}`);
console.log(formatTable(idle));
console.log(formatTable(reads));
const loadAverage = os.loadavg();
console.log(`load average ${loadAverage.map((x) => x.toFixed(2)).join(' ')} at the end`);
if (!quick)
  console.log(
    `results: ${writeResults('clock', { node: NODE, seconds: SECONDS, settleSeconds: SETTLE, workers: WORKERS, loadAverage, idle, reads })}`,
  );
process.exit(0);
