/**
 * Runs one `poise bench`: the backends, then for each policy a fresh
 * Balancer and worker pool under the same load and the same scenario
 * timeline, then (for slow-backend and balls) the balls-into-bins
 * simulation. Ctrl-C (the `signal`) stops the policy in progress, skips the
 * rest and returns what was measured.
 */
import os from 'node:os';
import type { Status } from '../../core/candidate.js';
import type { MembershipSnapshot } from '../../core/spec.js';
import { createLogger, type Logger } from '../../log.js';
import { Balancer } from '../../runtime/balancer.js';
import { createWorkerPool } from '../../runtime/pool.js';
import { BackendFarm } from './backends.js';
import { runBalls } from './balls.js';
import type { BenchFlags } from './flags.js';
import { followRedis, type RedisFeed } from './membership.js';
import { isKeyed, type BenchPolicyName } from './policies.js';
import type { Progress } from './progress.js';
import { SAMPLE_MS, type BenchResult, type PolicyResult } from './results.js';
import { membershipOf, scenarioPlan, type BackendModel, type ScenarioPlan } from './scenarios.js';
import { latencyHistogram, summarize } from './stats.js';
import { COUNTERS, MEASURE, PHASE, READY, STOP, type WorkerResult, type WorkerTask } from './worker.js';

/** Environment of a run (injected by the command and by tests). */
export interface RunContext {
  progress: Progress;
  /** Aborted on Ctrl-C. */
  signal: AbortSignal;
  /** The compiled worker module; default `./worker.js` next to this module. */
  workerFile?: URL;
  version: string;
  logger?: Logger;
}

/** Warm-up before each measured window: connections open, PeakEWMA learns. */
export function warmupSeconds(duration: number): number {
  return Math.min(0.5, duration / 5);
}

/** Resolves after `ms`, or early when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** `Atomics.waitAsync` (Node ≥ 16; typed only from lib ES2024). */
const waitAsync = (Atomics as unknown as {
  waitAsync(a: Int32Array, index: number, value: number, timeoutMs: number): { async: boolean; value: Promise<string> | string };
}).waitAsync;

/** Waits until `control[READY]` reaches `n` (every worker's loops run). */
async function allReady(control: Int32Array, n: number, signal: AbortSignal): Promise<void> {
  for (;;) {
    // Atomics.load pairs with the workers' Atomics.add; waitAsync sleeps until their notify.
    const seen = Atomics.load(control, READY);
    if (seen >= n || signal.aborted) return;
    const w = waitAsync(control, READY, seen, 1000);
    if (w.async) await w.value;
  }
}

interface Membership {
  statuses: Map<string, Status | 'absent'>;
  specs(): MembershipSnapshot['backends'];
}

