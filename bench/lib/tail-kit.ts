/**
 * What bench:tail's fan-out and fast-fail scenarios share: loopback HTTP
 * backends in child processes of their own (bench/http-backend.ts, so each
 * group has an independent event loop and the client's CPU is its own), a
 * closed-loop client, and percentiles.
 */
import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Dispatcher, request } from 'undici';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** What each backend does (bench/http-backend.ts's message), per backend in port order. */
export interface BackendBehaviour {
  delaysMs: number[];
  errorRates: number[];
  stallRate?: number;
  stallMs?: number;
}

/** Backends in child processes: their ports in order, and how to stop them. */
export interface BackendGroup {
  ports: number[];
  close(): void;
}

/** Forks `processes` children of `perProcess` servers each and sets their behaviour (slices of `b`). */
export async function forkBackends(processes: number, perProcess: number, b: BackendBehaviour): Promise<BackendGroup> {
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  for (let p = 0; p < processes; p++) {
    const child = fork(path.join(HERE, '..', 'http-backend.js'), [String(perProcess)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    const got = await new Promise<number[]>((resolve) => child.once('message', (m: { ports: number[] }) => resolve(m.ports)));
    const from = p * perProcess;
    await new Promise<void>((resolve) => {
      child.once('message', () => resolve());
      child.send({
        delaysMs: b.delaysMs.slice(from, from + perProcess),
        errorRates: b.errorRates.slice(from, from + perProcess),
        stallRate: b.stallRate,
        stallMs: b.stallMs,
      });
    });
    ports.push(...got);
  }
  return {
    ports,
    close: () => {
      for (const c of children) c.kill();
    },
  };
}

/** What a closed-loop run measured. */
export interface LoopResult {
  latenciesMs: Float64Array;
  requests: number;
  /** 5xx responses and exceptions. */
  failed: number;
}

/** `concurrency` loops of GET `url` through `dispatcher` for `durationMs`; latencies sorted. */
export async function closedLoop(dispatcher: Dispatcher, url: string, concurrency: number, durationMs: number): Promise<LoopResult> {
  const latencies: number[] = [];
  let failed = 0;
  const t0 = performance.now();
  const loop = async (): Promise<void> => {
    while (performance.now() - t0 < durationMs) {
      const start = performance.now();
      try {
        const res = await request(url, { dispatcher });
        await res.body.dump();
        if (res.statusCode >= 500) failed++;
      } catch {
        failed++;
      }
      latencies.push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const sorted = Float64Array.from(latencies).sort();
  return { latenciesMs: sorted, requests: sorted.length, failed };
}

/** The `q` quantile of sorted values (NaN when empty). */
export function percentile(sorted: Float64Array, q: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** `x` rounded to `d` decimals. */
export function round(x: number, d = 2): number {
  return Math.round(x * 10 ** d) / 10 ** d;
}

/** True when `metaUrl` is the module node was started with (a bench module's standalone entry). */
export function isMain(metaUrl: string): boolean {
  return process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(metaUrl);
}
