/**
 * Health configuration: active checks (HAProxy's `inter`/`fastinter`/
 * `downinter`/`rise`/`fall`, Envoy's `interval_jitter_percent` and
 * `timeout`) and outlier detection (Envoy's `outlier_detection`), with their
 * validation. Every error is a `PoiseError` `InvalidConfig` naming the field
 * (`<path>.intervalMs`, ...) and the reason. Pure: no I/O, no timers.
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { resolveOrca, type OrcaOptions, type ResolvedOrca } from './orca.js';
import { resolveProbe, type ProbeOptions, type ResolvedProbe } from './probe-pool.js';

/** What an active check concludes about one backend. */
export type CheckVerdict = 'healthy' | 'degraded' | 'unhealthy';

/** The backend a check probes. */
export interface CheckTarget {
  id: string;
  host: string;
  port: number;
  /** The spec's address, as written. */
  address: string;
}

/** A custom check: resolve `true`/`'healthy'`, `'degraded'`, or `false`/`'unhealthy'`; a rejection or the timeout is a failure. */
export type CustomCheck = (target: CheckTarget, signal: AbortSignal) => Promise<CheckVerdict | boolean>;

/** A client a postgres check runs `SELECT 1` through (a pg `Client`/`Pool` fits). */
export interface QueryClient {
  query(sql: string): Promise<unknown>;
}

/** Check kinds. */
export type CheckKind = 'tcp' | 'http' | 'redis' | 'postgres' | 'mysql' | 'custom' | 'agent';

/** One active health check, run by the Balancer's owner thread against every backend of the cluster. */
export interface HealthCheckOptions {
  /**
   * `tcp` (connect), `http` (GET), `redis` (PING → PONG), `postgres` (startup
   * to ReadyForQuery, or `SELECT 1` through `client`), `mysql` (a full login
   * and COM_QUIT; MySQL or MariaDB), `custom`, or `agent`
   * (HAProxy's agent protocol on `agentPort`: the backend answers a weight
   * percentage, `drain`, `maint`, `ready`, `up`, `down`; docs/resilience.md).
   */
  kind: CheckKind;
  /** Interval between checks of a healthy backend, ms; default 2000 (HAProxy `inter`). */
  intervalMs?: number;
  /** Interval while a backend is changing state (failed once but not yet `fall` times, or passed but not yet `rise` times), ms; default `intervalMs` (HAProxy `fastinter`). */
  fastIntervalMs?: number;
  /** Interval while a backend is down, ms; default `intervalMs` (HAProxy `downinter`). */
  unhealthyIntervalMs?: number;
  /** Each interval is stretched by a uniform random 0..jitterPercent % (Envoy `interval_jitter_percent`); default 10. */
  jitterPercent?: number;
  /** A check not finished after this many ms failed; default 1000. */
  timeoutMs?: number;
  /** Consecutive passes that bring a down backend back up; default 2 (HAProxy `rise`). */
  rise?: number;
  /** Consecutive failures that take an up backend down; default 3 (HAProxy `fall`). */
  fall?: number;
  /** http: the path requested with GET; default `/`. */
  path?: string;
  /** http: accepted status range `[low, high]`, inclusive; default `[200, 399]` (HAProxy's 2xx/3xx). */
  expectedStatus?: readonly [number, number];
  /** http: the body (its first 64 KiB) must contain this text. */
  bodyIncludes?: string;
  /** http: a reply carrying this header is degraded; default `x-envoy-degraded` (Envoy's). */
  degradedHeader?: string;
  /** http, tcp, redis, postgres, custom: a passing reply slower than this many ms is degraded; default none. */
  degradedAfterMs?: number;
  /** postgres, mysql: the user; default `postgres` (mysql: `root`). */
  user?: string;
  /** postgres: the startup database; default the user. */
  database?: string;
  /** postgres: run `SELECT 1` through this client instead of a handshake. */
  client?: QueryClient;
  /**
   * postgres, mysql: also read the server's role (`pg_is_in_recovery()`; mysql `@@read_only`), a
   * replica's replay lag and the WAL position (LSN) on every check, into the
   * LoadTable for `acquire({ intent })` (docs/health.md, "Database roles");
   * default false. A failed check makes the role unknown.
   */
  roles?: boolean;
  /** custom: the check itself. */
  check?: CustomCheck;
  /** agent: the agent's TCP port on the backend's host; default the backend's own port. */
  agentPort?: number;
  /** agent: a line sent to the agent before it answers (HAProxy `agent-send`); default none. */
  agentSend?: string;
  /**
   * A passing check of an up backend ends its ejection (passive or outlier)
   * at once instead of waiting out the ejection time; default true (Envoy's
   * `successful_active_health_check_uneject_host`). The ejection count, so
   * the next ejection's length, is kept.
   */
  unejectOnPass?: boolean;
}

