/**
 * The piscina worker pool: every worker attaches its own Router to the
 * Balancer's LoadTable at start-up, seeded from the OS in that worker.
 *
 * How the attachment reaches the workers: the Balancer's whole state lives in
 * one SharedArrayBuffer (counters, epochs and the seqlocked spec blob), so the
 * attachment is plain structured-clonable data and travels in piscina's
 * `workerData` (a SharedArrayBuffer there is shared, not copied). Nothing has
 * to be transferred, which matters because piscina's `workerData` cannot carry
 * a transfer list — and a worker piscina starts later (to replace one that
 * died) attaches to the current membership just the same.
 *
 * Workers run with `atomics: 'disabled'` so their event loops stay free for
 * I/O, and `minThreads = maxThreads = threads` so per-worker state (router,
 * policy tables, RNG) is never reaped by an idle timeout. The owner watches
 * every worker's `'exit'` and reclaims the leases it held.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isMainThread, workerData, type Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { PoiseError, invalidConfig, checkOptionKeys } from '../core/errors.js';
import type { Seed } from '../core/rng.js';
import type { Balancer } from './balancer.js';
import { Router, type PolicyName, type RouterAttachment, type RouterOptions } from './router.js';
import { POLICY_NAMES } from './policies.js';
import { integerIn } from '../core/validate.js';
import { LOG_LEVELS, createLogger, defaultLogger, isLogLevel, type LogLevel } from '../log.js';
import { runError } from './pool-start-failure.js';

/** Options of {@link createWorkerPool}. */
export interface WorkerPoolOptions {
  /** The Balancer whose table the workers route over. */
  balancer: Balancer;
  /** The task module (compiled JS); its default export is the task function. */
  filename: string | URL;
  /** Worker threads; default `os.availableParallelism()`. min = max = threads. */
  threads?: number;
  /** Each worker's router policy; default `'p2c:latency'`. */
  policy?: PolicyName;
  /** Debug replay: the worker on attribution row r gets a seed derived from (seed, r). */
  seed?: Seed;
  /** Passed to every worker router. */
  router?: Omit<RouterOptions, 'policy' | 'seed' | 'clock' | 'logger'>;
  /**
   * The level of every worker router's logger (a pino logger cannot cross
   * threads, so each worker makes its own: JSON on stderr, named `poise`).
   * Default: `POISE_LOG_LEVEL`, else `warn`.
   */
  logLevel?: LogLevel;
  /** User data, available in a worker through {@link poolWorkerData}. */
  workerData?: unknown;
}

/** A running pool. */
export interface WorkerPool {
  /**
   * Runs `task` on a worker (piscina's `run`). A worker that could not start
   * rejects every task with a `PoiseError` naming the reason: `NotFound`
   * when `filename` does not exist, `InvalidConfig` when the module does not
   * load, the Router's own code when the worker could not attach.
   */
  run<T = unknown>(task: unknown, opts?: { signal?: AbortSignal }): Promise<T>;
  /** Threads in the pool. */
  readonly threads: number;
  /** The underlying piscina instance. */
  readonly piscina: Piscina;
  /** Drains and stops the workers; their leases are reclaimed as they exit. */
  close(): Promise<void>;
}

/** What a pool worker finds in `workerData.poise`. */
interface PoolData {
  attachment: RouterAttachment;
  filename: string;
  policy: PolicyName | undefined;
  seed: Seed | undefined;
  router: RouterOptions | undefined;
  logLevel: LogLevel | undefined;
  user: unknown;
}

const ENTRY = fileURLToPath(new URL('./pool-worker.js', import.meta.url));

function taskUrl(filename: string | URL): string {
  if (filename instanceof URL) return filename.href;
  if (typeof filename !== 'string' || filename.length === 0)
    invalidConfig('options.filename', 'must be a path or file URL of the task module', filename);
  return filename.startsWith('file:') ? filename : pathToFileURL(path.resolve(filename)).href;
}

/**
 * Starts a piscina pool whose workers each attach a Router at start-up.
 *
 * @example
 * // main.js
 * const balancer = new Balancer();
 * balancer.update([{ id: 'a', address: '127.0.0.1:7001' }, { id: 'b', address: '127.0.0.1:7002' }]);
 * const pool = createWorkerPool({ balancer, filename: new URL('./task.js', import.meta.url), threads: 2 });
 * console.log(await pool.run({ path: '/' }));
 * await pool.close();
 *
 * // task.js
 * import { workerRouter } from 'poise-lb/runtime';
 * export default async function (task) {
 *   const lease = workerRouter().acquire();
 *   try {
 *     const res = await fetch(`http://${lease.host}:${lease.port}${task.path}`);
 *     lease.release(res.ok ? 'success' : 'failure');
 *     return await res.text();
 *   } catch (err) { lease.release('failure'); throw err; }
 * }
 */
