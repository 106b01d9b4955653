/**
 * Measures one policy of a run: a fresh Balancer and worker pool, the
 * warm-up, the measured window with the scenario's timeline and the in-flight
 * sampler, then the workers' results merged into one {@link PolicyResult}.
 */
import type { Status } from 'poise-lb';
import { Balancer, createWorkerPool, type Logger, type MembershipSnapshot } from 'poise-lb/runtime';
import type { BackendFarm } from './backends.js';
import type { BenchFlags } from './flags.js';
import type { RedisFeed } from './membership.js';
import { isKeyed, type BenchPolicyName } from './policies.js';
import type { Progress } from './progress.js';
import { SAMPLE_MS, type PolicyResult } from './results.js';
import { membershipOf, type BackendModel, type ScenarioPlan } from './scenarios.js';
import { latencyHistogram, summarize } from './stats.js';
import { COUNTERS, MEASURE, PHASE, READY, STOP, type WorkerResult, type WorkerTask } from './worker.js';

/** What every policy of one run shares. */
export interface BenchRun {
  flags: BenchFlags;
  plan: ScenarioPlan;
  farm: BackendFarm;
  /** The membership from Redis, when the run follows a cluster; else the scenario's own. */
  feed: RedisFeed | undefined;
  /** The backend whose in-flight count is recorded over time (null: none). */
  tracked: string | null;
  /** Policies in the run, for the progress label. */
  total: number;
  progress: Progress;
  /** Aborted on Ctrl-C. */
  signal: AbortSignal;
  /** The compiled worker module. */
  workerFile: URL;
  logger: Logger;
}

