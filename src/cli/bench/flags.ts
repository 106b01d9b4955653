/**
 * `poise bench` flags: parsing and validation. Every refusal names the flag
 * and its accepted range (`--workers: must be an integer in [1, 64], got 0`);
 * the command turns a {@link UsageError} into exit code 2.
 */
import os from 'node:os';
import { POLICY_NAMES, type BenchPolicyName } from './policies.js';
import { SCENARIO_NAMES, type ScenarioName } from './scenarios.js';
import { NAME_RULE, nameProblem } from '../../membership/name.js';
import { EXIT_HELP } from '../exit.js';
import { UsageError } from '../usage.js';

export { UsageError } from '../usage.js';

/** How a worker talks to a backend. */
export type ConnectionMode = 'persistent' | 'per-request';

/** The validated options of one `poise bench` run. */
export interface BenchFlags {
  workers: number;
  backends: number;
  concurrency: number;
  /** Seconds of measured load per policy. */
  duration: number;
  /** Explicit `--policy` values, in order, without duplicates (empty: the scenario's default set). */
  policies: BenchPolicyName[];
  scenario: ScenarioName;
  connection: ConnectionMode;
  redis: string | undefined;
  cluster: string | undefined;
  json: string;
  report: string;
  seed: number | undefined;
  help: boolean;
}

/** Accepted ranges, shared by validation, `--help` and the README. */
export const LIMITS = {
  workers: { min: 1, max: 64 },
  backends: { min: 3, max: 64 },
  concurrency: { min: 1, max: 1024 },
  duration: { min: 0.2, max: 3600 },
  seed: { min: 0, max: Number.MAX_SAFE_INTEGER },
} as const;

/** Defaults sized so that the default run (6 policies) takes about 40 s on 2 cores. */
export const DEFAULTS = {
  backends: 8,
  concurrency: 16,
  duration: 5,
  scenario: 'slow-backend' as ScenarioName,
  connection: 'persistent' as ConnectionMode,
  json: 'poise-bench.json',
  report: 'poise-bench.html',
};

/** The default worker count: the number of cores, capped to the accepted range. */
export function defaultWorkers(): number {
  const n = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.min(LIMITS.workers.max, Math.max(LIMITS.workers.min, n));
}

const VALUE_FLAGS = new Set([
  '--workers',
  '--backends',
  '--concurrency',
  '--duration',
  '--policy',
  '--scenario',
  '--connection',
  '--redis',
  '--cluster',
  '--json',
  '--report',
  '--seed',
]);

function integer(flag: string, raw: string, min: number, max: number): number {
  const v = /^[+]?\d+$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new UsageError(`${flag}: must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`, flag);
  }
  return v;
}

function seconds(flag: string, raw: string, min: number, max: number): number {
  const v = /^[+]?(\d+(\.\d*)?|\.\d+)$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!Number.isFinite(v) || v < min || v > max) {
    throw new UsageError(`${flag}: must be a number of seconds in [${min}, ${max}], got ${JSON.stringify(raw)}`, flag);
  }
  return v;
}

function oneOf<T extends string>(flag: string, raw: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new UsageError(`${flag}: must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`, flag);
  }
  return raw as T;
}

function redisUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--redis: must be a redis:// or rediss:// URL, got ${JSON.stringify(raw)}`, '--redis');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new UsageError(`--redis: must be a redis:// or rediss:// URL, got ${JSON.stringify(raw)}`, '--redis');
  }
  return raw;
}

function file(flag: string, raw: string): string {
  if (raw.length === 0) throw new UsageError(`${flag}: must be a non-empty file path, got ""`, flag);
  return raw;
}

/**
 * Parses `argv` (the words after `poise bench`). Accepts `--flag value` and
 * `--flag=value`; `--policy` may repeat. Throws {@link UsageError}.
 *
 * @example
 * parseBenchFlags(['--workers', '2', '--policy', 'random', '--policy=p2c:latency']);
 */
