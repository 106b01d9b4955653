/**
 * `poise proxy`: a TCP load balancer in front of a pool of backends.
 *
 *     poise proxy --listen 127.0.0.1:6000 --backend a=127.0.0.1:7001 --backend b=127.0.0.1:7002
 *     poise proxy --listen 127.0.0.1:6000 --file members.json
 *     poise proxy --listen 127.0.0.1:6000 --redis redis://127.0.0.1:6379 --cluster api
 *
 * Without a first valid membership (nothing stored in Redis, a stored value
 * that is not a valid snapshot, a missing or invalid file, Redis down) the
 * proxy does not listen: it logs why every few seconds and starts listening
 * when one is applied — or, with `--require-membership`, exits at once with
 * the reason's exit code. Exit codes come from exit.ts (the one table).
 */
import os from 'node:os';
import { PoiseError } from '../core/errors.js';
import { addressDetail, parseAddress, resolveBackendSpecs, type BackendSpec } from '../core/spec.js';
import type { Logger } from '../log.js';
import { bindMembership, type MembershipBinding, type MembershipSource } from '../membership/source.js';
import { StaticMembership } from '../membership/static.js';
import type { RedisMembershipOptions } from '../membership/redis-source.js';
import type { ConnectionOptions } from '../proxy/options.js';
import { TcpProxy, reusePortSupported } from '../proxy/tcp-proxy.js';
import { MAX_CONNECTIONS_LIMIT } from '../proxy/connection-limit.js';
import { Balancer } from '../runtime/balancer.js';
import { useProcessClockTicker } from '../runtime/clock.js';
import { POLICY_NAMES, type PolicyName } from '../runtime/policies.js';
import { DURATION_GRAMMAR, choiceFlag, durationFlag, integerFlag, nameFlag, parseFlags, type FlagSpecs, type FlagValues } from './args.js';
import { EXIT, EXIT_HELP } from './exit.js';
import { cliLogger } from './logger.js';
import { flagCommand, type Command } from './command.js';
import { CONNECTION_FLAGS, CONNECTION_HELP, connectionFlags } from './proxy-connection-flags.js';
import { METRICS_FLAGS, METRICS_HELP, metricsFlag, startMetrics } from './proxy-metrics-flags.js';
import { ProxyCounters } from '../proxy/counters.js';
import type { MetricsServer } from '../metrics/server.js';
import {
  ADMISSION_FLAGS,
  ADMISSION_HELP,
  admissionFlags,
  noAdmission,
  proxyAdmission,
  workerAdmission,
  type AdmissionFlags,
  type ProxyAdmissionRun,
  type WorkerAdmissionRun,
} from './proxy-admission-flags.js';
import { waitForMembership } from './proxy-wait.js';
import { letYoungGenerationsGrow } from './young-generation.js';
import { REDIS_FLAGS, redisFlags } from './redis-flags.js';
import { DISCOVER_FLAGS, DISCOVER_FLAGS_HELP, FLEET_FLAGS_HELP, discoverFlag, fleetSource } from './discover-flags.js';
import { UsageError } from './usage.js';
import type { HealthCheckOptions } from '../health/config.js';
import { checkFlags } from './proxy-check-flags.js';

/** A day in ms: the longest --grace and check interval or timeout. */
const DAY_MS = 86_400_000;