/** One policy's turn in a run. */
export interface PolicyTurn {
  policy: BenchPolicyName;
  /** Position in the run, from 0. */
  index: number;
  /** The backends as the turn starts (with Redis: the members served so far). */
  models: BackendModel[];
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
const waitAsync = (
  Atomics as unknown as {
    waitAsync(a: Int32Array, index: number, value: number, timeoutMs: number): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;

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

/**
 * Server-side share of answered requests on the `backup` backends, per
 * window between marks (the measured window's start, the first scenario
 * event, its end): what the backends themselves counted, not the clients.
 */
class BackupShare {
  private readonly marks: number[][] = [];

  constructor(
    private readonly farm: BenchRun['farm'],
    private readonly models: readonly BackendModel[],
  ) {}

  /** Records every backend's answered count now. */
  mark(): void {
    this.marks.push(this.models.map((m) => this.farm.get(m.id).answered));
  }

  /** `{ before, after }` the first event, or null when the scenario has no backups or no event came. */
  result(): PolicyResult['backupShare'] {
    if (!this.models.some((m) => m.role === 'backup') || this.marks.length < 3) return null;
    const share = (from: number[], to: number[]): number => {
      let all = 0;
      let backup = 0;
      this.models.forEach((m, i) => {
        const d = to[i]! - from[i]!;
        all += d;
        if (m.role === 'backup') backup += d;
      });
      return all > 0 ? backup / all : 0;
    };
    const [start, event, end] = [this.marks[0]!, this.marks[1]!, this.marks[this.marks.length - 1]!];
    return { before: share(start, event), after: share(event, end) };
  }
}

/** Time-means of the busiest and the average backend's server-side in-flight count, and the tracked backend's series. */
class InflightSampler {
  samples = 0;
  maxSum = 0;
  meanSum = 0;
  readonly series: PolicyResult['trackedInflight'] = [];

  constructor(
    private readonly run: BenchRun,
    private readonly models: readonly BackendModel[],
    private readonly statuses: ReadonlyMap<string, Status | 'absent'>,
  ) {}

  /** One sample at `t` seconds into the window. */
  sample(t: number): void {
    const { farm, feed, tracked } = this.run;
    let max = 0;
    let sum = 0;
    let n = 0;
    for (const m of this.models) {
      const st = this.statuses.get(m.id);
      if (feed === undefined && (st === 'absent' || st === undefined)) continue;
      const v = farm.get(m.id).inFlight;
      max = Math.max(max, v);
      sum += v;
      n++;
    }
    if (n > 0) {
      this.samples++;
      this.maxSum += max;
      this.meanSum += sum / n;
    }
    if (tracked !== null) this.series.push([Number(t.toFixed(3)), farm.get(tracked).inFlight]);
  }

  result(): PolicyResult['inflight'] {
    const mean = this.samples === 0 ? 0 : this.meanSum / this.samples;
    const max = this.samples === 0 ? 0 : this.maxSum / this.samples;
    return { max, mean, maxOverMean: mean > 0 ? max / mean : 0 };
  }
}

/** Starts one pool task per worker; resolves with their results once every worker stopped, after the pool and the Balancer are closed. */
function startWorkers(run: BenchRun, policy: BenchPolicyName, balancer: Balancer, control: Int32Array): Promise<WorkerResult[]> {
  const { flags } = run;
  const pool = createWorkerPool({
    balancer,
    filename: run.workerFile,
    threads: flags.workers,
    policy,
    ...(flags.seed === undefined ? {} : { seed: flags.seed }),
  });
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
  return Promise.all(tasks).finally(async () => {
    await pool.close();
    balancer.close();
  });
}

/** Sums the workers' results into the policy's figures. */
function merge(
  run: BenchRun,
  turn: PolicyTurn,
  results: readonly WorkerResult[],
  seconds: number,
): Omit<PolicyResult, 'policy' | 'interrupted' | 'inflight' | 'trackedInflight' | 'events' | 'backupShare' | 'checksMarkedDown'> {
  const h = latencyHistogram();
  const perBackend = new Map<string, { requests: number; errors: number }>();
  let requests = 0;
  let errors = 0;
  for (const r of results) {
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
  const finalModels = run.feed === undefined ? turn.models : run.feed.models();
  const served = [...perBackend.values()].reduce((a, t) => a + t.requests, 0);
  const slow = turn.models.filter((m) => m.role === 'slow');
  const latency = summarize(h);
  return {
    seconds,
    requests,
    errors,
    throughput: seconds > 0 ? requests / seconds : 0,
    latencyMs: { p50: latency.p50, p99: latency.p99, p999: latency.p999, mean: latency.mean, max: latency.max },
    slowShare: slow.length > 0 ? slow.reduce((a, m) => a + (perBackend.get(m.id)?.requests ?? 0), 0) / Math.max(1, served) : null,
    perBackend: finalModels.map((m) => {
      const t = perBackend.get(m.id) ?? { requests: 0, errors: 0 };
      return { id: m.id, role: m.role, requests: t.requests, errors: t.errors, share: t.requests / Math.max(1, served) };
    }),
    cdf: latency.cdf,
  };
}

/**
 * Measures `turn.policy` under the run's load and scenario. Returns null when
 * Ctrl-C came before the measured window began.
 */
export async function measurePolicy(run: BenchRun, turn: PolicyTurn): Promise<PolicyResult | null> {
  const { flags, plan, farm, feed, signal, progress } = run;
  const { models } = turn;
  for (const m of models) farm.get(m.id).setFailureRate(m.failureRate);
  const statuses = new Map<string, Status | 'absent'>(models.map((m) => [m.id, m.status] as const));
  const specs = (): MembershipSnapshot['backends'] =>
    membershipOf(
      models,
      (b) => statuses.get(b.id) ?? 'absent',
      (id) => farm.get(id).address,
    );
  const balancer = new Balancer({
    logger: run.logger,
    capacity: Math.max(64, models.length * 4),
    maxThreads: flags.workers + 2,
    ...(plan.health === undefined ? {} : { health: plan.health }),
  });
  const backups = new BackupShare(farm, models);
  balancer.update(feed === undefined ? specs() : feed.current.backends);
  feed?.onChange((s) => balancer.update(s.backends));
  const control = new Int32Array(new SharedArrayBuffer(4 * (COUNTERS + flags.workers)));
  const results = startWorkers(run, turn.policy, balancer, control);
  results.catch(() => {}); // handled: awaited (and rethrown) below once the window ends
  const label = `[${turn.index + 1}/${run.total}] ${turn.policy}`;
  const timers: NodeJS.Timeout[] = [];
  const events: PolicyResult['events'] = [];
  const sampler = new InflightSampler(run, models, statuses);
  let started = 0;
  let stopped = 0;
  let checksMarkedDown = 0;
  try {
    progress.update(`${label}: starting ${flags.workers} workers`, true);
    await allReady(control, flags.workers, signal);
    await sleep(warmupSeconds(flags.duration) * 1000, signal);
    if (signal.aborted) return null; // the finally block below still stops the workers and closes the pool
    // Atomics.store: workers poll PHASE with Atomics.load; the store makes the switch visible to them.
    Atomics.store(control, PHASE, MEASURE);
    started = performance.now();
    backups.mark();
    for (const e of feed === undefined ? plan.events : []) {
      timers.push(
        setTimeout(
          () => {
            if (events.length === 0) backups.mark();
            for (const c of e.changes) {
              if (c.failureRate !== undefined) farm.get(c.id).setFailureRate(c.failureRate);
              if (c.accepting !== undefined) void farm.get(c.id).setAccepting(c.accepting);
              if (c.status !== undefined) statuses.set(c.id, c.status);
            }
            if (e.changes.some((c) => c.status !== undefined)) balancer.update(specs());
            events.push({ at: (performance.now() - started) / 1000, label: e.label });
          },
          e.at * flags.duration * 1000,
        ),
      );
    }
    timers.push(
      setInterval(() => {
        const t = (performance.now() - started) / 1000;
        sampler.sample(t);
        let done = 0;
        for (let i = 0; i < flags.workers; i++) done += Atomics.load(control, COUNTERS + i);
        progress.update(`${label}: ${t.toFixed(1)} / ${flags.duration} s, ${done.toLocaleString('en-US')} requests`);
      }, SAMPLE_MS),
    );
    await sleep(flags.duration * 1000, signal);
  } finally {
    stopped = performance.now();
    backups.mark();
    checksMarkedDown = balancer.healthStats().counters.markedDown;
    // Atomics.store: every worker loop polls PHASE with Atomics.load and ends on STOP.
    Atomics.store(control, PHASE, STOP);
    for (const t of timers) clearTimeout(t);
    await results;
  }
  progress.done();
  return {
    policy: turn.policy,
    interrupted: signal.aborted,
    ...merge(run, turn, await results, (stopped - started) / 1000),
    inflight: sampler.result(),
    trackedInflight: sampler.series,
    events,
    backupShare: backups.result(),
    checksMarkedDown: plan.health === undefined ? null : checksMarkedDown,
  };
}
