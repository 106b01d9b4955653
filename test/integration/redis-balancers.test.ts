/**
 * The whole path: `poise members` (compiled CLI) → Redis → two separate
 * Balancer processes (test/fixtures/membership-node.mjs), each with a pool of
 * 2 worker threads routing with Maglev. Then Redis is killed and restarted
 * with its data while the processes keep running; and killed and restarted
 * EMPTY, re-seeded from version 1 with another backend set, which both
 * processes must adopt (a new lineage). Requires `dist/` (built by `npm
 * test`'s pretest).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';
import { runCli, type CliResult } from '../helpers/cli.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NODE = path.join(root, 'test/fixtures/membership-node.mjs');

interface Status {
  pid: number;
  balancer: number;
  source: number;
  lineage: string | null;
  ids: string[];
  workers: number[];
}

class BalancerProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly #waiters: ((line: string) => void)[] = [];
  readonly ready: Promise<void>;
  /** Everything the process logged (pino JSON lines at warn and above). */
  stderr = '';
  constructor(url: string, cluster: string) {
    this.child = spawn(process.execPath, [NODE, url, cluster], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, POISE_LOG_LEVEL: 'warn' },
    });
    this.child.stderr.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
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

  /** The log records whose message contains `text`. */
  logged(text: string): Record<string, unknown>[] {
    return this.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((r) => String(r['msg']).includes(text));
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
    const shown = JSON.parse((await members(redis.url, 'show', '--json')).stdout) as {
      version: number;
      document: { backends: { id: string }[] };
    };
    expect(shown.version).toBe(6);
    expect(shown.document.backends.map((b) => b.id)).toEqual(['a', 'b', 'c', 'd']);
    // The same processes throughout: no reader restart.
    expect(final.map((s) => s.pid).sort()).toEqual(at3.map((s) => s.pid).sort());
  });
});

describe('Redis restarted empty and re-seeded: a new lineage that every reader process adopts', () => {
  let redis: TestRedis;
  const procs: BalancerProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis(); // no persistence: a restart comes back empty
  });
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop().catch(() => p.child.kill('SIGKILL'))));
    await redis?.stop();
  });

  const lineageOf = async (): Promise<string> => {
    const shown = await members(redis.url, 'show', '--json');
    expect(shown.code, shown.stderr).toBe(0);
    const { lineage } = JSON.parse(shown.stdout) as { lineage: string };
    expect(lineage).toMatch(/^[0-9a-f]{32}$/);
    return lineage;
  };

  it('readers that held v3 adopt the new v1 (another backend set) and log one warn line naming both lineages', async () => {
    for (const [i, id] of ['a', 'b', 'c'].entries())
      expect((await members(redis.url, 'add', id, `127.0.0.1:${7101 + i}`)).stdout).toBe(`${i + 1}\n`);
    const before = await lineageOf();
    procs.push(new BalancerProcess(redis.url, 'fleet'), new BalancerProcess(redis.url, 'fleet'));
    await Promise.all(procs.map((p) => p.ready));
    const at3 = await converged(procs, 3, 'both processes at version 3');
    for (const s of at3) expect([s.lineage, s.ids]).toEqual([before, ['a', 'b', 'c']]);

    // Redis loses everything: killed, restarted empty on the same port.
    await redis.kill();
    await redis.restart();
    expect((await members(redis.url, 'show')).code).toBe(4);
    // A publisher seeds version 1 with a different backend set.
    const seed = await runCli(
      ['members', 'apply', '-', '--redis', redis.url, '--cluster', 'fleet'],
      JSON.stringify({
        cluster: 'fleet',
        backends: [
          { id: 'x', address: '127.0.0.1:7201' },
          { id: 'y', address: '127.0.0.1:7202' },
        ],
      }),
    );
    expect(seed).toMatchObject({ code: 0, stdout: '1\n' });
    const after = await lineageOf();
    expect(after).not.toBe(before);

    let last: Status[] = [];
    await until(
      async () => {
        last = await Promise.all(procs.map((p) => p.status()));
        return last.every(
          (s) => s.balancer === 1 && s.source === 1 && s.lineage === after && s.ids.join() === 'x,y' && s.workers.every((w) => w === 1),
        );
      },
      `both processes on lineage ${after} version 1 with backends x, y (last: ${JSON.stringify(last)})`,
      30_000,
    );
    // Same processes (never restarted), one lineage warning each, naming both lineages.
    expect(last.map((s) => s.pid).sort()).toEqual(at3.map((s) => s.pid).sort());
    for (const p of procs) {
      const warned = p.logged('membership lineage changed');
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ level: 40, heldLineage: before, heldVersion: 3, lineage: after, version: 1 });
    }
    // The new lineage goes on normally: v2 reaches both.
    expect((await members(redis.url, 'add', 'z', '127.0.0.1:7203')).stdout).toBe('2\n');
    const at2 = await converged(procs, 2, 'both processes at version 2 of the new lineage');
    for (const s of at2) expect([s.lineage, s.ids]).toEqual([after, ['x', 'y', 'z']]);
    expect(await lineageOf()).toBe(after);
  });
});
