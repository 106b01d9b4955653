/**
 * `poise top`: a live table of the backends of a running proxy or cluster.
 *
 *     poise top --metrics http://127.0.0.1:9464/metrics     (a proxy started with --metrics)
 *     poise top --redis redis://127.0.0.1:6379 --cluster api (membership only)
 *
 * On a TTY the table is redrawn in place (ANSI: cursor home, clear below);
 * otherwise one table per interval is printed, a blank line between them.
 * `--once` prints one table and exits (with --metrics it scrapes twice,
 * --interval apart, so the pick share is the share of that interval).
 */
import { PoiseError } from '../core/errors.js';
import { MembershipPublisher } from '../membership/redis-publisher.js';
import { RedisLease, type LeaseView } from '../membership/redis-lease.js';
import type { MetricFamily } from '../metrics/text-format.js';
import { DURATION_GRAMMAR, durationFlag, integerFlag, nameFlag, type FlagSpecs, type FlagValues } from './args.js';
import { EXIT, EXIT_HELP } from './exit.js';
import { cliLogger } from './logger.js';
import { flagCommand, type Command } from './command.js';
import { scrapeMetrics } from './metrics-scrape.js';
import { REDIS_FLAGS, REDIS_FLAGS_HELP, redisFlags } from './redis-flags.js';
import { formatTable, type Cell } from './table.js';
import { UsageError } from './usage.js';

const HELP = `usage: poise top (--metrics URL [--timeout D] [--max-bytes N] | --redis URL --cluster NAME [--prefix P])
                [--interval D] [--once]

A live table of backends: state, connections, in-flight requests, PeakEWMA
latency, pick share over the last interval, ejections, role and lag, slow
start's ramp (RAMP_%), the weight the backend reports (REPORTED_W) and what
its agent check asked (AGENT: drain or maint; "-" for nothing asked); under
it, the retry budget (available, retries allowed / refused) and, for a proxy
started with --discover, the discovery source (state, records, the age of its
last good answer, errors by kind); with --redis, in fleet mode, the discovery
watcher that holds the lease (its id, token and lease left). CONNS counts connection leases (connect,
routedStream, the proxy); the HTTP dispatcher leases requests (INFLIGHT), so a
backend that only serves HTTP shows "-".

  --metrics URL     scrape a proxy or app serving poise metrics (http://HOST:PORT or
                    .../metrics): every column
  --timeout D       one deadline per scrape for the request, the body and the parse
                    (default 5s; 100ms..10m)
  --max-bytes N     refuse a metrics body larger than N bytes (default 16777216; 1024..1073741824)
${REDIS_FLAGS_HELP}
                    read the cluster's stored membership instead (used without --metrics):
                    BACKEND, PRIO, STATE (its status) and ROLE come from the stored
                    document; the load columns show "-"
  --cluster NAME    the cluster, with the Redis flags; default $POISE_CLUSTER
  --prefix P        Redis key prefix; default "poise"
  --interval D      between refreshes, 100ms..1h (${DURATION_GRAMMAR}; default 2s)
  --once            print one table and exit (with --metrics: two scrapes --interval apart)
  -h, --help        this text

${EXIT_HELP}`;

const OPTIONS = {
  metrics: { type: 'string' },
  ...REDIS_FLAGS,
  cluster: { type: 'string' },
  prefix: { type: 'string' },
  interval: { type: 'string' },
  timeout: { type: 'string' },
  'max-bytes': { type: 'string' },
  once: { type: 'boolean' },
} as const satisfies FlagSpecs;

/** The default cap on a scraped body: 16 MiB, about 8× a proxy's own exposition at 1024 backends (1.9 MiB). */
const DEFAULT_MAX_BYTES = 16 * 1024 * 1024;

/** The resilience columns (docs/resilience.md): slow start's ramp, the backend's reported weight, its drain / maint. */
export const RESILIENCE_HEADERS = ['RAMP_%', 'REPORTED_W', 'AGENT'] as const;

/** The columns of the table. */
export const TOP_HEADERS = [
  'BACKEND',
  'PRIO',
  'STATE',
  'CONNS',
  'INFLIGHT',
  'EWMA_MS',
  'SHARE_%',
  'EJECTIONS',
  'ROLE',
  'LAG_MS',
  ...RESILIENCE_HEADERS,
] as const;

