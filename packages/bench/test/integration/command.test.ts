/**
 * `poise bench` end to end, as a user runs it: poise-lb's compiled CLI
 * (dist/src/cli/main.js — build first; `npm test` does) in a child process,
 * which loads this package,
 * at a tiny size (2 workers, 2 policies, 1 s). No figure is asserted.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { COLUMNS, type BenchResult } from '../../src/results.js';
import { CLI } from '../../../../test/helpers/cli.js';
import { checkWellFormed } from '../helpers/wellformed.js';

/** This package's own bin, `poise-bench` (compiled). */
const BIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-bench-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function poise(args: string[], onStdout?: (text: string, child: ReturnType<typeof spawn>) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'bench', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, POISE_LOG_LEVEL: 'warn' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      onStdout?.(stdout, child);
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('poise bench (compiled CLI, real workers and sockets)', () => {
  it('runs 2 workers × 2 policies × 1 s: exits 0, prints the table, writes JSON with every column and a well-formed report', async () => {
    const json = path.join(dir, 'tiny.json');
    const report = path.join(dir, 'tiny.html');
    const run = await poise([
      '--workers',
      '2',
      '--policy',
      'round-robin',
      '--policy',
      'p2c:latency',
      '--duration',
      '1s',
      '--concurrency',
      '4',
      '--json',
      json,
      '--report',
      report,
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    // Every column with a value in this scenario (the backup share is the failover scenario's), then the recommendation.
    for (const c of COLUMNS) expect(run.stdout.includes(c.header), c.header).toBe(c.key !== 'backupAfter');
    expect(run.stdout).toMatch(/\nRecommendation: (round-robin|p2c:latency)\b.*\n/);
    expect((JSON.parse(readFileSync(json, 'utf8')) as { recommendation: { policy: string } }).recommendation.policy).toMatch(
      /^(round-robin|p2c:latency)$/,
    );
    expect(run.stdout).toMatch(/^round-robin /m);
    expect(run.stdout).toMatch(/^p2c:latency /m);
    expect(run.stdout).toContain('Balls into bins');

    const result = JSON.parse(readFileSync(json, 'utf8')) as BenchResult;
    // The results name the poise-lb they measured (not this package's own version).
    expect(result.version).toBe(
      (JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { version: string }).version,
    );
    expect(result.config).toMatchObject({ workers: 2, concurrency: 4, durationS: 1, scenario: 'slow-backend', backends: 8, seed: null });
    expect(result.policies.map((p) => p.policy)).toEqual(['round-robin', 'p2c:latency']);
    for (const p of result.policies) {
      for (const c of COLUMNS) {
        const v = c.value(p);
        // Only the failover scenario has backups to count.
        if (c.key === 'backupAfter') {
          expect(v).toBeNull();
          continue;
        }
        expect(typeof v, `${p.policy}.${c.key}`).toBe('number');
        expect(Number.isFinite(v), `${p.policy}.${c.key}`).toBe(true);
      }
      expect(p.requests).toBeGreaterThan(0);
      expect(p.perBackend).toHaveLength(8);
      expect(p.perBackend.reduce((a, b) => a + b.requests, 0)).toBe(p.requests);
      expect(p.perBackend.filter((b) => b.role === 'slow')).toHaveLength(1);
      expect(p.cdf.at(-1)![1]).toBe(1);
      expect(p.trackedInflight.length).toBeGreaterThan(0);
    }
    expect(result.balls!.mEqualsN.map((r) => r.n)).toEqual([1e3, 1e4, 1e5, 1e6]);

    const html = readFileSync(report, 'utf8');
    const tags = checkWellFormed(html);
    expect(tags.filter((t) => t === 'svg')).toHaveLength(5);
    expect(html).not.toMatch(/https?:|<script|src=/i);
    expect(html).toContain('p2c:latency');
  });

  it('failover: priority 1 takes traffic when a priority-0 host fails its active checks, with no membership change', async () => {
    const json = path.join(dir, 'failover.json');
    // 4 backends: P0 = b0, b1; P1 = b2, b3. At half time b0 goes away; TCP checks (fall 2) take it down.
    const run = await poise([
      '--scenario',
      'failover',
      '--backends',
      '4',
      '--workers',
      '2',
      '--policy',
      'priority',
      '--duration',
      '4s',
      '--concurrency',
      '8',
      '--json',
      json,
    ]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('backup share before→after');
    // The transition is logged once, by the active checker (warn reaches stderr at POISE_LOG_LEVEL=warn).
    const downs = run.stderr.split('\n').filter((l) => l.includes('backend down (active check)'));
    expect(downs).toHaveLength(1);
    expect(downs[0]).toContain('"backend":"b0"');
    const result = JSON.parse(readFileSync(json, 'utf8')) as BenchResult;
    const [p] = result.policies;
    expect(p!.checksMarkedDown).toBe(1);
    // Before: P0 fully healthy keeps every request (the backups' own counts are 0).
    expect(p!.backupShare!.before).toBe(0);
    // After: P0 at 50 % × 140 % = 70 % effective, so P1's share is 30 % once the check has fired
    // (≤ 2 × 220 ms of the 2 s after the event, partly covered by passive ejection): between 15 % and 33 %.
    expect(p!.backupShare!.after).toBeGreaterThan(0.15);
    expect(p!.backupShare!.after).toBeLessThan(0.33);
  });

  it("poise bench --help (through poise-lb) and poise-bench --help (this package's bin) print the same help, exit 0", async () => {
    const viaPoise = await poise(['--help']);
    const own = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
    expect(viaPoise.code).toBe(0);
    expect(own.status).toBe(0);
    expect(viaPoise.stdout).toMatch(/^usage: poise bench \[flags\]\n/);
    expect(own.stdout).toBe(viaPoise.stdout);
    const bad = spawnSync(process.execPath, [BIN, '--workers', '0'], { encoding: 'utf8' });
    expect([bad.status, bad.stderr]).toEqual([
      2,
      'poise bench: --workers: must be an integer in [1, 64], got "0"\nRun `poise bench --help` for the flags.\n',
    ]);
  });

  it('refuses a bad flag with exit 2 and a message naming the flag and its range', async () => {
    const run = await poise(['--workers', '0']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--workers: must be an integer in [1, 64], got "0"');
    const bad = await poise(['--policy', 'fastest']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--policy: must be one of round-robin,');
  });

  it('Ctrl-C (SIGINT) stops the run, prints what was measured and writes it (exit 130)', async () => {
    const json = path.join(dir, 'cut.json');
    let sent = false;
    const run = await poise(
      [
        '--workers',
        '2',
        '--policy',
        'random',
        '--policy',
        'p2c:latency',
        '--duration',
        '60s',
        '--concurrency',
        '4',
        '--json',
        json,
        '--report',
        path.join(dir, 'cut.html'),
      ],
      (out, child) => {
        // the plain progress line of the first policy's measured window
        if (!sent && /\[1\/2\] random: \d+\.\d \/ 60 s/.test(out)) {
          sent = true;
          child.kill('SIGINT');
        }
      },
    );
    expect(sent, run.stdout + run.stderr).toBe(true);
    expect(run.code).toBe(130);
    expect(run.stdout).toContain('Interrupted');
    const result = JSON.parse(readFileSync(json, 'utf8')) as BenchResult;
    expect(result.interrupted).toBe(true);
    expect(result.policies.map((p) => [p.policy, p.interrupted])).toEqual([['random', true]]);
    expect(result.balls).toBeNull();
  });
});
