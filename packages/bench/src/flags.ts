/**
 * `poise bench` flags: parsing and validation. Every refusal names the flag
 * and its accepted range (`--workers: must be an integer in [1, 64], got 0`);
 * the command turns a {@link UsageError} into exit code 2.
 */
import os from 'node:os';
import { discoverySource } from 'poise-lb/discovery';
import { POLICY_NAMES, type BenchPolicyName } from './policies.js';
import { SCENARIO_NAMES, type ScenarioName } from './scenarios.js';
import {
  EXIT_HELP,
  NAME_RULE,
  UsageError,
  choiceFlag,
  DURATION_GRAMMAR,
  durationFlag,
  formatDuration,
  integerFlag,
  nameFlag,
  parseFlags,
  pathFlag,
  redisUrlFlag,
  type FlagSpecs,
} from './kit.js';

/** How a worker talks to a backend. */
export type ConnectionMode = 'persistent' | 'per-request';

/** The validated options of one `poise bench` run. */
export interface BenchFlags {
  workers: number;
  backends: number;
  concurrency: number;
  /** Seconds of measured load per policy (`--duration`, given in the CLI's duration grammar). */
  duration: number;
  /** Explicit `--policy` values, in order, without duplicates (empty: the scenario's default set). */
  policies: BenchPolicyName[];
  scenario: ScenarioName;
  connection: ConnectionMode;
  redis: string | undefined;
  cluster: string | undefined;
  /** `--discover SPEC`: membership from a discovery source (`srv:` whose targets are 127.0.0.1). */
  discover: string | undefined;
  /** `--dns-server`, repeatable. */
  dnsServers: string[];
  json: string;
  report: string;
  seed: number | undefined;
  help: boolean;
}

/** Accepted ranges, shared by validation, `--help` and the README (`duration` in ms). */
export const LIMITS = {
  workers: { min: 1, max: 64 },
  backends: { min: 3, max: 64 },
  concurrency: { min: 1, max: 1024 },
  duration: { min: 200, max: 3_600_000 },
  seed: { min: 0, max: Number.MAX_SAFE_INTEGER },
} as const;