const HELP = `usage: poise proxy --listen HOST:PORT (--backend [ID=]HOST:PORT ... | --file PATH | --redis URL --cluster NAME | --discover SPEC [--redis URL --cluster NAME]) [flags]

Accepts TCP connections on --listen and splices each onto a backend chosen
by the policy; a refused or timed-out connect is retried on another backend
and counts towards passive-health ejection.

membership (exactly one source; --discover with --redis is fleet mode):
  --backend [ID=]HOST:PORT a backend, repeatable (weight 1, priority 0); without ID= its
                           id is HOST:PORT. An address has no scheme: 127.0.0.1:7001,
                           db.internal:5432, [::1]:6379
  --file PATH              a membership document (JSON or YAML), watched for changes
  --redis URL --cluster NAME [--prefix P]
                           the Redis control plane (see \`poise members\`); URL may be
                           redis+sentinel://host:port[,host:port...]/master-name[?db=N]
  --sentinel HOST:PORT,... --sentinel-name NAME   (instead of --redis) the master these sentinels monitor
  --redis-cluster HOST:PORT,...                   (instead of --redis) a Redis Cluster, by seed nodes
${DISCOVER_FLAGS_HELP}
${FLEET_FLAGS_HELP}

Until a first valid membership is applied (nothing stored in Redis, a stored value
that is not a valid snapshot, a missing or invalid --file, Redis down), the proxy
does NOT listen: clients are refused, never accepted and reset. It logs why every
--wait-log-interval and starts listening as soon as one arrives. With
--require-membership it exits instead, at once, naming the reason (exit 3 invalid
file, 4 nothing stored / no such file, 6 more backends than --capacity, 7 corrupt
stored snapshot, 1 Redis unavailable).

flags (durations D: ${DURATION_GRAMMAR}: 500ms, 2s, 1m):
  --listen HOST:PORT       listen address (required)
  --policy NAME            ${POLICY_NAMES.join(' | ')}
                           (default p2c:latency: PeakEWMA of each request-reply
                           turn x in-flight turns; it avoids a slow backend)
  --capacity N             backend slots in the load table, 1..65536 (default 1024)
  --workers N              accepting threads, the main thread included, 0..64 (default: the
                           number of cores on Node >= 22.12 on Linux, else 1): the main
                           thread and N-1 worker threads. There each listens on the same
                           port (reusePort) with its own router over the shared load
                           table; elsewhere the main thread alone accepts, and one log
                           line says so when --workers asked for more. 0: the main thread
                           alone, with V8's default young generation (1 keeps it small)
  --max-connections N      connections served at once, all workers together, 0 = no
                           limit (default 0); clients over it wait unread, never reset
  --grace D                on SIGTERM/SIGINT stop accepting and let open connections
                           finish for D, then close the rest and exit 0, 0ms..24h
                           (default 30s; a second signal exits at once)
  --require-membership     fail at start when no valid membership is available (default: wait)
  --wait-log-interval D    while waiting for a membership, log why every D, 100ms..10m (default 5s)
  --check KIND             active health check of every backend: tcp | http:/PATH | redis | postgres
                           (default none; a document's health block applies too, see docs/health.md)
  --check-interval D       between checks, 10ms..24h (default 2s)
  --check-timeout D        a check slower than this fails, 1ms..24h (default 1s)
  --rise N                 passes that bring a down backend back, 1..1000 (default 2)
  --fall N                 failures that take a backend down, 1..1000 (default 3)
  --log-level LEVEL        fatal | error | warn | info | debug | trace | silent (default info)
  -h, --help               this text

${CONNECTION_HELP}

${METRICS_HELP}

${ADMISSION_HELP}

See docs/proxy.md for the full reference.

${EXIT_HELP}
            (0 also after a clean stop on SIGINT/SIGTERM)`;

const OPTIONS = {
  listen: { type: 'string' },
  backend: { type: 'string', multiple: true },
  file: { type: 'string' },
  ...REDIS_FLAGS,
  ...DISCOVER_FLAGS,
  cluster: { type: 'string' },
  prefix: { type: 'string' },
  policy: { type: 'string' },
  ...CONNECTION_FLAGS,
  ...METRICS_FLAGS,
  ...ADMISSION_FLAGS,
  capacity: { type: 'string' },
  workers: { type: 'string' },
  'max-connections': { type: 'string' },
  grace: { type: 'string' },
  'require-membership': { type: 'boolean' },
  'wait-log-interval': { type: 'string' },
  check: { type: 'string' },
  'check-interval': { type: 'string' },
  'check-timeout': { type: 'string' },
  rise: { type: 'string' },
  fall: { type: 'string' },
  'log-level': { type: 'string' },
  'watcher-lease': { type: 'string' },
} as const satisfies FlagSpecs;

type Values = FlagValues<typeof OPTIONS>;