/** One scrape of a proxy's metrics, per backend. @internal */
export interface ScrapedBackend {
  id: string;
  priority: string;
  state: string;
  connections: number;
  inFlight: number;
  ewmaMs: number;
  picks: number;
  ejections: number;
  /** Database role (`primary`, `replica`), or `-` when unknown. */
  role: string;
  /** A replica's replay lag, ms (NaN when not a replica). */
  lagMs: number;
  /** Slow start's ramp, percent of the weight (100 when not ramping); NaN when the scrape has no such series. */
  rampPercent: number;
  /** The weight multiplier the backend reports (1 without a report); NaN when unknown. */
  reportedWeight: number;
  /** `ready`, `drain` or `maint` (agent check); `-` when unknown. */
  admin: string;
  /** HTTP attempts the dispatcher sent it (`poise_http_requests_total`, every outcome); NaN when the scrape has none. */
  httpRequests: number;
}

/** Reads the per-backend rows out of parsed metrics (metric names with `prefix`). @internal */
export function backendsFromMetrics(families: ReadonlyMap<string, MetricFamily>, prefix = 'poise_'): ScrapedBackend[] {
  const rows = new Map<string, ScrapedBackend>();
  const row = (labels: Readonly<Record<string, string>>): ScrapedBackend => {
    const key = `${labels['cluster'] ?? ''}\u0000${labels['backend'] ?? ''}`;
    let r = rows.get(key);
    if (r === undefined) {
      r = {
        id: labels['backend'] ?? '?',
        priority: labels['priority'] ?? '-',
        state: '?',
        connections: 0,
        inFlight: 0,
        ewmaMs: 0,
        picks: 0,
        ejections: 0,
        role: '-',
        lagMs: Number.NaN,
        rampPercent: Number.NaN,
        reportedWeight: Number.NaN,
        admin: '-',
        httpRequests: Number.NaN,
      };
      rows.set(key, r);
    }
    return r;
  };
  const each = (name: string, f: (r: ScrapedBackend, v: number, labels: Readonly<Record<string, string>>) => void): void => {
    for (const s of families.get(prefix + name)?.samples ?? []) f(row(s.labels), s.value, s.labels);
  };
  each('backend_state', (r, v, l) => {
    if (v === 1) r.state = l['state'] ?? '?';
  });
  each('backend_connections', (r, v) => {
    r.connections = v;
  });
  each('backend_requests_in_flight', (r, v) => {
    r.inFlight = v;
  });
  each('backend_latency_ewma_seconds', (r, v) => {
    r.ewmaMs = v * 1000;
  });
  each('backend_picks_total', (r, v) => {
    r.picks = v;
  });
  each('backend_ejections_total', (r, v) => {
    r.ejections = v;
  });
  each('backend_role', (r, v, l) => {
    if (v === 1 && l['role'] !== 'unknown') r.role = l['role'] ?? '-';
  });
  each('backend_replication_lag_seconds', (r, v) => {
    r.lagMs = v * 1000;
  });
  each('http_requests_total', (r, v) => {
    r.httpRequests = (Number.isNaN(r.httpRequests) ? 0 : r.httpRequests) + v;
  });
  resilienceFromMetrics(each);
  return [...rows.values()];
}

/** The table of one refresh: `prev` (the scrape one interval earlier) gives the pick share. @internal */
export function topTable(now: readonly ScrapedBackend[], prev: readonly ScrapedBackend[] | undefined): string {
  const before = new Map((prev ?? []).map((b) => [`${b.priority}\u0000${b.id}`, b.picks]));
  const deltas = now.map((b) => {
    const p = before.get(`${b.priority}\u0000${b.id}`);
    return prev === undefined || p === undefined ? undefined : Math.max(0, b.picks - p);
  });
  const total = deltas.reduce<number>((a, d) => a + (d ?? 0), 0);
  const rows: Cell[][] = now.map((b, k) => {
    const d = deltas[k];
    const share = d === undefined ? '-' : total === 0 ? '0.0' : ((100 * d) / total).toFixed(1);
    const lag = b.role === 'replica' && !Number.isNaN(b.lagMs) ? b.lagMs.toFixed(0) : '-';
    return [
      b.id,
      b.priority,
      b.state,
      // The HTTP dispatcher leases requests, not connections: 0 connection leases would read as "no traffic".
      b.connections === 0 && b.httpRequests > 0 ? '-' : b.connections,
      b.inFlight,
      b.ewmaMs.toFixed(1),
      share,
      b.ejections,
      b.role,
      lag,
      ...resilienceCells(b),
    ];
  });
  return formatTable(TOP_HEADERS, rows);
}

type EachSample = (name: string, f: (r: ScrapedBackend, v: number, labels: Readonly<Record<string, string>>) => void) => void;