/** Defaults sized so that the default run (6 policies) takes about 40 s on 2 cores. */
export const DEFAULTS = {
  backends: 8,
  concurrency: 16,
  /** Seconds. */
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

/** The flags `poise bench` takes (and `--help`). */
const FLAGS = {
  workers: { type: 'string' },
  backends: { type: 'string' },
  concurrency: { type: 'string' },
  duration: { type: 'string' },
  policy: { type: 'string', multiple: true },
  scenario: { type: 'string' },
  connection: { type: 'string' },
  redis: { type: 'string' },
  cluster: { type: 'string' },
  discover: { type: 'string' },
  'dns-server': { type: 'string', multiple: true },
  json: { type: 'string' },
  report: { type: 'string' },
  seed: { type: 'string' },
} as const satisfies FlagSpecs;

const CONNECTION_MODES: readonly ConnectionMode[] = ['persistent', 'per-request'];

/**
 * Parses `argv` (the words after `poise bench`). Accepts `--flag value` and
 * `--flag=value`; `--policy` may repeat. Throws {@link UsageError}.
 *
 * @example
 * parseBenchFlags(['--workers', '2', '--policy', 'random', '--policy=p2c:latency']);
 */
export function parseBenchFlags(argv: readonly string[]): BenchFlags {
  const { values: v } = parseFlags(argv, FLAGS);
  if (v.help) return { ...parseBenchFlags([]), help: true }; // --help wins over any other problem
  const int = (flag: Exclude<keyof typeof LIMITS & keyof typeof FLAGS, 'duration'>): number | undefined =>
    integerFlag(`--${flag}`, v[flag], LIMITS[flag].min, LIMITS[flag].max);
  const policies: BenchPolicyName[] = [];
  for (const raw of v.policy) {
    const p = choiceFlag('--policy', raw, POLICY_NAMES)!;
    if (!policies.includes(p)) policies.push(p);
  }
  const out: BenchFlags = {
    workers: int('workers') ?? defaultWorkers(),
    backends: int('backends') ?? DEFAULTS.backends,
    concurrency: int('concurrency') ?? DEFAULTS.concurrency,
    duration: (durationFlag('--duration', v.duration, LIMITS.duration.min, LIMITS.duration.max) ?? DEFAULTS.duration * 1000) / 1000,
    policies,
    scenario: choiceFlag('--scenario', v.scenario, SCENARIO_NAMES) ?? DEFAULTS.scenario,
    connection: choiceFlag('--connection', v.connection, CONNECTION_MODES) ?? DEFAULTS.connection,
    redis: redisUrlFlag('--redis', v.redis),
    cluster: nameFlag('--cluster', v.cluster),
    discover: v.discover,
    dnsServers: v['dns-server'],
    json: pathFlag('--json', v.json) ?? DEFAULTS.json,
    report: pathFlag('--report', v.report) ?? DEFAULTS.report,
    seed: int('seed'),
    help: false,
  };
  if ((out.redis === undefined) !== (out.cluster === undefined)) {
    const missing = out.redis === undefined ? '--redis' : '--cluster';
    throw new UsageError(`${missing}: --redis URL and --cluster NAME must be given together`, missing);
  }
  if (out.discover === undefined && out.dnsServers.length > 0) throw new UsageError('--dns-server: only with --discover', '--dns-server');
  if (out.discover !== undefined) {
    // Built (not started) only to check the spec: a bad one is a usage error naming the flag.
    try {
      discoverySource(out.discover, out.dnsServers.length > 0 ? { servers: out.dnsServers } : {}, '--discover');
    } catch (err) {
      throw new UsageError(err instanceof Error ? err.message : String(err), '--discover');
    }
  }
  if ((out.redis !== undefined || out.discover !== undefined) && out.scenario !== 'slow-backend' && out.scenario !== 'uniform') {
    const from = out.discover !== undefined ? '--discover' : '--redis';
    throw new UsageError(
      `--scenario: with ${from} only slow-backend or uniform apply (membership comes from ${from === '--redis' ? 'Redis' : 'discovery'}), got ${JSON.stringify(out.scenario)}`,
      '--scenario',
    );
  }
  if (out.scenario === 'failover' && out.backends < 4) {
    throw new UsageError(
      `--backends: the failover scenario needs an integer in [4, ${LIMITS.backends.max}], got ${out.backends}`,
      '--backends',
    );
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
    'a duration D per policy; prints one table, writes an HTML report and the same data as JSON.',
    '',
    'flags:',
    `  --workers N        worker threads, integer in [${LIMITS.workers.min}, ${LIMITS.workers.max}] (default: cores = ${defaultWorkers()})`,
    `  --backends K       backends, integer in [${LIMITS.backends.min}, ${LIMITS.backends.max}] (default ${DEFAULTS.backends})`,
    `  --concurrency C    concurrent requests per worker, integer in [${LIMITS.concurrency.min}, ${LIMITS.concurrency.max}] (default ${DEFAULTS.concurrency})`,
    `  --duration D       load per policy, in [${formatDuration(LIMITS.duration.min)}, ${formatDuration(LIMITS.duration.max)}] (default ${DEFAULTS.duration}s);`,
    `                     ${DURATION_GRAMMAR}: 500ms, 10s, 2m`,
    `  --policy NAME      repeatable; one of ${POLICY_NAMES.join(', ')}`,
    `                     (default: round-robin, random, weighted, least-loaded, p2c:connections, p2c:latency)`,
    `  --scenario NAME    ${SCENARIO_NAMES.join(' | ')} (default ${DEFAULTS.scenario})`,
    `  --connection MODE  persistent | per-request TCP connections (default ${DEFAULTS.connection})`,
    '  --redis URL        take membership from Redis (with --cluster) instead of the embedded backends',
    `  --cluster NAME     the cluster name in Redis: ${NAME_RULE}`,
    '  --discover SPEC    take membership from a discovery source instead (srv:SERVICE whose targets are 127.0.0.1:<port>)',
    "  --dns-server IP[:PORT]  the DNS server --discover asks (repeatable; default the system's)",
    '                   --discover with --redis and --cluster: fleet mode (this process joins the election; the',
    '                   elected process runs the discovery and publishes it into Redis; the run reads Redis)',
    `  --json FILE        results as JSON (default ${DEFAULTS.json})`,
    `  --report FILE      self-contained HTML report (default ${DEFAULTS.report})`,
    `  --seed N           exact replay of every worker's stream, integer in [0, ${LIMITS.seed.max}] (debugging only; default OS seeding)`,
    '',
    'Ctrl-C stops the run and still prints and writes what was measured (exit 130).',
    '',
    EXIT_HELP,
  ].join('\n');
}
