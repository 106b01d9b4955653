/**
 * Benchmark plumbing for Redis: a private redis-server on a free loopback
 * port (killed when the benchmark exits), Redis' own CPU counters, and
 * percentile summaries.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import type { Redis } from 'ioredis';
import { freePort } from './free-port.js';

export { freePort };

/** Starts redis-server (no persistence) on a free port; SIGKILLed when this process exits. */
export async function ownRedis(extraArgs: string[] = []): Promise<{ url: string; port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extraArgs], {
    stdio: 'ignore',
  });
  process.on('exit', () => child.kill('SIGKILL'));
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => (s.destroy(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (up) return { url: `redis://127.0.0.1:${port}`, port, child };
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`redis-server on port ${port} did not start`);
}

/** used_cpu_sys + used_cpu_user of the Redis server, in seconds (INFO cpu). */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_sys') + field('used_cpu_user');
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** p50, p99, max and mean of `xs`. */
export function summary(xs: number[]): { p50: number; p99: number; max: number; mean: number } {
  const s = xs.slice().sort((a, b) => a - b);
  return { p50: quantile(s, 0.5), p99: quantile(s, 0.99), max: s.at(-1)!, mean: xs.reduce((a, b) => a + b, 0) / xs.length };
}