/** A check with every default filled in. @internal */
export interface ResolvedHealthCheck {
  kind: CheckKind;
  intervalMs: number;
  fastIntervalMs: number;
  unhealthyIntervalMs: number;
  jitterPercent: number;
  timeoutMs: number;
  rise: number;
  fall: number;
  path: string;
  expectedStatus: readonly [number, number];
  bodyIncludes: string | undefined;
  degradedHeader: string;
  degradedAfterMs: number | undefined;
  user: string;
  database: string;
  client: QueryClient | undefined;
  roles: boolean;
  check: CustomCheck | undefined;
  agentPort: number | undefined;
  agentSend: string | undefined;
  unejectOnPass: boolean;
}

/** Outlier detection, as Envoy's `outlier_detection` (names camelCased, times in ms). */
export interface OutlierOptions {
  /** Time between ejection sweeps, ms; default 10000 (Envoy `interval`). */
  intervalMs?: number;
  /** An ejection lasts baseEjectionTimeMs × (times ejected), ms; default 30000. */
  baseEjectionTimeMs?: number;
  /** Ceiling on one ejection, ms; default 300000 (Envoy `max_ejection_time`). */
  maxEjectionTimeMs?: number;
  /**
   * Never eject past this share of the cluster, percent; default 10. An
   * outlier is ejected only if the ejected share *after* its ejection stays
   * at or below this, as Envoy checks it: with the default, a cluster of
   * fewer than 10 hosts ejects nobody unless `alwaysEjectOneHost` is set.
   */
  maxEjectionPercent?: number;
  /**
   * Allow one ejection while nothing else is ejected, whatever
   * `maxEjectionPercent` says; default false (Envoy's `always_eject_one_host`).
   */
  alwaysEjectOneHost?: boolean;
  /** Success rate: hosts with at least this many requests in the interval are judged; default 100. */
  successRateRequestVolume?: number;
  /** Success rate: at least this many such hosts, or nothing is judged; default 5. */
  successRateMinimumHosts?: number;
  /** Success rate: eject below mean − (factor / 1000) × stdev; default 1900 (1.9 σ). */
  successRateStdevFactor?: number;
  /** Success rate: percent chance an outlier is really ejected; default 100 (0 turns it off). */
  enforcingSuccessRate?: number;
  /** Failure percentage: eject at or above this failure percent; default 85. */
  failurePercentageThreshold?: number;
  /** Failure percentage: minimum requests in the interval; default 50. */
  failurePercentageRequestVolume?: number;
  /** Failure percentage: minimum judged hosts; default 5. */
  failurePercentageMinimumHosts?: number;
  /** Failure percentage: percent chance an outlier is ejected; default 100 (Envoy: 0; docs/health.md says why). */
  enforcingFailurePercentage?: number;
}

/** Outlier options with every default filled in (what {@link findOutliers} takes). */
export type ResolvedOutlier = Required<OutlierOptions>;

/** The health part of a membership document, or of BalancerOptions. */
export interface HealthConfig {
  check?: HealthCheckOptions;
  outlier?: OutlierOptions;
  /** Backend-reported weights from each backend's load endpoint (gRFC A58 rules; docs/resilience.md). */
  orca?: OrcaOptions;
  /**
   * An agent check beside `check` (HAProxy's `check` + `agent-check`): the
   * active check decides up / down; the agent sets the weight, `drain` /
   * `maint` / `ready`, and may also mark the backend down (until it says
   * `up`). An agent that cannot be reached changes nothing.
   */
  agent?: AgentCheckOptions;
  /** The probe pool of the `probe` policy: the owner probes backends within a budget (docs/policies.md, "Probe"). */
  probe?: ProbeOptions;
}

/** The agent check run beside the active check (`health.agent`). */
export interface AgentCheckOptions {
  /** The agent's TCP port on the backend's host; default the backend's own port (HAProxy `agent-port`). */
  agentPort?: number;
  /** A line sent to the agent before it answers (HAProxy `agent-send`); default none. */
  agentSend?: string;
  /** Interval between two agent checks, ms; default 2000 (HAProxy `agent-inter`). */
  intervalMs?: number;
  /** Each interval stretched by a uniform random 0..jitterPercent %; default 10. */
  jitterPercent?: number;
  /** An agent not answered after this many ms is skipped (nothing changes); default 1000. */
  timeoutMs?: number;
}