/** The validated flags of one run. @internal */
export interface ProxyFlags {
  listen: { host: string; port: number };
  policy: PolicyName;
  connection: ConnectionOptions;
  admission: AdmissionFlags | undefined;
  capacity: number;
  workers: number;
  maxConnections: number;
  graceMs: number;
  requireMembership: boolean;
  waitLogMs: number;
  check: HealthCheckOptions | undefined;
  log: Logger;
  /**
   * Builds the membership source (not started). Redis's is imported here, on
   * first use: ioredis is about a fifth of an idle proxy's RSS, and a proxy
   * over --backend or --file never needs it.
   */
  openSource: () => Promise<MembershipSource>;
  /** `--metrics`: where to serve /metrics and /healthz, and whether with the process metrics. */
  metrics: { host: string; port: number; processMetrics: boolean } | undefined;
  /** `--watcher-lease` (fleet mode), ms; undefined: the watcher's default (15 s). */
  watcherLeaseMs: number | undefined;
  /** The `cluster` label of the metrics: `--cluster`; undefined: the membership's own (a --file document's "cluster"), else "default". */
  cluster: string | undefined;
}

/**
 * `--backend` values: the flag's shape (`ID=HOST:PORT`, or `HOST:PORT`, which
 * is then its own id) is usage (exit 2); the backends' content — a bad address, a
 * duplicate or over-long id — is validation (exit 3), with the same messages
 * as a document; more backends than `--capacity` is exit 6.
 */
function backendFlags(raws: readonly string[], capacity: number): BackendSpec[] {
  const specs = raws.map((raw, i) => {
    const eq = raw.indexOf('=');
    const id = eq > 0 ? raw.slice(0, eq) : raw;
    const address = eq > 0 ? raw.slice(eq + 1) : raw;
    if (!/:\d+$/.test(address))
      throw new UsageError(
        `--backend #${i + 1}: must be [ID=]HOST:PORT with a port in [1, 65535], got ${JSON.stringify(raw)}`,
        '--backend',
      );
    return { id, address };
  });
  resolveBackendSpecs(specs, '--backend');
  if (specs.length > capacity) {
    throw new PoiseError('CapacityExhausted', `--backend: ${specs.length} backends given, more than --capacity ${capacity}`, {
      field: '--capacity',
    });
  }
  return specs;
}

/**
 * Reads every flag of `poise proxy` into one run description, in the usage
 * text's order (each a line or two: one piece, so the flags read as the
 * usage does; each group with more than a line has a parser of its own).
 */