/** Fills the resilience fields from `poise_backend_slow_start_ratio`, `_reported_weight_ratio`, `_admin_state`. */
function resilienceFromMetrics(each: EachSample): void {
  each('backend_slow_start_ratio', (r, v) => {
    r.rampPercent = v * 100;
  });
  each('backend_reported_weight_ratio', (r, v) => {
    r.reportedWeight = v;
  });
  each('backend_admin_state', (r, v, l) => {
    if (v === 1) r.admin = l['admin'] ?? '?';
  });
}

/** The resilience cells of one row ("-" for what the scrape did not carry). */
function resilienceCells(b: ScrapedBackend): Cell[] {
  return [
    Number.isNaN(b.rampPercent) ? '-' : b.rampPercent.toFixed(0),
    Number.isNaN(b.reportedWeight) ? '-' : b.reportedWeight.toFixed(2),
    // Only what the backend asked (drain, maint): "ready" beside STATE "draining" (membership) read as a contradiction.
    b.admin === 'ready' ? '-' : b.admin,
  ];
}

/**
 * The retry budget's line under the table, from the cluster-level series
 * (`poise_retry_budget_available`, `poise_retries_total{outcome}`,
 * `poise_retry_budget_processes`); one line per cluster, none when the
 * scrape has no retry series. @internal
 */
export function retryBudgetLines(families: ReadonlyMap<string, MetricFamily>, prefix = 'poise_'): string[] {
  const clusters = new Map<string, { available?: number; allowed: number; refused: number; processes?: number }>();
  const at = (labels: Readonly<Record<string, string>>) => {
    const c = labels['cluster'] ?? '';
    let v = clusters.get(c);
    if (v === undefined) {
      v = { allowed: 0, refused: 0 };
      clusters.set(c, v);
    }
    return v;
  };
  for (const s of families.get(`${prefix}retries_total`)?.samples ?? []) {
    const v = at(s.labels);
    if (s.labels['outcome'] === 'allowed') v.allowed = s.value;
    else if (s.labels['outcome'] === 'refused') v.refused = s.value;
  }
  for (const s of families.get(`${prefix}retry_budget_available`)?.samples ?? []) at(s.labels).available = s.value;
  for (const s of families.get(`${prefix}retry_budget_processes`)?.samples ?? []) at(s.labels).processes = s.value;
  return [...clusters].map(([cluster, v]) => {
    const budget =
      v.available === undefined
        ? 'no budget'
        : `available ${Math.floor(v.available)}${v.processes !== undefined && v.processes > 1 ? ` (fleet of ${v.processes})` : ''}`;
    return `retry budget${cluster === '' ? '' : ` (${cluster})`}: ${budget}  retries allowed ${v.allowed}  refused ${v.refused}`;
  });
}

/**
 * The discovery source's line under the table, from `poise_discovery_*`
 * (src/discovery/status.ts): its state (ok, stale: the last good kept,
 * failing: none yet), the records in force, the age of its last good
 * answer and its errors by kind; none when the scrape has no discovery
 * series. `nowMs`: wall-clock now. @internal
 */
export function discoveryLines(families: ReadonlyMap<string, MetricFamily>, nowMs: number, prefix = 'poise_'): string[] {
  const sources = new Map<string, { state: string; records: number; lastMs: number; errors: string[] }>();
  const at = (labels: Readonly<Record<string, string>>) => {
    const key = labels['source'] ?? '';
    let v = sources.get(key);
    if (v === undefined) {
      v = { state: '?', records: 0, lastMs: 0, errors: [] };
      sources.set(key, v);
    }
    return v;
  };
  for (const x of families.get(`${prefix}discovery_state`)?.samples ?? []) if (x.value === 1) at(x.labels).state = x.labels['state'] ?? '?';
  for (const x of families.get(`${prefix}discovery_records`)?.samples ?? []) at(x.labels).records = x.value;
  for (const x of families.get(`${prefix}discovery_last_success_timestamp_seconds`)?.samples ?? []) at(x.labels).lastMs = x.value * 1000;
  for (const x of families.get(`${prefix}discovery_errors_total`)?.samples ?? [])
    if (x.value > 0) at(x.labels).errors.push(`${x.labels['kind'] ?? '?'} ${x.value}`);
  return [...sources].map(([source, v]) => {
    const age = v.lastMs === 0 ? 'never answered' : `last good ${Math.max(0, Math.round((nowMs - v.lastMs) / 1000))} s ago`;
    return `discovery ${source}: ${v.state}  records ${v.records}  ${age}  errors ${v.errors.length === 0 ? 'none' : v.errors.join(', ')}`;
  });
}

