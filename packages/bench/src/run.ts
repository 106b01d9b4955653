/**
 * Runs one `poise bench`: the backends, then for each policy a fresh
 * Balancer and worker pool under the same load and the same scenario
 * timeline, then (for slow-backend and balls) the balls-into-bins
 * simulation. Ctrl-C (the `signal`) stops the policy in progress, skips the
 * rest and returns what was measured.
 */
import os from 'node:os';
import { createLogger, type Logger } from 'poise-lb/runtime';
import { BackendFarm } from './backends.js';
import { runBalls } from './balls.js';
import type { BenchFlags } from './flags.js';
import { measurePolicy, warmupSeconds, type BenchRun } from './measure.js';
import { followDiscovery, followFleet, followRedis, type RedisFeed } from './membership.js';
import type { Progress } from './progress.js';
import type { BenchResult } from './results.js';
import { scenarioPlan, type BackendModel } from './scenarios.js';

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

function machine(): BenchResult['machine'] {
  return {
    node: process.version,
    platform: `${os.platform()} ${os.arch()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
  };
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
      membership:
        flags.discover !== undefined
          ? flags.redis === undefined
            ? flags.discover
            : `${flags.discover} (fleet mode, redis cluster ${flags.cluster})`
          : flags.redis === undefined
            ? 'embedded'
            : `redis cluster ${flags.cluster}`,
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
      if (flags.redis !== undefined && flags.cluster !== undefined && flags.discover !== undefined) {
        const spec = flags.discover;
        feed = await followFleet({
          spec,
          servers: flags.dnsServers,
          url: flags.redis,
          cluster: flags.cluster,
          scenario: plan.name,
          farm,
          logger,
        });
        models = feed.models();
        result.config.backends = models.length;
        result.config.description = `${models.length} backends from ${spec} through Redis cluster ${flags.cluster} (fleet mode; ${plan.name} roles by id order)`;
      } else if (flags.redis !== undefined && flags.cluster !== undefined) {
        feed = await followRedis({ url: flags.redis, cluster: flags.cluster, scenario: plan.name, farm, logger });
        models = feed.models();
        result.config.backends = models.length;
        result.config.description = `${models.length} backends from Redis cluster ${flags.cluster} (${plan.name} roles by id order)`;
      } else if (flags.discover !== undefined) {
        feed = await followDiscovery({ spec: flags.discover, servers: flags.dnsServers, scenario: plan.name, farm, logger });
        models = feed.models();
        result.config.backends = models.length;
        result.config.description = `${models.length} backends from ${flags.discover} (${plan.name} roles by id order)`;
      } else {
        for (const m of plan.backends) await farm.add(m);
        models = plan.backends;
      }
      const tracked =
        models.find((m) => m.role === 'slow') ?? models.find((m) => m.role === 'leaving' || m.role === 'primary') ?? models[0];
      result.config.tracked = tracked?.id ?? null;
      const run: BenchRun = {
        flags,
        plan,
        farm,
        feed,
        tracked: result.config.tracked,
        total: policies.length,
        progress: ctx.progress,
        signal: ctx.signal,
        workerFile: ctx.workerFile ?? new URL('./worker.js', import.meta.url),
        logger,
      };
      for (let i = 0; i < policies.length && !ctx.signal.aborted; i++) {
        const r = await measurePolicy(run, { policy: policies[i]!, index: i, models: feed === undefined ? models : feed.models() });
        if (r !== null) result.policies.push(r);
      }
    } finally {
      await feed?.close();
      await farm.close();
    }
  }
  if ((plan.name === 'balls' || plan.name === 'slow-backend') && !ctx.signal.aborted) {
    result.balls = runBalls({
      ...(flags.seed === undefined ? {} : { seed: flags.seed % 1_000_000_007 }),
      onProgress: (l) => ctx.progress.update(l),
    });
    ctx.progress.done();
  }
  result.interrupted = ctx.signal.aborted;
  return result;
}
