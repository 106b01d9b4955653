/**
 * The admission flags of `poise proxy`: bands (each a rank, larger = more important) held back by the
 * pool's saturation (admission/admission.ts, docs/admission.md).
 *
 *     --admission-ceiling-min 0.5 --band web=10 --band batch=1:127.0.0.1:6001 --band-cidr 10.8.0.0/16=batch
 *
 * Every bad flag is named at once (one UsageError listing them all).
 */
import { PoiseError } from '../core/errors.js';
import { parseAddress } from '../core/spec.js';
import { AdmissionGate, sumAdmissionStats, type AdmissionGateOptions, type AdmissionStats } from '../admission/admission.js';
import type { AdmissionGateData } from '../proxy/messages.js';
import type { Logger } from '../log.js';
import { CidrBands, fixedBand, parseCidr, type ProxyBand, type ProxyBandSelector } from '../proxy/admission.js';
import type { TcpProxy } from '../proxy/tcp-proxy.js';
import type { Router } from '../runtime/router.js';
import { durationFlag, integerFlag, type FlagSpecs, type FlagValues } from './args.js';
import { UsageError } from './usage.js';

/** Flag specs (merged into the proxy's). */
export const ADMISSION_FLAGS = {
  'admission-ceiling-min': { type: 'string' },
  'admission-ceiling-max': { type: 'string' },
  'admission-capacity': { type: 'string' },
  'admission-timeout': { type: 'string' },
  'admission-max-queue': { type: 'string' },
  band: { type: 'string', multiple: true },
  'band-cidr': { type: 'string', multiple: true },
  'band-default': { type: 'string' },
} as const satisfies FlagSpecs;

/** Their --help lines. */
export const ADMISSION_HELP = `admission (band holdback on the pool's saturation, docs/admission.md):
  --band NAME=RANK[:HOST:PORT]
                           an admission band, repeatable; a larger RANK is more important
                           (ranks are not failover priorities); with HOST:PORT the band
                           gets its own listener (every client there is in that band)
  --band-cidr CIDR=NAME    clients of --listen from CIDR are in band NAME, repeatable
                           (longest prefix wins; IPv4 or IPv6)
  --band-default NAME      band of --listen clients no CIDR matches (default: the highest rank)
  --admission-ceiling-min X
                           ceiling of the lowest-ranked band, in [0, 1) (required with --band)
  --admission-ceiling-max X
                           ceiling of the highest-ranked band, in (0, 1] (default 1)
  --admission-capacity N   connections at saturation 1 (default: the sum of the backends'
                           maxInflight; give it when backends have none)
  --admission-timeout D    longest wait for admission, 1ms..24h (default 60s)
  --admission-max-queue N  waiting connections per band before refusing (default 1024)`;

/** A band with its own listener. */
export interface BandListener {
  /** The band every client of this listener is in. */
  band: ProxyBand;
  /** Listen host. */
  host: string;
  /** Listen port. */
  port: number;
}

/** The validated admission settings of one run. */
export interface AdmissionFlags {
  /** Every --band. */
  bands: ProxyBand[];
  /** The bands given a listen address. */
  listeners: BandListener[];
  /** Every --band-cidr. */
  cidrs: { cidr: string; band: string }[];
  /** --band-default. */
  defaultBand: string | undefined;
  /** The AdmissionGate options from the --admission-* flags. */
  gate: Omit<AdmissionGateOptions, 'bands'>;
}

function ceilingFlag(flag: string, raw: string | undefined, lowOpen: boolean, highOpen: boolean): number | undefined {
  if (raw === undefined) return undefined;
  const v = /^[+]?(\d+(\.\d*)?|\.\d+)$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  const ok = (lowOpen ? v > 0 : v >= 0) && (highOpen ? v < 1 : v <= 1);
  if (!ok)
    throw new UsageError(
      `${flag}: must be a number in ${lowOpen ? '(' : '['}0, 1${highOpen ? ')' : ']'}, got ${JSON.stringify(raw)}`,
      flag,
    );
  return v;
}

/**
 * Parses the admission flags; undefined when no band is given. Throws one
 * {@link UsageError} naming every bad flag: one piece, because every check
 * adds to the one list of problems before any is thrown.
 */