/** Measures one policy. Returns null when aborted before any measurement. */
async function measurePolicy(
  policy: BenchPolicyName,
  index: number,
  flags: BenchFlags,
  plan: ScenarioPlan,
  models: BackendModel[],
  farm: BackendFarm,
  feed: RedisFeed | undefined,
  tracked: string | null,
  ctx: RunContext,
  logger: Logger,
  total: number,
): Promise<PolicyResult | null> {
  const { signal } = ctx;
  for (const m of models) farm.get(m.id).setFailureRate(m.failureRate);
  const statuses = new Map(models.map((m) => [m.id, m.status] as const));
  const membership: Membership = {
    statuses,
    specs: () => membershipOf(models, (b) => statuses.get(b.id) ?? 'absent', (id) => farm.get(id).address),
  };
  const balancer = new Balancer({ logger, capacity: Math.max(64, models.length * 4), maxThreads: flags.workers + 2 });
  balancer.update(feed === undefined ? membership.specs() : feed.current.backends);
  feed?.onChange((s) => balancer.update(s.backends));
  const control = new Int32Array(new SharedArrayBuffer(4 * (COUNTERS + flags.workers)));
  const pool = createWorkerPool({
    balancer,
    filename: ctx.workerFile ?? new URL('./worker.js', import.meta.url),
    threads: flags.workers,
    policy,
    ...(flags.seed === undefined ? {} : { seed: flags.seed }),
  });
  const label = `[${index + 1}/${total}] ${policy}`;
  const tasks: Array<Promise<WorkerResult>> = [];
  for (let i = 0; i < flags.workers; i++) {
    const task: WorkerTask = {
      index: i,
      control: control.buffer as SharedArrayBuffer,
      concurrency: flags.concurrency,
      connection: flags.connection,
      keyed: isKeyed(policy),
      seed: flags.seed ?? null,
    };
    tasks.push(pool.run<WorkerResult>(task));
  }
  const results = Promise.all(tasks).finally(async () => {
    await pool.close();
    balancer.close();
  });
  results.catch(() => {}); // handled: awaited (and rethrown) below once the window ends
  const timers: NodeJS.Timeout[] = [];
  const events: PolicyResult['events'] = [];
  const series: PolicyResult['trackedInflight'] = [];
  let samples = 0;
  let maxSum = 0;
  let meanSum = 0;
  let started = 0;
  let stopped = 0;
  try {
    ctx.progress.update(`${label}: starting ${flags.workers} workers`, true);
    await allReady(control, flags.workers, signal);
    await sleep(warmupSeconds(flags.duration) * 1000, signal);
    if (signal.aborted) return null; // the finally blocks below still stop and close the pool
    // Atomics.store: workers poll PHASE with Atomics.load; the store makes the switch visible to them.
    Atomics.store(control, PHASE, MEASURE);
    started = performance.now();
    for (const e of plan.events) {
      if (feed !== undefined) break;
      timers.push(
        setTimeout(() => {
          for (const c of e.changes) {
            if (c.failureRate !== undefined) farm.get(c.id).setFailureRate(c.failureRate);
            if (c.status !== undefined) statuses.set(c.id, c.status);
          }
          if (e.changes.some((c) => c.status !== undefined)) balancer.update(membership.specs());
          events.push({ at: (performance.now() - started) / 1000, label: e.label });
        }, e.at * flags.duration * 1000),
      );
    }
    const sampler = setInterval(() => {
      const t = (performance.now() - started) / 1000;
      let max = 0;
      let sum = 0;
      let n = 0;
      for (const m of models) {
        const st = statuses.get(m.id);
        if (feed === undefined && (st === 'absent' || st === undefined)) continue;
        const v = farm.get(m.id).inFlight;
        max = Math.max(max, v);
        sum += v;
        n++;
      }
      if (n > 0) {
        samples++;
        maxSum += max;
        meanSum += sum / n;
      }
      if (tracked !== null) series.push([Number(t.toFixed(3)), farm.get(tracked).inFlight]);
      let done = 0;
      for (let i = 0; i < flags.workers; i++) done += Atomics.load(control, COUNTERS + i);
      ctx.progress.update(`${label}: ${t.toFixed(1)} / ${flags.duration} s, ${done.toLocaleString('en-US')} requests`);
    }, SAMPLE_MS);
    timers.push(sampler);
    await sleep(flags.duration * 1000, signal);
  } finally {
    stopped = performance.now();
    // Atomics.store: every worker loop polls PHASE with Atomics.load and ends on STOP.
    Atomics.store(control, PHASE, STOP);
    for (const t of timers) clearTimeout(t);
    await results;
  }
  const seconds = (stopped - started) / 1000;
  const h = latencyHistogram();
  const perBackend = new Map<string, { requests: number; errors: number }>();
  let requests = 0;
  let errors = 0;
  for (const r of await results) {
    h.add(r.histogram);
    requests += r.requests;
    errors += r.errors;
    for (const [id, q, e] of r.perBackend) {
      const t = perBackend.get(id) ?? { requests: 0, errors: 0 };
      t.requests += q;
      t.errors += e;
      perBackend.set(id, t);
    }
  }
  // With Redis, members may have joined during the window.
  const finalModels = feed === undefined ? models : feed.models();
  const roles = new Map(finalModels.map((m) => [m.id, m.role] as const));
  const served = [...perBackend.values()].reduce((a, t) => a + t.requests, 0);
  const hasSlow = models.some((m) => m.role === 'slow');
  const mean = samples === 0 ? 0 : meanSum / samples;
  const max = samples === 0 ? 0 : maxSum / samples;
  ctx.progress.done();
  const latency = summarize(h);
  return {
    policy,
    interrupted: signal.aborted,
    seconds,
    requests,
    errors,
    throughput: seconds > 0 ? requests / seconds : 0,
    latencyMs: { p50: latency.p50, p99: latency.p99, p999: latency.p999, mean: latency.mean, max: latency.max },
    slowShare: hasSlow ? models.filter((m) => m.role === 'slow').reduce((a, m) => a + (perBackend.get(m.id)?.requests ?? 0), 0) / Math.max(1, served) : null,
    inflight: { max, mean, maxOverMean: mean > 0 ? max / mean : 0 },
    perBackend: finalModels.map((m) => {
      const t = perBackend.get(m.id) ?? { requests: 0, errors: 0 };
      return { id: m.id, role: roles.get(m.id) ?? 'normal', requests: t.requests, errors: t.errors, share: t.requests / Math.max(1, served) };
    }),
    cdf: latency.cdf,
    trackedInflight: series,
    events,
  };
}