function proxyFlags(values: Values): ProxyFlags {
  const log = cliLogger('poise-proxy', { flag: '--log-level', flagLevel: values['log-level'], dflt: 'info', pretty: process.stderr.isTTY });
  const at = values.listen === undefined ? undefined : parseAddress(values.listen);
  if (at === undefined) {
    const detail = values.listen === undefined ? undefined : addressDetail(values.listen);
    throw new UsageError(
      `--listen: required, HOST:PORT with a port in [1, 65535], got ${JSON.stringify(values.listen ?? null)}${detail ? ` (${detail})` : ''}`,
      '--listen',
    );
  }
  const policy = choiceFlag('--policy', values.policy, POLICY_NAMES) ?? 'p2c:latency';
  const capacity = integerFlag('--capacity', values.capacity, 1, 65536) ?? 1024;
  const requireMembership = values['require-membership'];
  // The default is what this Node can run: no warning about a --workers nobody passed.
  const workers = integerFlag('--workers', values.workers, 0, 64) ?? (reusePortSupported() ? Math.min(64, os.availableParallelism()) : 1);
  const maxConnections = integerFlag('--max-connections', values['max-connections'], 0, MAX_CONNECTIONS_LIMIT) ?? 0;
  const graceMs = durationFlag('--grace', values.grace, 0, DAY_MS) ?? 30_000;
  // Every flag is checked before a source is built: a usage error leaves nothing open.
  const connection = connectionFlags(values, policy);
  const admission = admissionFlags(values);
  const waitLogMs = durationFlag('--wait-log-interval', values['wait-log-interval'], 100, 600_000) ?? 5000;
  const check = checkFlags(values);
  const metrics = metricsFlag(values);
  const redis = redisFlags(values);
  const discovered = discoverFlag(values, log, requireMembership ? 'reject' : 'wait');
  const fleet = discovered !== undefined && redis !== undefined;
  const given = [
    values.backend.length > 0 ? '--backend' : undefined,
    values.file !== undefined ? '--file' : undefined,
    redis !== undefined && !fleet ? '--redis' : undefined,
    discovered !== undefined ? (fleet ? '--discover with --redis' : '--discover') : undefined,
  ].filter((g) => g !== undefined);
  if (given.length === 0)
    throw new UsageError(
      'membership: give exactly one of --backend, --file, --redis (or --sentinel, --redis-cluster), --discover; --discover with --redis is fleet mode',
    );
  if (given.length > 1)
    throw new UsageError(
      `${given[1]!.split(' ')[0]}: not with ${given[0]} (one membership source; --discover takes --redis only, for fleet mode)`,
      given[1]!.split(' ')[0],
    );
  if (redis !== undefined && values.cluster === undefined) throw new UsageError('--cluster: required with --redis', '--cluster');
  const watcherLease = durationFlag('--watcher-lease', values['watcher-lease'], 100, 600_000);
  if (watcherLease !== undefined && !fleet)
    throw new UsageError('--watcher-lease: only in fleet mode (--discover with --redis)', '--watcher-lease');
  const cluster = nameFlag('--cluster', values.cluster);
  const prefix = nameFlag('--prefix', values.prefix);
  let openSource: () => Promise<MembershipSource>;
  if (fleet && cluster !== undefined && values.discover !== undefined) {
    const spec = { ...values, discover: values.discover };
    openSource = () => fleetSource(spec, { redis, cluster, prefix, leaseMs: watcherLease, failFast: requireMembership }, log);
  } else if (redis !== undefined && cluster !== undefined) {
    const options: RedisMembershipOptions = { ...redis, cluster, prefix, logger: log, failFast: requireMembership };
    openSource = async () => new (await import('../membership/redis-source.js')).RedisMembership(options);
  } else if (discovered !== undefined) {
    openSource = () => Promise.resolve(discovered);
  } else if (values.file !== undefined) {
    const file = values.file;
    openSource = () =>
      Promise.resolve(new StaticMembership({ file }, { watch: true, logger: log, initial: requireMembership ? 'reject' : 'wait' }));
  } else {
    const source = new StaticMembership({ backends: backendFlags(values.backend, capacity) }, { logger: log });
    openSource = () => Promise.resolve(source);
  }
  return {
    listen: at,
    policy,
    connection,
    admission,
    capacity,
    workers,
    maxConnections,
    graceMs,
    requireMembership,
    waitLogMs,
    check,
    log,
    openSource,
    metrics,
    cluster,
    watcherLeaseMs: watcherLease,
  };
}

/**
 * `stopped` resolves on the first SIGINT or SIGTERM (the drain starts); a
 * second one exits at once (code 0, open connections cut). `dispose`
 * removes the handlers.
 */
function stopSignal(log: Logger): { stopped: Promise<void>; dispose: () => void } {
  let signals = 0;
  let onSignal: (signal: string) => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    onSignal = (signal: string): void => {
      if (++signals > 1) {
        log.warn({ signal }, 'proxy: second signal, exiting at once');
        process.exit(EXIT.ok);
      }
      log.info({ signal }, 'proxy stopping');
      resolve();
    };
  });
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { stopped, dispose: () => (process.off('SIGINT', onSignal), process.off('SIGTERM', onSignal)) };
}