export function parseBenchFlags(argv: readonly string[]): BenchFlags {
  const out: BenchFlags = {
    workers: defaultWorkers(),
    backends: DEFAULTS.backends,
    concurrency: DEFAULTS.concurrency,
    duration: DEFAULTS.duration,
    policies: [],
    scenario: DEFAULTS.scenario,
    connection: DEFAULTS.connection,
    redis: undefined,
    cluster: undefined,
    json: DEFAULTS.json,
    report: DEFAULTS.report,
    seed: undefined,
    help: false,
  };
  const seen = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--help' || word === '-h') {
      out.help = true;
      continue;
    }
    const eq = word.indexOf('=');
    const flag = eq > 0 && word.startsWith('--') ? word.slice(0, eq) : word;
    if (!VALUE_FLAGS.has(flag)) {
      throw new UsageError(`unknown flag ${JSON.stringify(flag)} (accepted: ${[...VALUE_FLAGS].join(', ')}, --help)`, flag);
    }
    let value: string;
    if (eq > 0 && word.startsWith('--')) value = word.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`${flag}: needs a value`, flag);
      value = next;
      i++;
    }
    if (flag !== '--policy' && seen.has(flag)) throw new UsageError(`${flag}: given more than once`, flag);
    seen.add(flag);
    switch (flag) {
      case '--workers':
        out.workers = integer(flag, value, LIMITS.workers.min, LIMITS.workers.max);
        break;
      case '--backends':
        out.backends = integer(flag, value, LIMITS.backends.min, LIMITS.backends.max);
        break;
      case '--concurrency':
        out.concurrency = integer(flag, value, LIMITS.concurrency.min, LIMITS.concurrency.max);
        break;
      case '--duration':
        out.duration = seconds(flag, value, LIMITS.duration.min, LIMITS.duration.max);
        break;
      case '--policy': {
        const p = oneOf(flag, value, POLICY_NAMES);
        if (!out.policies.includes(p)) out.policies.push(p);
        break;
      }
      case '--scenario':
        out.scenario = oneOf(flag, value, SCENARIO_NAMES);
        break;
      case '--connection':
        out.connection = oneOf<ConnectionMode>(flag, value, ['persistent', 'per-request']);
        break;
      case '--redis':
        out.redis = redisUrl(value);
        break;
      case '--cluster':
        if (nameProblem(value) !== undefined) throw new UsageError(`--cluster: ${nameProblem(value)}, got ${JSON.stringify(value)}`, flag);
        out.cluster = value;
        break;
      case '--json':
        out.json = file(flag, value);
        break;
      case '--report':
        out.report = file(flag, value);
        break;
      case '--seed':
        out.seed = integer(flag, value, LIMITS.seed.min, LIMITS.seed.max);
        break;
    }
  }
  if ((out.redis === undefined) !== (out.cluster === undefined)) {
    const missing = out.redis === undefined ? '--redis' : '--cluster';
    throw new UsageError(`${missing}: --redis URL and --cluster NAME must be given together`, missing);
  }
  if (out.redis !== undefined && out.scenario !== 'slow-backend' && out.scenario !== 'uniform') {
    throw new UsageError(`--scenario: with --redis only slow-backend or uniform apply (membership comes from Redis), got ${JSON.stringify(out.scenario)}`, '--scenario');
  }
  if (out.scenario === 'failover' && out.backends < 4) {
    throw new UsageError(`--backends: the failover scenario needs an integer in [4, ${LIMITS.backends.max}], got ${out.backends}`, '--backends');
  }
  return out;
}

/** The `--help` text. */
export function benchHelp(): string {
  return [
    'usage: poise bench [flags]',
    '',
    'Starts K TCP backends on 127.0.0.1 inside this process, a pool of W worker threads each with its',
    'own OS-seeded Router over one shared LoadTable, and drives C concurrent requests per worker for',
    'D seconds per policy; prints one table, writes an HTML report and the same data as JSON.',
    '',
    'flags:',
    `  --workers N        worker threads, integer in [${LIMITS.workers.min}, ${LIMITS.workers.max}] (default: cores = ${defaultWorkers()})`,
    `  --backends K       backends, integer in [${LIMITS.backends.min}, ${LIMITS.backends.max}] (default ${DEFAULTS.backends})`,
    `  --concurrency C    concurrent requests per worker, integer in [${LIMITS.concurrency.min}, ${LIMITS.concurrency.max}] (default ${DEFAULTS.concurrency})`,
    `  --duration D       seconds of load per policy, in [${LIMITS.duration.min}, ${LIMITS.duration.max}] (default ${DEFAULTS.duration})`,
    `  --policy NAME      repeatable; one of ${POLICY_NAMES.join(', ')}`,
    `                     (default: round-robin, random, weighted, least-loaded, p2c:connections, p2c:latency)`,
    `  --scenario NAME    ${SCENARIO_NAMES.join(' | ')} (default ${DEFAULTS.scenario})`,
    `  --connection MODE  persistent | per-request TCP connections (default ${DEFAULTS.connection})`,
    '  --redis URL        take membership from Redis (with --cluster) instead of the embedded backends',
    `  --cluster NAME     the cluster name in Redis: ${NAME_RULE}`,
    `  --json FILE        results as JSON (default ${DEFAULTS.json})`,
    `  --report FILE      self-contained HTML report (default ${DEFAULTS.report})`,
    `  --seed N           exact replay of every worker's stream, integer in [0, ${LIMITS.seed.max}] (debugging only; default OS seeding)`,
    '',
    'Ctrl-C stops the run and still prints and writes what was measured (exit 130).',
    '',
    EXIT_HELP,
  ].join('\n');
}
