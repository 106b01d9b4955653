/**
 * The whole path: `poise members` (compiled CLI) → Redis → two separate
 * Balancer processes (test/fixtures/membership-node.mjs), each with a pool of
 * 2 worker threads routing with Maglev. Then Redis is killed and restarted
 * with its data while the processes keep running. Requires `dist/` (built by
 * `npm test`'s pretest).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/log-capture.js';
import { runCli, type CliResult } from '../helpers/cli.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NODE = path.join(root, 'test/fixtures/membership-node.mjs');

interface Status {
  pid: number;
  balancer: number;
  source: number;
  workers: number[];
}

class BalancerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly #waiters: ((line: string) => void)[] = [];
  readonly ready: Promise<void>;
  constructor(url: string, cluster: string) {
    this.child = spawn(process.execPath, [NODE, url, cluster], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, POISE_LOG_LEVEL: 'warn' } });
    this.child.stderr.resume();
    const lines = createInterface({ input: this.child.stdout });
    lines.on('line', (line) => this.#waiters.shift()?.(line));
    this.ready = new Promise((resolve) => this.#waiters.push(() => resolve()));
  }
  status(): Promise<Status> {
    return new Promise((resolve) => {
      this.#waiters.push((line) => resolve(JSON.parse(line) as Status));
      this.child.stdin.write('status\n');
    });
  }
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.stdin.write('exit\n');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

function members(url: string, ...args: string[]): Promise<CliResult> {
  return runCli(['members', ...args, '--redis', url, '--cluster', 'fleet']);
}

async function converged(procs: BalancerProcess[], version: number, what: string): Promise<Status[]> {
  let last: Status[] = [];
  await until(
    async () => {
      last = await Promise.all(procs.map((p) => p.status()));
      return last.every((s) => s.balancer === version && s.workers.every((w) => w === version));
    },
    `${what} (last: ${JSON.stringify(last)})`,
    30_000,
  );
  return last;
}

describe('membership across two Balancer processes', () => {
  let redis: TestRedis;
  const procs: BalancerProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis({ persist: true });
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop().catch(() => p.child.kill('SIGKILL'))));
    await redis?.stop();
  });

  it('a CLI change reaches every worker of both processes; a Redis crash + restart with data heals on its own', async () => {
    const add = async (id: string, port: number): Promise<number> => {
      const r = await members(redis.url, 'add', id, `127.0.0.1:${port}`);
      expect(r.code, r.stderr).toBe(0);
      return Number(r.stdout);
    };
    expect(await add('a', 7001)).toBe(1);
    procs.push(new BalancerProcess(redis.url, 'fleet'), new BalancerProcess(redis.url, 'fleet'));
    await Promise.all(procs.map((p) => p.ready));
    await converged(procs, 1, 'both processes at version 1');

    expect(await add('b', 7002)).toBe(2);
    const drained = await members(redis.url, 'drain', 'a');
    expect(drained.stdout).toBe('3\n');
    const at3 = await converged(procs, 3, 'every worker of both processes at version 3');
    expect(new Set(at3.map((s) => s.pid)).size).toBe(2);

    // Crash Redis while the readers run; restart it on the same port with its data.
    await redis.kill();
    const down = await members(redis.url, 'add', 'c', '127.0.0.1:7003');
    expect(down.code).toBe(1); // runtime failure: Redis unreachable
    await redis.restart();
    expect(await add('c', 7003)).toBe(4);
    expect(await add('d', 7004)).toBe(5);
    const w = await members(redis.url, 'weight', 'b', '3');
    expect(w.stdout).toBe('6\n');
    const final = await converged(procs, 6, 'every worker of both processes at version 6 after the restart');
    for (const s of final) expect(s.source).toBe(6);
    const shown = JSON.parse((await members(redis.url, 'show')).stdout) as { version: number; document: { backends: { id: string }[] } };
    expect(shown.version).toBe(6);
    expect(shown.document.backends.map((b) => b.id)).toEqual(['a', 'b', 'c', 'd']);
    // The same processes throughout: no reader restart.
    expect(final.map((s) => s.pid).sort()).toEqual(at3.map((s) => s.pid).sort());
  });
});