/** Binds the source; resolves with the binding once a membership is in force, or undefined when stopped first. Throws the reason otherwise. */
async function firstMembership(f: ProxyRun, balancer: Balancer, stopped: Promise<void>): Promise<MembershipBinding | undefined> {
  let onApplied: () => void = () => {};
  const applied = new Promise<void>((resolve) => {
    onApplied = resolve;
  });
  const bound = bindMembership(f.source, balancer, { logger: f.log, onApplied: () => onApplied() });
  if (f.requireMembership) {
    const binding = await bound;
    if (balancer.hasMembership) return binding;
    await binding.close();
    const p = f.source.problem;
    throw new PoiseError(
      p?.code ?? 'NotFound',
      `--require-membership: no valid membership at start: ${p?.message ?? 'the source delivered none'}`,
      {
        field: p?.field ?? 'membership',
        cause: p,
      },
    );
  }
  const result = await waitForMembership({
    applied,
    started: bound,
    stopped,
    hasMembership: () => balancer.hasMembership,
    problem: () => f.source.problem,
    log: f.log,
    everyMs: f.waitLogMs,
  });
  if (result.kind === 'failed') throw result.error;
  if (result.kind === 'stopped') {
    await f.source.close();
    return undefined;
  }
  return bound;
}

/** The flags of a run with its membership source built. */
type ProxyRun = ProxyFlags & { source: MembershipSource };

/**
 * The run's listeners: the main one (`--listen`) and, with `--band`, the
 * admission run — without bands, one TcpProxy over the balancer; with bands
 * and worker threads, a gate per worker of every listener; with bands in
 * one thread, one gate on one router shared by every band listener.
 */
function listeners(
  f: ProxyRun,
  balancer: Balancer,
  counters: ProxyCounters,
  bandWorkers: boolean,
): { admission: ProxyAdmissionRun; main: ConstructorParameters<typeof TcpProxy>[0] } {
  const common = { ...f.connection, counters, logger: f.log };
  let admission: ProxyAdmissionRun;
  let main: ConstructorParameters<typeof TcpProxy>[0];
  const listen = { maxConnections: f.maxConnections, host: f.listen.host, port: f.listen.port, ...common };
  if (f.admission === undefined) {
    admission = noAdmission();
    main = { balancer, policy: f.policy, workers: f.workers, thisThreadAccepts: f.workers > 0, ...listen };
  } else if (bandWorkers) {
    // Every worker thread of every listener gates with its own AdmissionGate over its own router.
    const w = workerAdmission(
      f.admission,
      f.log,
      (host, port, band, l, gate) =>
        new TcpProxy({
          balancer,
          policy: f.policy,
          workers: f.workers,
          thisThreadAccepts: true,
          worker: (l + 1) * f.workers,
          host,
          port,
          ...common,
          admission: band,
          admissionGate: gate,
        }),
    );
    admission = w;
    main = {
      balancer,
      policy: f.policy,
      workers: f.workers,
      thisThreadAccepts: true,
      ...listen,
      admission: w.main,
      admissionGate: w.gateOptions,
    };
  } else {
    // --workers 0 with --band: one AdmissionGate on one router in this thread, shared by every band listener.
    const r = balancer.router({ policy: f.policy, logger: f.log });
    admission = proxyAdmission(
      r,
      f.admission,
      f.log,
      (host, port, band) => new TcpProxy({ router: r, host, port, ...common, admission: band }),
    );
    main = { router: r, ...listen, admission: admission.main };
  }
  return { admission, main };
}

/** Opens `--listen`, then every band listener; a failure closes what opened and names the flag (and the descriptor limit). */
async function listenAll(f: ProxyRun, proxy: TcpProxy, admission: ProxyAdmissionRun, binding: { close(): Promise<void> }): Promise<void> {
  try {
    await proxy.listen();
  } catch (err) {
    await binding.close();
    const message = (err as Error).message;
    // Out of descriptors: say which limit, and what else spends it.
    const hint = !message.includes('EMFILE')
      ? ''
      : ` (the process's descriptor limit, ulimit -n, is reached${f.workers > 0 ? '; each worker thread needs descriptors of its own: lower --workers or raise the limit' : ''})`;
    throw new PoiseError('Unavailable', `--listen: cannot listen on ${f.listen.host}:${f.listen.port}: ${message}${hint}`, {
      field: '--listen',
      cause: err,
    });
  }
  try {
    await admission.listen();
  } catch (err) {
    await Promise.all([proxy.close(), admission.close(), binding.close()]);
    throw err;
  }
}