function machine(): BenchResult['machine'] {
  return { node: process.version, platform: `${os.platform()} ${os.arch()}`, cpus: os.cpus().length, cpuModel: os.cpus()[0]?.model ?? 'unknown' };
}

/** Runs the whole bench described by `flags`. */
export async function runBench(flags: BenchFlags, ctx: RunContext): Promise<BenchResult> {
  const logger = ctx.logger ?? createLogger({ name: 'poise-bench', level: process.env['POISE_LOG_LEVEL'] ?? 'warn' });
  const plan = scenarioPlan(flags.scenario, flags.backends);
  const policies = flags.policies.length > 0 ? flags.policies : [...plan.defaultPolicies];
  const result: BenchResult = {
    tool: 'poise bench',
    version: ctx.version,
    machine: machine(),
    startedAt: new Date().toISOString(),
    config: {
      scenario: plan.name,
      description: plan.description,
      workers: flags.workers,
      backends: flags.backends,
      concurrency: flags.concurrency,
      durationS: flags.duration,
      warmupS: warmupSeconds(flags.duration),
      connection: flags.connection,
      seed: flags.seed ?? null,
      membership: flags.redis === undefined ? 'embedded' : `redis cluster ${flags.cluster}`,
      tracked: null,
    },
    policies: [],
    balls: null,
    interrupted: false,
  };
  if (plan.name !== 'balls') {
    const farm = new BackendFarm(flags.seed);
    let feed: RedisFeed | undefined;
    try {
      let models: BackendModel[];
      if (flags.redis !== undefined && flags.cluster !== undefined) {
        feed = await followRedis({ url: flags.redis, cluster: flags.cluster, scenario: plan.name, farm, logger });
        models = feed.models();
        result.config.backends = models.length;
        result.config.description = `${models.length} backends from Redis cluster ${flags.cluster} (${plan.name} roles by id order)`;
      } else {
        for (const m of plan.backends) await farm.add(m);
        models = plan.backends;
      }
      const tracked = models.find((m) => m.role === 'slow') ?? models.find((m) => m.role === 'leaving' || m.role === 'primary') ?? models[0];
      result.config.tracked = tracked?.id ?? null;
      for (let i = 0; i < policies.length && !ctx.signal.aborted; i++) {
        const r = await measurePolicy(policies[i]!, i, flags, plan, feed === undefined ? models : feed.models(), farm, feed, result.config.tracked, ctx, logger, policies.length);
        if (r !== null) result.policies.push(r);
      }
    } finally {
      await feed?.close();
      await farm.close();
    }
  }
  if ((plan.name === 'balls' || plan.name === 'slow-backend') && !ctx.signal.aborted) {
    result.balls = runBalls({ ...(flags.seed === undefined ? {} : { seed: flags.seed % 1_000_000_007 }), onProgress: (l) => ctx.progress.update(l) });
    ctx.progress.done();
  }
  result.interrupted = ctx.signal.aborted;
  return result;
}
