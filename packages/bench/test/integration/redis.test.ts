/**
 * `poise bench --redis URL --cluster NAME` against a real redis-server on a
 * free port: the membership comes from Redis, the bench serves each member on
 * its own loopback port. Compiled CLI (build first). No figure is asserted.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BenchResult } from '../../src/results.js';
import { MembershipPublisher } from 'poise-lb/redis';
import { CLI } from '../../../../test/helpers/cli.js';
import { freePort } from '../../../../test/helpers/ports.js';
import { startRedis, type TestRedis } from '../../../../test/helpers/redis-server.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-bench-redis-'));
let redis: TestRedis;

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function bench(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'bench', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function publish(cluster: string, addresses: string[]): Promise<void> {
  const pub = new MembershipPublisher({ url: redis.url, cluster });
  try {
    await pub.apply({ cluster, backends: addresses.map((address, i) => ({ id: `r${i}`, address })) });
  } finally {
    await pub.close();
  }
}

describe('poise bench --redis', () => {
  it('takes its membership from the cluster in Redis and serves every member on its loopback port', async () => {
    const ports = [await freePort(), await freePort(), await freePort()];
    await publish(
      'bench-a',
      ports.map((p) => `127.0.0.1:${p}`),
    );
    const json = path.join(dir, 'a.json');
    const run = await bench([
      '--redis',
      redis.url,
      '--cluster',
      'bench-a',
      '--workers',
      '2',
      '--duration',
      '1s',
      '--concurrency',
      '2',
      '--policy',
      'random',
      '--json',
      json,
      '--report',
      path.join(dir, 'a.html'),
    ]);
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(readFileSync(json, 'utf8')) as BenchResult;
    expect(result.config.membership).toBe('redis cluster bench-a');
    expect(result.config.backends).toBe(3);
    const p = result.policies[0]!;
    expect(p.perBackend.map((b) => [b.id, b.role])).toEqual([
      ['r0', 'slow'],
      ['r1', 'failing'],
      ['r2', 'normal'],
    ]);
    expect(p.perBackend.every((b) => b.requests > 0)).toBe(true);
  });

  it('refuses a member it cannot serve (not 127.0.0.1) with a message naming it', async () => {
    await publish('bench-b', ['10.0.0.1:5432']);
    const run = await bench([
      '--redis',
      redis.url,
      '--cluster',
      'bench-b',
      '--workers',
      '1',
      '--duration',
      '1s',
      '--json',
      path.join(dir, 'b.json'),
      '--report',
      path.join(dir, 'b.html'),
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      '--redis: backend "r0" has address "10.0.0.1:5432"; the bench serves its backends itself and needs 127.0.0.1:<port>',
    );
  });

  it('exit codes from the one table: --cluster a:b is a usage error (2, the naming rule), an empty cluster is not found (4)', async () => {
    const colon = await bench(['--redis', redis.url, '--cluster', 'a:b', '--workers', '1', '--duration', '1s']);
    expect(colon.code).toBe(2);
    expect(colon.stderr).toContain(
      'poise bench: --cluster: must be 1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit, got "a:b"',
    );
    const empty = await bench([
      '--redis',
      redis.url,
      '--cluster',
      'bench-empty',
      '--workers',
      '1',
      '--duration',
      '1s',
      '--json',
      path.join(dir, 'e.json'),
      '--report',
      path.join(dir, 'e.html'),
    ]);
    expect(empty.code).toBe(4);
    expect(empty.stderr).toContain(
      `poise bench: --redis: no membership for cluster "bench-empty" (redis ${redis.url}: no membership stored for cluster "bench-empty" (key poise:bench-empty:snapshot))`,
    );
  });
});
