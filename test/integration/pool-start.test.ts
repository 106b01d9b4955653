// A worker pool's start-up as the embedding process lives it, in child
// processes running dist/: a worker that cannot start (no such task module,
// a module that throws, no attribution row left) must not kill the process
// through piscina's 'error' event; every run() rejects with a PoiseError
// naming the reason. And the logging defaults: a process that passes no
// logger sees warnings only, in the owner and in the pool's workers alike.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const fixture = (name: string): string => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));

/** Runs `node <fixture> ...args` with POISE_LOG_LEVEL as given (removed when undefined). */
function node(
  script: string,
  args: string[],
  logLevelEnv: string | undefined,
): Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env['POISE_LOG_LEVEL'];
  if (logLevelEnv !== undefined) env['POISE_LOG_LEVEL'] = logLevelEnv;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fixture(script), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

const RUNS = 50; // keep in step with the test titles

describe('a pool whose workers cannot start', () => {
  it.each([
    [
      'missing',
      'NotFound',
      'options.filename',
      /^options\.filename: the task module file:\/\/\/.*\/no-such-task\.mjs does not exist: Cannot find module/,
    ],
    [
      'broken',
      'InvalidConfig',
      'options.filename',
      /^options\.filename: the task module file:\/\/\/.*\/pool-broken-task\.mjs failed to load: this task module is broken on purpose$/,
    ],
    [
      'rows',
      'CapacityExhausted',
      null,
      /^createWorkerPool: a worker could not attach its router: LoadTable: all 4 thread rows are taken \(raise options\.maxThreads\)$/,
    ],
  ])(
    '%s: the process survives once every worker finished starting, and each of 50 runs rejects with PoiseError %s',
    async (kind, code, field, message) => {
      const r = await node('pool-start-failure.mjs', [kind, String(RUNS)], 'silent');
      expect({ code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ code: 0, signal: null, stderr: '' });
      const lines = r.stdout.trim().split('\n');
      expect(lines.at(-1)).toBe('closed');
      const results = lines
        .slice(0, -1)
        .map((l) => JSON.parse(l) as { poise: boolean; code: string; field: string | null; message: string });
      expect(results).toHaveLength(RUNS);
      for (const res of results) {
        expect({ poise: res.poise, code: res.code, field: res.field }).toEqual({ poise: true, code, field });
        expect(res.message).toMatch(message);
      }
    },
  );
});

describe('logging defaults of an embedding process that passes no logger', () => {
  /** The `msg` of every JSON line on stderr, with its level. */
  const lines = (stderr: string): [number, string][] =>
    stderr
      .trim()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        const rec = JSON.parse(l) as { level: number; msg: string };
        return [rec.level, rec.msg];
      });
  const EJECTED: [number, string] = [40, 'poise: backend ejected after consecutive failures'];

  it('without POISE_LOG_LEVEL: no info line (the membership change is silent), the worker router still warns', async () => {
    const r = await node('pool-log-level.mjs', ['-'], undefined);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('failed once\n');
    expect(lines(r.stderr)).toEqual([EJECTED]);
  });

  it('createWorkerPool({ logLevel: "error" }) quiets the workers routers', async () => {
    const r = await node('pool-log-level.mjs', ['error'], undefined);
    expect(r.code).toBe(0);
    expect(lines(r.stderr)).toEqual([]);
  });

  it('POISE_LOG_LEVEL=info raises every default logger: the owner logs the membership change, the worker its warning', async () => {
    const r = await node('pool-log-level.mjs', ['-'], 'info');
    expect(r.code).toBe(0);
    expect(lines(r.stderr)).toEqual([[30, 'poise: health configuration applied'], [30, 'poise: membership applied'], EJECTED]);
  });
});