const AGENT_KEYS = ['agentPort', 'agentSend', 'intervalMs', 'jitterPercent', 'timeoutMs'];

/** Validates `health.agent`, the agent beside the active check (`InvalidConfig` naming `<path>.<field>`). @internal */
export function resolveAgentCheck(value: unknown, path: string): ResolvedHealthCheck {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    invalidConfig(path, 'must be an object { agentPort?, agentSend?, intervalMs?, jitterPercent?, timeoutMs? }', value);
  checkOptionKeys(value, AGENT_KEYS, path);
  // The same fields and rules as a check of kind agent; it never ends an ejection (the active check's call).
  return resolveHealthCheck({ ...(value as AgentCheckOptions), kind: 'agent', unejectOnPass: false }, path, true);
}

const KINDS: readonly CheckKind[] = ['tcp', 'http', 'redis', 'postgres', 'mysql', 'custom', 'agent'];
const CHECK_KEYS = [
  'kind',
  'intervalMs',
  'fastIntervalMs',
  'unhealthyIntervalMs',
  'jitterPercent',
  'timeoutMs',
  'rise',
  'fall',
  'path',
  'expectedStatus',
  'bodyIncludes',
  'degradedHeader',
  'degradedAfterMs',
  'user',
  'database',
  'client',
  'roles',
  'check',
  'agentPort',
  'agentSend',
  'unejectOnPass',
];

function int(path: string, value: unknown, def: number, min: number, max: number): number {
  const v = value ?? def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) invalidConfig(path, `must be an integer in [${min}, ${max}]`, v);
  return v;
}

function str(path: string, value: unknown, def: string, pattern?: RegExp, what = 'a non-empty string'): string {
  const v = value ?? def;
  if (typeof v !== 'string' || v.length === 0 || v.length > 1024 || (pattern !== undefined && !pattern.test(v)))
    invalidConfig(path, `must be ${what}`, v);
  return v;
}

const DAY = 86_400_000;

/**
 * Validates an active check. `json` refuses the two function-valued
 * fields (`client`, `check`), which a membership document cannot carry.
 * Fields are read in a fixed order (timing, then the http fields, the
 * database fields, the custom and agent fields, the flags): the first bad
 * one is the one named.
 * @internal
 */
export function resolveHealthCheck(value: unknown, path: string, json = false): ResolvedHealthCheck {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    invalidConfig(path, 'must be an object { kind, intervalMs?, ... }', value);
  checkOptionKeys(value, json ? CHECK_KEYS.filter((k) => k !== 'client' && k !== 'check') : CHECK_KEYS, path);
  const o = value as HealthCheckOptions;
  if (!KINDS.includes(o.kind)) invalidConfig(`${path}.kind`, `must be one of ${KINDS.map((k) => `"${k}"`).join(', ')}`, o.kind);
  const timing = checkTiming(o, path);
  const http = httpFields(o, path, timing.timeoutMs);
  const db = databaseFields(o, path);
  const custom = customAndAgentFields(o, path);
  const roles = o.roles ?? false;
  if (typeof roles !== 'boolean') invalidConfig(`${path}.roles`, 'must be a boolean', roles);
  const unejectOnPass = o.unejectOnPass ?? true;
  if (typeof unejectOnPass !== 'boolean') invalidConfig(`${path}.unejectOnPass`, 'must be a boolean', unejectOnPass);
  return { kind: o.kind, ...timing, ...http, ...db, roles, ...custom, unejectOnPass };
}

/** A check's schedule: intervals, jitter, timeout, rise and fall. */
function checkTiming(o: HealthCheckOptions, path: string) {
  const intervalMs = int(`${path}.intervalMs`, o.intervalMs, 2000, 10, DAY);
  return {
    intervalMs,
    fastIntervalMs: int(`${path}.fastIntervalMs`, o.fastIntervalMs, intervalMs, 10, DAY),
    unhealthyIntervalMs: int(`${path}.unhealthyIntervalMs`, o.unhealthyIntervalMs, intervalMs, 10, DAY),
    jitterPercent: int(`${path}.jitterPercent`, o.jitterPercent, 10, 0, 100),
    timeoutMs: int(`${path}.timeoutMs`, o.timeoutMs, 1000, 1, DAY),
    rise: int(`${path}.rise`, o.rise, 2, 1, 1000),
    fall: int(`${path}.fall`, o.fall, 3, 1, 1000),
  };
}

