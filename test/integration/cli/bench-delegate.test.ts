/**
 * `poise bench` in the library delegates to the @poise-lb/bench package: it
 * runs it when installed and names the package to install when it is not.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { BENCH_PACKAGE, loadBench, runBench } from '../../../src/cli/bench.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

/** Runs `runBench` in this process, capturing its output. */
async function captured(argv: string[], specifier: string): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((c) => ((stdout += String(c)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((c) => ((stderr += String(c)), true));
  try {
    return { code: await runBench(argv, specifier), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe('poise bench → @poise-lb/bench', () => {
  it('loads the installed package (linked in this repository) and gets its command', async () => {
    const bench = await loadBench();
    expect(BENCH_PACKAGE).toBe('@poise-lb/bench');
    expect(bench?.summary).toMatch(/^compare balancing policies under load/);
  });

  it('a package that is not installed: exit 1 naming the workspace package and how to get it; --help exits 0 with the same text on stdout', async () => {
    const missing = await captured(['--workers', '2'], '@poise-lb/bench-absent');
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toContain('poise bench: the bench is the workspace package @poise-lb/bench-absent');
    expect(missing.stderr).toContain('the workspace package @poise-lb/bench-absent (packages/bench), which is not installed here');
    const help = await captured(['--help'], '@poise-lb/bench-absent');
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toContain('the workspace package @poise-lb/bench-absent (packages/bench), which is not installed here');
  });

  it('a package that is installed but cannot load is not reported as missing: its own error comes through', async () => {
    const broken = pathToFileURL(path.join(root, 'test/fixtures/bench-broken.mjs')).href;
    await expect(loadBench(broken)).rejects.toThrow(/poise-no-such-dependency/);
  });

  describe('the compiled CLI of an install without the bench package', () => {
    // poise-lb as an application installs it: its dist/ and package.json, its dependencies, and no @poise-lb/bench.
    const app = mkdtempSync(path.join(os.tmpdir(), 'poise-nobench-'));
    afterAll(() => rmSync(app, { recursive: true, force: true }));
    const lib = path.join(app, 'node_modules', 'poise-lb');
    mkdirSync(lib, { recursive: true });
    cpSync(path.join(root, 'dist', 'src'), path.join(lib, 'dist', 'src'), { recursive: true });
    cpSync(path.join(root, 'package.json'), path.join(lib, 'package.json'));
    for (const dep of readdirSync(path.join(root, 'node_modules'))) {
      if (dep === '@poise-lb' || dep === 'poise-lb' || dep.startsWith('.')) continue;
      symlinkSync(path.join(root, 'node_modules', dep), path.join(app, 'node_modules', dep));
    }
    const poise = (...args: string[]) =>
      spawnSync(process.execPath, [path.join(lib, 'dist/src/cli/main.js'), ...args], { encoding: 'utf8', cwd: app });

    it('poise bench exits 1 and says to install @poise-lb/bench; poise bench --help exits 0', () => {
      const r = poise('bench');
      expect(r.status).toBe(1);
      expect(r.stderr).toContain('the workspace package @poise-lb/bench (packages/bench), which is not installed here');
      const help = poise('bench', '--help');
      expect(help.status).toBe(0);
      expect(help.stdout).toContain('poise bench: the bench is the workspace package @poise-lb/bench (packages/bench)');
    });

    it('the other commands and poise --help work as before', () => {
      const top = poise('--help');
      expect(top.status).toBe(0);
      expect(top.stdout).toMatch(/^\s+bench\s+compare balancing policies under load/m);
      expect(poise('proxy', '--help').status).toBe(0);
    });
  });
});