/**
 * The fleet watcher's line under a `--redis` table (fleet mode: the
 * discovery watcher's lease, src/membership/redis-lease.ts): who holds it
 * (the holder id a `poise proxy` in fleet mode gives: `host:pid SPEC`), under
 * which token and how long its lease has left; or that none holds it; none
 * when no watcher was ever elected for the cluster. What the source answers
 * (state, errors) lives in the watcher process only. @internal
 */
export function fleetWatcherLines(view: LeaseView): string[] {
  if (view.lastToken === 0 && view.holder === undefined) return [];
  if (view.holder === undefined)
    return [`fleet watcher: none holds the lease (last token ${view.lastToken}): no discovery change reaches Redis until one is elected`];
  const { id, token, ttlMs } = view.holder;
  return [`fleet watcher: ${id}  token ${token}  lease ${(ttlMs / 1000).toFixed(1)} s left`];
}

/** `--metrics` value → the URL to scrape (`/metrics` added when the path is empty). */
function metricsUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new UsageError(`--metrics: must be an http:// URL, got ${JSON.stringify(raw)}`, '--metrics');
  }
  if (u.protocol !== 'http:') throw new UsageError(`--metrics: must be an http:// URL, got ${JSON.stringify(raw)}`, '--metrics');
  if (u.pathname === '/' || u.pathname === '') u.pathname = '/metrics';
  return u.toString();
}

function redisRows(backends: readonly { id: string; status?: string; priority?: number; role?: string }[]): ScrapedBackend[] {
  return backends.map((b) => ({
    id: b.id,
    priority: String(b.priority ?? 0),
    state: b.status ?? 'ready',
    connections: Number.NaN,
    inFlight: Number.NaN,
    ewmaMs: Number.NaN,
    picks: 0,
    ejections: Number.NaN,
    role: b.role === undefined || b.role === 'none' ? '-' : b.role,
    lagMs: Number.NaN,
    rampPercent: Number.NaN,
    reportedWeight: Number.NaN,
    admin: '-',
    httpRequests: Number.NaN,
  }));
}