/** The http kind's fields (refused on any other kind): path, expected status, body, degraded header and time. */
function httpFields(o: HealthCheckOptions, path: string, timeoutMs: number) {
  if (o.kind !== 'http') {
    for (const k of ['path', 'expectedStatus', 'bodyIncludes', 'degradedHeader'] as const) {
      if (o[k] !== undefined) invalidConfig(`${path}.${k}`, `applies only to kind "http" (kind is "${o.kind}")`, o[k]);
    }
  }
  const reqPath = str(`${path}.path`, o.path, '/', /^\/[\x21-\x7e]*$/, 'a path starting with "/" (printable ASCII, no spaces)');
  let expectedStatus: readonly [number, number] = [200, 399];
  if (o.expectedStatus !== undefined) {
    const e = o.expectedStatus as unknown;
    if (!Array.isArray(e) || e.length !== 2) invalidConfig(`${path}.expectedStatus`, 'must be [low, high], two status codes', e);
    const lo = int(`${path}.expectedStatus[0]`, e[0], 200, 100, 599);
    const hi = int(`${path}.expectedStatus[1]`, e[1], 399, lo, 599);
    expectedStatus = [lo, hi];
  }
  const bodyIncludes = o.bodyIncludes === undefined ? undefined : str(`${path}.bodyIncludes`, o.bodyIncludes, '');
  const degradedHeader = str(
    `${path}.degradedHeader`,
    o.degradedHeader,
    'x-envoy-degraded',
    /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/,
    'an HTTP header name',
  ).toLowerCase();
  const degradedAfterMs = o.degradedAfterMs === undefined ? undefined : int(`${path}.degradedAfterMs`, o.degradedAfterMs, 0, 1, timeoutMs);
  return { path: reqPath, expectedStatus, bodyIncludes, degradedHeader, degradedAfterMs };
}

/** The database kinds' fields: user and roles (postgres, mysql), database and client (postgres only). */
function databaseFields(o: HealthCheckOptions, path: string) {
  if (o.kind !== 'postgres' && o.kind !== 'mysql') {
    for (const k of ['user', 'roles'] as const) {
      if (o[k] !== undefined) invalidConfig(`${path}.${k}`, `applies only to kinds "postgres" and "mysql" (kind is "${o.kind}")`, o[k]);
    }
  }
  if (o.kind !== 'postgres') {
    for (const k of ['database', 'client'] as const) {
      if (o[k] !== undefined)
        invalidConfig(`${path}.${k}`, `applies only to kind "postgres" (kind is "${o.kind}")`, k === 'client' ? 'a client' : o[k]);
    }
  }
  const user = str(`${path}.user`, o.user, o.kind === 'mysql' ? 'root' : 'postgres');
  const database = str(`${path}.database`, o.database, user);
  if (o.client !== undefined && (typeof o.client !== 'object' || o.client === null || typeof o.client.query !== 'function')) {
    invalidConfig(`${path}.client`, 'must have a query(sql) method returning a promise', o.client);
  }
  return { user, database, client: o.client };
}

/** The custom kind's check function and the agent kind's port and greeting (each refused on other kinds). */
function customAndAgentFields(o: HealthCheckOptions, path: string) {
  if (o.kind === 'custom' ? typeof o.check !== 'function' : o.check !== undefined) {
    invalidConfig(
      `${path}.check`,
      o.kind === 'custom' ? 'must be an async function (target, signal) for kind "custom"' : 'applies only to kind "custom"',
      o.check,
    );
  }
  if (o.kind !== 'agent') {
    for (const k of ['agentPort', 'agentSend'] as const) {
      if (o[k] !== undefined) invalidConfig(`${path}.${k}`, `applies only to kind "agent" (kind is "${o.kind}")`, o[k]);
    }
  }
  const agentPort = o.agentPort === undefined ? undefined : int(`${path}.agentPort`, o.agentPort, 0, 1, 65535);
  const agentSend =
    o.agentSend === undefined
      ? undefined
      : str(`${path}.agentSend`, o.agentSend, '', /^[\x20-\x7e\t\r\n]*$/, 'a string of printable ASCII');
  return { check: o.check, agentPort, agentSend };
}