export function createWorkerPool(opts: WorkerPoolOptions): WorkerPool {
  if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
  checkOptionKeys(opts, ['balancer', 'filename', 'threads', 'policy', 'seed', 'router', 'logLevel', 'workerData']);
  const { balancer } = opts;
  if (typeof balancer !== 'object' || balancer === null || typeof balancer.attachment !== 'function') {
    invalidConfig('options.balancer', 'must be a Balancer', balancer);
  }
  const threads = opts.threads ?? os.availableParallelism();
  integerIn(threads, 'options.threads', 1, balancer.table.maxThreads - 1);
  if (opts.policy !== undefined && !(POLICY_NAMES as readonly string[]).includes(opts.policy)) {
    invalidConfig('options.policy', `must be one of ${POLICY_NAMES.join(', ')}`, opts.policy);
  }
  if (opts.logLevel !== undefined && !isLogLevel(opts.logLevel))
    invalidConfig('options.logLevel', `must be one of ${LOG_LEVELS.join(', ')}`, opts.logLevel);
  const data: PoolData = {
    attachment: balancer.attachment(),
    filename: taskUrl(opts.filename),
    policy: opts.policy,
    seed: opts.seed,
    router: opts.router,
    logLevel: opts.logLevel,
    user: opts.workerData,
  };
  const piscina = new Piscina({
    filename: ENTRY,
    minThreads: threads,
    maxThreads: threads,
    idleTimeout: Infinity,
    atomics: 'disabled',
    workerData: { poise: data },
  });
  // Every worker must be watched before it can exit, or the row its Router
  // claimed at start-up (and any lease it took) is never reclaimed. piscina
  // announces a replacement ('workerCreate') only once the owner has read its
  // ready message, but the worker may run a task before that (piscina's
  // balancer also picks workers still starting) and be terminated by an
  // abort while that message is unread: it then exits unannounced, and
  // without a watch no 'reclaim' would ever come (the pool hangs waiting for
  // it). So the pool looks for new workers right after each piscina call
  // that starts one — construction, run(), an abort (piscina's listener,
  // added first, starts the replacement), a watched worker's exit — and on
  // 'workerCreate' and 'workerDestroy' (a worker being terminated is still
  // listed then).
  let index = 0;
  const seen = new WeakSet<Worker>();
  const watchNew = (): void => {
    for (const w of piscina.threads) {
      // threadId reads -1 once a thread is gone: too late to watch it.
      if (seen.has(w) || w.threadId < 0) continue;
      seen.add(w);
      balancer.watchWorker(w, index++);
      w.once('exit', watchNew);
    }
  };
  watchNew();
  piscina.on('workerCreate', watchNew);
  piscina.on('workerDestroy', watchNew);
  // piscina emits 'error' for a worker that died with no task to fail (an
  // uncaught exception between tasks; it starts a replacement): an EventEmitter
  // 'error' nobody listens to would kill the process, and no `try` around run()
  // could catch it. Start-up failures never get here (pool-worker.ts).
  piscina.on('error', (err: unknown) =>
    defaultLogger().error({ err: err instanceof Error ? err.message : String(err) }, 'poise: pool worker failed'),
  );
  return {
    run: <T>(task: unknown, runOpts?: { signal?: AbortSignal }) => {
      const signal = runOpts?.signal;
      const done = (piscina.run(task, signal === undefined ? {} : { signal }) as Promise<T>).catch((err: unknown) => {
        throw runError(err);
      });
      watchNew();
      signal?.addEventListener('abort', watchNew, { once: true });
      return done;
    },
    threads,
    piscina,
    close: () => piscina.close(),
  };
}

let cached: Router | undefined;

function poolData(): PoolData {
  const d = (workerData as { poise?: PoolData } | null)?.poise;
  if (isMainThread || d === undefined) {
    throw new PoiseError('InvalidConfig', 'workerRouter: not inside a poise worker pool (createWorkerPool)', { field: 'workerData' });
  }
  return d;
}

function deriveWorkerSeed(seed: Seed, row: number): bigint {
  return BigInt.asUintN(64, (BigInt(seed) ^ 0x5bd1e995n) * 0x9e3779b97f4a7c15n + BigInt(row + 1) * 0xd6e8feb86659fd93n);
}

/**
 * In a pool worker: this worker's Router (attached at start-up, cached).
 *
 * @example
 * // task.js, the `filename` of createWorkerPool
 * export default async function task({ path }) {
 *   const lease = workerRouter().acquire();
 *   try {
 *     const body = await fetchFrom(lease.host, lease.port, path);
 *     lease.release('success');
 *     return body;
 *   } catch (err) {
 *     lease.release('failure');
 *     throw err;
 *   }
 * }
 */
export function workerRouter(): Router {
  if (cached !== undefined) return cached;
  const d = poolData();
  const opts: RouterOptions = { ...(d.router ?? {}) };
  if (d.policy !== undefined) opts.policy = d.policy;
  if (d.logLevel !== undefined) opts.logger = createLogger({ level: d.logLevel });
  if (d.seed === undefined) {
    cached = Router.attach(d.attachment, opts);
  } else {
    // The replay seed depends on the row, which is known only once attached:
    // attach once to claim the row, then build the seeded router on it.
    const probe = Router.attach(d.attachment, { ...opts, seed: 0 });
    probe.close();
    cached = Router.attach(d.attachment, { ...opts, seed: deriveWorkerSeed(d.seed, probe.row) });
  }
  return cached;
}

/**
 * In a pool worker: the `workerData` given to {@link createWorkerPool}.
 *
 * @example
 * const { greeting } = poolWorkerData<{ greeting: string }>();
 */
export function poolWorkerData<T = unknown>(): T {
  return poolData().user as T;
}

/** @internal The task module URL (used by the worker entry). */
export function poolTaskUrl(): string {
  return poolData().filename;
}
