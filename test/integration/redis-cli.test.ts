/**
 * `poise members` end to end: the compiled CLI (dist/, built by `npm test`'s
 * pretest) against a real redis-server on a free port.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { command } from '../../src/cli/members.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/log-capture.js';
import { CLI, runCli, type CliResult } from '../helpers/cli.js';


const poise = runCli;

describe('poise members (CLI)', () => {
  let redis: TestRedis;
  let dir: string;
  const m = (sub: string, ...rest: string[]) => poise(['members', sub, '--redis', redis.url, '--cluster', 'cli', ...rest]);
  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(path.join(os.tmpdir(), 'poise-cli-'));
  });
  afterAll(async () => {
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `poise members ...` in this process (fast), capturing stdout and stderr. */
  async function inProcess(args: string[]): Promise<CliResult> {
    let stdout = '';
    let stderr = '';
    const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true));
    const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true));
    try {
      const code = await command.run(args);
      return { code, stdout, stderr };
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  }

  it('every subcommand answers --help with exit 0; the binary lists the command', async () => {
    for (const sub of ['apply', 'add', 'remove', 'drain', 'undrain', 'weight', 'show', 'watch']) {
      const r = await inProcess([sub, '--help']);
      expect(r.code, sub).toBe(0);
      expect(r.stdout).toContain(`usage: poise members ${sub}`);
      expect(r.stdout).toContain('Exit codes:');
    }
    expect((await inProcess(['--help'])).stdout).toContain('watch    [--count N] [--json]');
    const top = await poise(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^\s+members\s+operate the Redis membership control plane/m);
  });

  it('usage errors exit 2 and name the flag', async () => {
    expect(await inProcess(['frobnicate'])).toMatchObject({ code: 2 });
    const noRedis = await inProcess(['show', '--cluster', 'x']);
    expect(noRedis.code).toBe(2);
    expect(noRedis.stderr).toContain('--redis: required (or set POISE_REDIS_URL)');
    const badUrl = await inProcess(['show', '--cluster', 'x', '--redis', 'http://x']);
    expect(badUrl.stderr).toContain('--redis: must be a redis:// or rediss:// URL, got "http://x"');
    const badFlag = await inProcess(['add', 'a', '127.0.0.1:1', '--redis', redis.url, '--cluster', 'cli', '--wieght', '2']);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain('unknown flag --wieght');
    const badCount = await inProcess(['watch', '--redis', redis.url, '--cluster', 'cli', '--count', 'x']);
    expect(badCount.code).toBe(2);
    expect(badCount.stderr).toContain('--count: must be an integer in [1, 9007199254740991], got "x"');
    const missingArg = await inProcess(['weight', 'a', '--redis', redis.url, '--cluster', 'cli']);
    expect(missingArg.stderr).toContain('expected ID WEIGHT, got 1 argument(s)');
  });

  it('apply / add / drain / weight / remove / show, with exit codes 0, 3, 4 and 5', async () => {
    // The compiled binary for apply, show and stdin; the same command in-process for the rest (faster).
    const mi = (sub: string, ...rest: string[]) => inProcess([sub, '--redis', redis.url, '--cluster', 'cli', ...rest]);
    expect(await m('show')).toMatchObject({ code: 4 });
    const file = path.join(dir, 'members.yaml');
    writeFileSync(file, 'cluster: cli\nbackends:\n  - { id: a, address: "127.0.0.1:7001" }\n  - { id: b, address: "127.0.0.1:7002", weight: 2 }\n');
    expect(await m('apply', file)).toMatchObject({ code: 0, stdout: '1\n' });
    expect(await mi('add', 'c', '127.0.0.1:7003', '--weight', '5', '--locality', 'z1')).toMatchObject({ code: 0, stdout: '2\n' });
    expect(await mi('drain', 'a')).toMatchObject({ code: 0, stdout: '3\n' });
    expect(await mi('weight', 'b', '7')).toMatchObject({ code: 0, stdout: '4\n' });
    expect(await mi('undrain', 'a')).toMatchObject({ code: 0, stdout: '5\n' });
    expect(await mi('remove', 'c')).toMatchObject({ code: 0, stdout: '6\n' });

    const neg = await mi('weight', 'b', '-2');
    expect(neg.code).toBe(3);
    expect(neg.stderr).toContain('weight: must be an integer in [1, 4294967295], got -2');
    const dup = await mi('add', 'a', '127.0.0.1:7009');
    expect(dup.code).toBe(3);
    expect(dup.stderr).toContain('backend.id: "a" already exists');
    const badType = await mi('add', 'x', '127.0.0.1:7009', '--priority', 'high');
    expect(badType.code).toBe(3);
    expect(badType.stderr).toContain('backend.priority: must be an integer in [0, 4294967295], got "high"');
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ cluster: 'cli', backends: [{ id: 'a', address: '127.0.0.1:1' }, { id: 'a', address: '127.0.0.1:2' }] }));
    const dupDoc = await mi('apply', bad);
    expect(dupDoc.code).toBe(3);
    expect(dupDoc.stderr).toContain('backends[1].id: duplicate id "a" (first at backends[0])');
    writeFileSync(bad, '{"cluster": "cli", "backends": [');
    expect((await mi('apply', bad)).stderr).toContain('document: malformed JSON');
    expect(await mi('drain', 'nope')).toMatchObject({ code: 4 });
    expect(await mi('apply', file, '--if-version', '2')).toMatchObject({ code: 5 });
    expect(await mi('apply', file, '--version', '3')).toMatchObject({ code: 5 });

    const shown = await m('show');
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toEqual({
      version: 6,
      document: { cluster: 'cli', backends: [{ id: 'a', address: '127.0.0.1:7001' }, { id: 'b', address: '127.0.0.1:7002', weight: 7 }] },
    });
    // stdin, JSON
    const viaStdin = await poise(['members', 'apply', '-', '--redis', redis.url, '--cluster', 'cli', '--if-version', '6'], JSON.stringify({ cluster: 'cli', backends: [] }));
    expect(viaStdin).toMatchObject({ code: 0, stdout: '7\n' });
  });

  it('watch prints each applied version', async () => {
    const child = spawn(process.execPath, [CLI, 'members', 'watch', '--redis', redis.url, '--cluster', 'watched', '--count', '3'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const w = (sub: string, ...rest: string[]) => poise(['members', sub, '--redis', redis.url, '--cluster', 'watched', ...rest]);
    // Whether the watcher subscribed before or after this write, it prints version 1 exactly once:
    // the notice if it was subscribed, the snapshot read otherwise.
    expect(await poise(['members', 'apply', '-', '--redis', redis.url, '--cluster', 'watched'], JSON.stringify({ cluster: 'watched', backends: [] }))).toMatchObject({ code: 0 });
    await until(() => out.includes('version 1 '), 'watch printing version 1');
    await w('add', 'x', '127.0.0.1:7100', '--status', 'draining');
    await w('add', 'y', '127.0.0.1:7101');
    expect(await exited).toBe(0);
    expect(out.trim().split('\n')).toEqual([
      'version 1 backends 0 ready 0 draining 0 unavailable 0',
      'version 2 backends 1 ready 0 draining 1 unavailable 0',
      'version 3 backends 2 ready 1 draining 1 unavailable 0',
    ]);
  });
});