const OUTLIER_KEYS = [
  'intervalMs',
  'baseEjectionTimeMs',
  'maxEjectionTimeMs',
  'maxEjectionPercent',
  'alwaysEjectOneHost',
  'successRateRequestVolume',
  'successRateMinimumHosts',
  'successRateStdevFactor',
  'enforcingSuccessRate',
  'failurePercentageThreshold',
  'failurePercentageRequestVolume',
  'failurePercentageMinimumHosts',
  'enforcingFailurePercentage',
];

/** Validates outlier detection options. @internal */
export function resolveOutlier(value: unknown, path: string): ResolvedOutlier {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalidConfig(path, 'must be an object', value);
  checkOptionKeys(value, OUTLIER_KEYS, path);
  const o = value as OutlierOptions;
  const baseEjectionTimeMs = int(`${path}.baseEjectionTimeMs`, o.baseEjectionTimeMs, 30_000, 1, 2 ** 28);
  const alwaysEjectOneHost = o.alwaysEjectOneHost ?? false;
  if (typeof alwaysEjectOneHost !== 'boolean') invalidConfig(`${path}.alwaysEjectOneHost`, 'must be a boolean', alwaysEjectOneHost);
  return {
    intervalMs: int(`${path}.intervalMs`, o.intervalMs, 10_000, 10, DAY),
    baseEjectionTimeMs,
    maxEjectionTimeMs: int(
      `${path}.maxEjectionTimeMs`,
      o.maxEjectionTimeMs,
      Math.max(300_000, baseEjectionTimeMs),
      baseEjectionTimeMs,
      2 ** 28,
    ),
    maxEjectionPercent: int(`${path}.maxEjectionPercent`, o.maxEjectionPercent, 10, 0, 100),
    alwaysEjectOneHost,
    successRateRequestVolume: int(`${path}.successRateRequestVolume`, o.successRateRequestVolume, 100, 1, 2 ** 31 - 1),
    successRateMinimumHosts: int(`${path}.successRateMinimumHosts`, o.successRateMinimumHosts, 5, 1, 65536),
    successRateStdevFactor: int(`${path}.successRateStdevFactor`, o.successRateStdevFactor, 1900, 0, 100_000),
    enforcingSuccessRate: int(`${path}.enforcingSuccessRate`, o.enforcingSuccessRate, 100, 0, 100),
    failurePercentageThreshold: int(`${path}.failurePercentageThreshold`, o.failurePercentageThreshold, 85, 0, 100),
    failurePercentageRequestVolume: int(`${path}.failurePercentageRequestVolume`, o.failurePercentageRequestVolume, 50, 1, 2 ** 31 - 1),
    failurePercentageMinimumHosts: int(`${path}.failurePercentageMinimumHosts`, o.failurePercentageMinimumHosts, 5, 1, 65536),
    enforcingFailurePercentage: int(`${path}.enforcingFailurePercentage`, o.enforcingFailurePercentage, 100, 0, 100),
  };
}

/** Validates a `{ check?, outlier? }` health block (a membership document's `health`, or BalancerOptions'). @internal */
export function resolveHealthConfig(
  value: unknown,
  path: string,
  json: boolean,
): { check?: ResolvedHealthCheck; outlier?: ResolvedOutlier; orca?: ResolvedOrca; agent?: ResolvedHealthCheck; probe?: ResolvedProbe } {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    invalidConfig(path, 'must be an object { check?, outlier?, orca?, agent?, probe? }', value);
  checkOptionKeys(value, ['check', 'outlier', 'orca', 'agent', 'probe'], path);
  const v = value as HealthConfig;
  if (v.agent !== undefined && (v.check as { kind?: unknown } | undefined)?.kind === 'agent')
    invalidConfig(`${path}.agent`, 'cannot run beside a check of kind "agent" (one agent per backend)', v.agent);
  return {
    ...(v.agent === undefined ? {} : { agent: resolveAgentCheck(v.agent, `${path}.agent`) }),
    ...(v.check === undefined ? {} : { check: resolveHealthCheck(v.check, `${path}.check`, json) }),
    ...(v.outlier === undefined ? {} : { outlier: resolveOutlier(v.outlier, `${path}.outlier`) }),
    ...(v.orca === undefined ? {} : { orca: resolveOrca(v.orca, `${path}.orca`) }),
    ...(v.probe === undefined ? {} : { probe: resolveProbe(v.probe, `${path}.probe`) }),
  };
}