export function admissionFlags(values: FlagValues<typeof ADMISSION_FLAGS>): AdmissionFlags | undefined {
  const problems: UsageError[] = [];
  const attempt = <T>(fn: () => T): T | undefined => {
    try {
      return fn();
    } catch (err) {
      if (err instanceof UsageError) {
        problems.push(err);
        return undefined;
      }
      throw err;
    }
  };
  const bands: ProxyBand[] = [];
  const listeners: BandListener[] = [];
  for (const [i, raw] of values.band.entries()) {
    attempt(() => {
      const m = /^([A-Za-z0-9_.-]{1,64})=([+-]?\d+)(?::(.+))?$/.exec(raw);
      if (m === null)
        throw new UsageError(
          `--band #${i + 1}: must be NAME=RANK or NAME=RANK:HOST:PORT (NAME of letters, digits, _ . -), got ${JSON.stringify(raw)}`,
          '--band',
        );
      const band = { name: m[1]!, rank: Number(m[2]) };
      if (bands.some((b) => b.name === band.name))
        throw new UsageError(`--band #${i + 1}: band ${JSON.stringify(band.name)} given twice`, '--band');
      if (bands.some((b) => b.rank === band.rank)) throw new UsageError(`--band #${i + 1}: rank ${band.rank} given to two bands`, '--band');
      bands.push(band);
      if (m[3] !== undefined) {
        const at = parseAddress(m[3]);
        if (at === undefined)
          throw new UsageError(
            `--band #${i + 1}: the listen address must be HOST:PORT with a port in [1, 65535], got ${JSON.stringify(m[3])}`,
            '--band',
          );
        listeners.push({ band, host: at.host, port: at.port });
      }
    });
  }
  const names = new Set(bands.map((b) => b.name));
  const cidrs: { cidr: string; band: string }[] = [];
  for (const [i, raw] of values['band-cidr'].entries()) {
    attempt(() => {
      const eq = raw.lastIndexOf('=');
      const cidr = eq > 0 ? raw.slice(0, eq) : raw;
      const band = eq > 0 ? raw.slice(eq + 1) : '';
      if (parseCidr(cidr) === undefined)
        throw new UsageError(
          `--band-cidr #${i + 1}: must be CIDR=NAME with an IPv4 /0..32 or IPv6 /0..128 CIDR, got ${JSON.stringify(raw)}`,
          '--band-cidr',
        );
      if (!names.has(band)) throw new UsageError(`--band-cidr #${i + 1}: ${JSON.stringify(band)} is not a --band name`, '--band-cidr');
      cidrs.push({ cidr, band });
    });
  }
  const defaultBand = values['band-default'];
  if (defaultBand !== undefined && !names.has(defaultBand))
    problems.push(new UsageError(`--band-default: ${JSON.stringify(defaultBand)} is not a --band name`, '--band-default'));
  const minCeiling = attempt(() => ceilingFlag('--admission-ceiling-min', values['admission-ceiling-min'], false, true));
  const maxCeiling = attempt(() => ceilingFlag('--admission-ceiling-max', values['admission-ceiling-max'], true, false));
  if (minCeiling !== undefined && maxCeiling !== undefined && minCeiling > maxCeiling) {
    problems.push(
      new UsageError(
        `--admission-ceiling-min: must not exceed --admission-ceiling-max (${maxCeiling}), got ${minCeiling}`,
        '--admission-ceiling-min',
      ),
    );
  }
  const capacity = attempt(() => integerFlag('--admission-capacity', values['admission-capacity'], 1, 1e9));
  const timeoutMs = attempt(() => durationFlag('--admission-timeout', values['admission-timeout'], 1, 86_400_000));
  const maxQueue = attempt(() => integerFlag('--admission-max-queue', values['admission-max-queue'], 0, 1e7));
  const tuning = (
    [
      'admission-ceiling-min',
      'admission-ceiling-max',
      'admission-capacity',
      'admission-timeout',
      'admission-max-queue',
      'band-default',
    ] as const
  ).filter((k) => values[k] !== undefined);
  if (values.band.length === 0) {
    for (const k of tuning) problems.push(new UsageError(`--${k}: needs --band`, `--${k}`));
    if (values['band-cidr'].length > 0) problems.push(new UsageError('--band-cidr: needs --band', '--band-cidr'));
  } else if (values['admission-ceiling-min'] === undefined) {
    problems.push(
      new UsageError('--admission-ceiling-min: required with --band (the ceiling of the lowest band)', '--admission-ceiling-min'),
    );
  }
  if (problems.length === 1) throw problems[0];
  if (problems.length > 1)
    throw new UsageError(
      `${problems.length} bad flags: ${problems.map((p) => p.message).join('; ')}`,
      problems.map((p) => p.flag).join(', '),
    );
  if (bands.length === 0) return undefined;
  return {
    bands,
    listeners,
    cidrs,
    defaultBand,
    gate: {
      minCeiling: minCeiling ?? 0,
      ...(maxCeiling === undefined ? {} : { maxCeiling }),
      ...(capacity === undefined ? {} : { capacity }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      ...(maxQueue === undefined ? {} : { maxQueue }),
    },
  };
}

/** The admission side of one proxy run: the gate, the band selector of --listen, and the per-band listeners. */
export interface ProxyAdmissionRun {
  /** Band selector for the --listen proxy (CIDR map, else the default band); undefined without --band. */
  main: ProxyBandSelector | undefined;
  /** Starts the per-band listeners; a listen error names the --band. */
  listen(): Promise<void>;
  /** Why not every per-band listener accepts in every thread now ("--band NAME listener HOST:PORT is not up"); undefined when all do. */
  notAccepting(): string | undefined;
  /** Stops the per-band listeners and closes the gate (every waiter rejected with Closed). */
  close(): Promise<void>;
  /** The admission figures for `--metrics` (one gate, or every worker's summed as of the last {@link refresh}); undefined without --band. */
  admissionStats: (() => AdmissionStats) | undefined;
  /** Gathers the figures from the worker threads (before a scrape); nothing to do with one gate. */
  refresh(): Promise<void>;
}

/** No --band: no gate, nothing to run. */
export function noAdmission(): ProxyAdmissionRun {
  return {
    main: undefined,
    listen: async () => {},
    notAccepting: () => undefined,
    close: async () => {},
    admissionStats: undefined,
    refresh: async () => {},
  };
}

/** The options of the gate(s) from the flags: kind `connection`, every band's rank. */
function gateOptions(f: AdmissionFlags): AdmissionGateData {
  return { bands: f.bands.map((b) => b.rank), kind: 'connection', ...f.gate };
}

/** Starts the per-band listeners; a listen error names the --band. */
async function listenBands(extra: { l: BandListener; proxy: TcpProxy }[]): Promise<void> {
  for (const { l, proxy } of extra) {
    try {
      await proxy.listen();
    } catch (err) {
      throw new PoiseError('Unavailable', `--band ${l.band.name}: cannot listen on ${l.host}:${l.port}: ${(err as Error).message}`, {
        field: '--band',
        cause: err,
      });
    }
  }
}

/** The first band listener that does not accept in every thread, as a /healthz reason. */
function bandNotAccepting(extra: readonly { l: BandListener; proxy: TcpProxy }[]): string | undefined {
  const down = extra.find(({ proxy }) => !proxy.listening);
  return down === undefined ? undefined : `--band ${down.l.band.name} listener ${down.l.host}:${down.l.port} is not up`;
}

function bandsReady(log: Logger, f: AdmissionFlags, capacity: number, ceilings: { band: number; ceiling: number }[]): void {
  if (capacity === Number.POSITIVE_INFINITY)
    log.warn('admission: a backend has no maxInflight and no --admission-capacity is given, so the pool never saturates');
  log.info({ bands: f.bands, ceilings, capacity }, 'admission bands ready');
}

/**
 * Attaches an AdmissionGate (kind `connection`) to `router` and builds the
 * per-band proxies with `proxyFor`. Without flags: no gate, nothing to run.
 */
export function proxyAdmission(
  router: Router,
  f: AdmissionFlags | undefined,
  log: Logger,
  proxyFor: (host: string, port: number, band: ProxyBandSelector) => TcpProxy,
): ProxyAdmissionRun {
  if (f === undefined) return noAdmission();
  const gate = new AdmissionGate(router, gateOptions(f));
  const main = new CidrBands({ bands: f.bands, cidrs: f.cidrs, defaultBand: f.defaultBand });
  const extra = f.listeners.map((l) => ({ l, proxy: proxyFor(l.host, l.port, fixedBand(l.band.rank)) }));
  return {
    main,
    admissionStats: () => gate.admissionStats(),
    refresh: async () => {},
    async listen() {
      await listenBands(extra);
      bandsReady(log, f, gate.admissionStats().capacity, gate.ceilings());
    },
    notAccepting: () => bandNotAccepting(extra),
    async close() {
      await Promise.all(extra.map(({ proxy }) => proxy.close()));
      gate.close();
    },
  };
}

/** The admission side of a run with worker threads: the options every worker's own gate takes, and the bands of --listen. */
export interface WorkerAdmissionRun extends ProxyAdmissionRun {
  /** The gate options for `TcpProxy({ admissionGate })`. */
  gateOptions: AdmissionGateData;
  /** Adds the --listen proxy to the proxies whose gates are summed. */
  track(proxy: TcpProxy): void;
}

/**
 * With `--workers`: every accepting worker thread (of --listen and of each
 * band listener, built by `proxyFor`) runs its own AdmissionGate; the
 * figures are every gate's, summed (`sumAdmissionStats`).
 */
export function workerAdmission(
  f: AdmissionFlags,
  log: Logger,
  proxyFor: (host: string, port: number, band: ProxyBandSelector, index: number, gate: AdmissionGateData) => TcpProxy,
): WorkerAdmissionRun {
  const options = gateOptions(f);
  const main = new CidrBands({ bands: f.bands, cidrs: f.cidrs, defaultBand: f.defaultBand });
  const extra = f.listeners.map((l, i) => ({ l, proxy: proxyFor(l.host, l.port, fixedBand(l.band.rank), i, options) }));
  const proxies = extra.map((e) => e.proxy);
  let last: AdmissionStats = sumAdmissionStats([]);
  const refresh = async (): Promise<void> => {
    const all = await Promise.all(proxies.map((p) => p.collectStats()));
    last = sumAdmissionStats(all.flatMap((s) => s.admissionThreads ?? []));
  };
  return {
    main,
    gateOptions: options,
    track: (proxy) => void proxies.unshift(proxy),
    admissionStats: () => last,
    refresh,
    notAccepting: () => bandNotAccepting(extra),
    async listen() {
      await listenBands(extra);
      await refresh();
      bandsReady(
        log,
        f,
        last.capacity,
        last.bands.map((b) => ({ band: b.band, ceiling: b.ceiling })),
      );
    },
    async close() {
      await Promise.all(extra.map(({ proxy }) => proxy.close()));
    },
  };
}