/** The membership-only table: load columns are "-" (only --metrics knows them). */
function redisTable(rows: readonly ScrapedBackend[]): string {
  return formatTable(
    TOP_HEADERS,
    rows.map((b) => [b.id, b.priority, b.state, '-', '-', '-', '-', '-', b.role, '-', ...resilienceCells(b)]),
  );
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/** `--interval` in ms: between refreshes, 100ms..1h, default 2s. Throws {@link UsageError}. @internal */
export function topIntervalMs(raw: string | undefined): number {
  return durationFlag('--interval', raw, 100, 3_600_000) ?? 2000;
}

/** `--timeout`: one deadline per scrape, in ms (default 5 s). @internal */
export function topTimeoutMs(raw: string | undefined): number {
  return durationFlag('--timeout', raw, 100, 600_000) ?? 5000;
}

/** The `--help` text. @internal */
export const TOP_HELP = HELP;

/** One frame of the table: its head line and its body. */
interface Frame {
  head: string;
  body: string;
}

/** Where the frames come from: the next one, and what closes the source. */
interface Frames {
  next: () => Promise<Frame>;
  close: () => Promise<void>;
}

type TopValues = FlagValues<typeof OPTIONS>;

/** Frames from a proxy's /metrics: the load columns, the share over the interval between two scrapes (`--once` takes both). */
async function metricsFrames(values: TopValues, metrics: string, intervalMs: number, once: boolean): Promise<Frames> {
  const url = metricsUrl(metrics);
  const limits = {
    timeoutMs: topTimeoutMs(values.timeout),
    maxBytes: integerFlag('--max-bytes', values['max-bytes'], 1024, 1024 * 1024 * 1024) ?? DEFAULT_MAX_BYTES,
  };
  let prev: ScrapedBackend[] | undefined;
  const next = async (): Promise<Frame> => {
    const families = await scrapeMetrics(url, limits);
    const now = backendsFromMetrics(families);
    const budget = [...retryBudgetLines(families), ...discoveryLines(families, Date.now())];
    const body = topTable(now, prev) + budget.map((l) => `${l}\n`).join('');
    prev = now;
    return { head: `poise top  ${url}  every ${intervalMs} ms  ${new Date().toISOString()}`, body };
  };
  if (once) {
    // Two scrapes an interval apart: the share column is that interval's.
    const ac = new AbortController();
    await next();
    await sleep(intervalMs, ac.signal);
  }
  return { next, close: async () => {} };
}

/** Frames from Redis: the stored membership and the fleet watcher's lease, no load columns. */
function redisFrames(values: TopValues): Frames {
  // As `poise members`: the flags, else $POISE_REDIS_URL and $POISE_CLUSTER.
  const redis = redisFlags(values, process.env['POISE_REDIS_URL']);
  if (redis === undefined) throw new UsageError('give exactly one of --metrics and --redis (or set POISE_REDIS_URL)');
  const clusterName = values.cluster ?? (process.env['POISE_CLUSTER'] || undefined);
  if (clusterName === undefined) throw new UsageError('--cluster: required with --redis (or set POISE_CLUSTER)', '--cluster');
  const cluster = nameFlag('--cluster', clusterName)!;
  const prefix = nameFlag('--prefix', values.prefix) ?? 'poise';
  const pub = new MembershipPublisher({
    ...redis,
    cluster,
    prefix,
    logger: cliLogger('poise-top', { dflt: 'warn' }),
    redisOptions: { maxRetriesPerRequest: 1, connectTimeout: 3000, retryStrategy: (times: number) => (times > 3 ? null : 100 * times) },
  });
  // Read only: top never takes the lease (it only reads who holds it).
  const lease = new RedisLease({
    ...redis,
    cluster,
    prefix,
    leaseMs: 3000,
    commandTimeoutMs: 3000,
    redisOptions: { maxRetriesPerRequest: 1 },
  });
  const next = async (): Promise<Frame> => {
    const [stored, view] = await Promise.all([pub.show(), lease.inspect()]);
    if (stored === undefined)
      throw new PoiseError('NotFound', `no membership stored for cluster ${JSON.stringify(cluster)}`, { field: '--cluster' });
    const fleet = fleetWatcherLines(view);
    return {
      head: `poise top  cluster ${cluster}  version ${stored.version}  lineage ${stored.lineage ?? '-'}  (membership only: load columns need --metrics)`,
      body: redisTable(redisRows(stored.document.backends)) + fleet.map((l) => `${l}\n`).join(''),
    };
  };
  return { next, close: async () => void (await Promise.all([pub.close(), lease.close()])) };
}

/** Shows the frames: one with `--once`, else one per interval until SIGINT / SIGTERM (a TTY redraws in place). */
async function show(frames: Frames, intervalMs: number, once: boolean, tty: boolean): Promise<number> {
  const next = frames.next;
  try {
    if (once) {
      const { head, body } = await next();
      process.stdout.write(`${head}\n${body}`);
      return EXIT.ok;
    }
    const ac = new AbortController();
    const stop = (): void => ac.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    try {
      if (tty) process.stdout.write('\x1b[H\x1b[2J');
      while (!ac.signal.aborted) {
        let frame: string;
        try {
          const { head, body } = await next();
          frame = `${head}\n${body}`;
        } catch (err) {
          // Live mode keeps going: the source may come back.
          frame = `poise top: ${err instanceof Error ? err.message : String(err)}\n`;
        }
        // TTY: cursor home, the frame, clear whatever the last frame left below.
        process.stdout.write(tty ? `\x1b[H${frame.replaceAll('\n', '\x1b[K\n')}\x1b[J` : `${frame}\n`);
        await sleep(intervalMs, ac.signal);
      }
      return EXIT.ok;
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    }
  } finally {
    await frames.close();
  }
}

const run = flagCommand('top', OPTIONS, HELP, async (values) => {
  const redisGiven = (['redis', 'sentinel', 'sentinel-name', 'redis-cluster'] as const).some((k) => values[k] !== undefined);
  if (values.metrics !== undefined && redisGiven) throw new UsageError('give exactly one of --metrics and --redis');
  const intervalMs = topIntervalMs(values.interval);
  const once = values.once;
  const tty = process.stdout.isTTY === true && !once;
  if (values.metrics !== undefined) {
    if (values.cluster !== undefined || values.prefix !== undefined)
      throw new UsageError(
        '--cluster and --prefix go with --redis, not --metrics',
        values.cluster !== undefined ? '--cluster' : '--prefix',
      );
    return show(await metricsFrames(values, values.metrics, intervalMs, once), intervalMs, once, tty);
  }
  if (values.timeout !== undefined || values['max-bytes'] !== undefined)
    throw new UsageError(
      '--timeout and --max-bytes go with --metrics, not --redis',
      values.timeout !== undefined ? '--timeout' : '--max-bytes',
    );
  return show(redisFrames(values), intervalMs, once, tty);
});

/** The `top` subcommand. */
export const command: Command = {
  summary: 'live table of backends: state, connections, in-flight, EWMA, pick share, ejections',
  run,
};