async function serve(flags: ProxyFlags): Promise<number> {
  const f: ProxyRun = { ...flags, source: await flags.openSource() };
  // With --workers N >= 1 this thread is one of the N accepting threads
  // (TcpProxy's thisThreadAccepts: one isolate less) and serves membership
  // and metrics: the shared clock ticks on its event loop rather than in a
  // thread of its own (an isolate: 9–13 MB of RSS) — every proxy router
  // reads the time directly (directClock), so a tick late behind a busy loop
  // delays no connection — and no isolate's young generation grows past its
  // initial size (young-generation.ts, set by main.ts). With --workers 0 the
  // clock keeps its thread and V8 grows the young generation as usual.
  if (f.workers > 0) useProcessClockTicker('loop');
  else letYoungGenerationsGrow();
  const balancer = new Balancer({ capacity: f.capacity, logger: f.log, ...(f.check === undefined ? {} : { health: { check: f.check } }) });
  const { stopped, dispose } = stopSignal(f.log);
  // One counter row per accepting thread: worker i of --listen counts into row i; with --band and
  // --workers, band listener l's worker i into row (l + 1) * workers + i; with --band alone the main thread accepts.
  const bandWorkers = f.admission !== undefined && f.workers > 0;
  const rows = f.admission === undefined ? f.workers : bandWorkers ? f.workers * (1 + f.admission.listeners.length) : 1;
  const counters = ProxyCounters.create({ workers: Math.max(1, rows) });
  let proxy: TcpProxy | undefined;
  let admissionRun: ProxyAdmissionRun | undefined;
  let metrics: MetricsServer | undefined;
  try {
    // Up before the first membership, so /healthz can say why the proxy is not ready yet.
    if (f.metrics !== undefined) {
      // With --band the gates exist once a membership is in force; until then their bands read empty.
      const admission = f.admission === undefined ? undefined : { admissionStats: () => admissionRun?.admissionStats?.() ?? { bands: [] } };
      metrics = await startMetrics(f.metrics, {
        balancer,
        counters,
        source: f.source,
        cluster: f.cluster,
        admission,
        beforeScrape: () => admissionRun?.refresh() ?? Promise.resolve(),
        // Ready only once every listener accepts in every thread: --listen first, then each --band listener.
        notAccepting: () => (proxy?.listening !== true ? 'the proxy listener is not up' : admissionRun?.notAccepting()),
      });
      f.log.info({ address: `${metrics.address().address}:${metrics.address().port}` }, 'metrics listening');
    }
    const binding = await firstMembership(f, balancer, stopped);
    if (binding === undefined) return EXIT.ok;
    const { admission, main } = listeners(f, balancer, counters, bandWorkers);
    admissionRun = admission;
    proxy = new TcpProxy(main);
    if (bandWorkers) (admission as WorkerAdmissionRun).track(proxy);
    await listenAll(f, proxy, admission, binding);
    f.log.info({ policy: f.policy, version: balancer.version, threads: proxy.threads }, 'proxy ready');
    await stopped;
    await proxy.stopAccepting();
    f.log.info(
      { graceMs: f.graceMs, connections: proxy.connections },
      'proxy draining: not accepting; open connections finish within the grace',
    );
    const [{ cut }] = await Promise.all([proxy.close({ drain: true, graceMs: f.graceMs }), admission.close()]);
    f.log.info({ cut }, 'proxy drained');
    await binding.close();
    return EXIT.ok;
  } finally {
    dispose();
    await metrics?.close();
    balancer.close();
  }
}

/**
 * `argv` (the words after `poise proxy`) as the validated flags of a run,
 * without starting anything (the membership source is built, not started).
 * Throws {@link UsageError} or `PoiseError` as the command would. @internal
 */
export function parseProxyArgs(argv: readonly string[]): ProxyFlags {
  return proxyFlags(parseFlags(argv, OPTIONS).values);
}

/** The `--help` text. @internal */
export const PROXY_HELP = HELP;

const run = flagCommand('proxy', OPTIONS, HELP, (values) => serve(proxyFlags(values)));

/** The `proxy` subcommand. */
export const command: Command = {
  summary: 'TCP load balancer in front of a pool of backends',
  run,
};
