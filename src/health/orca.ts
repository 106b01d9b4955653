/**
 * ORCA-style weights (gRPC's weighted round robin, gRFC A58): each backend
 * reports its own load, and its weight is what it can take:
 *
 *     weight = qps / (utilization + eps / qps × errorUtilizationPenalty)
 *
 * where utilization is the report's `application_utilization` when above 0,
 * else its `cpu_utilization`. A58's rules, with times from the owner's clock:
 * - a weight counts only once the backend has reported for `blackoutMs`
 *   (default 10 s) without a gap longer than `expiryMs` (default 3 min): a
 *   backend that just started or came back is not trusted on one sample;
 * - a report older than `expiryMs` expires (the blackout starts again with
 *   the next one);
 * - a backend without a weight in force gets the mean of the weights in
 *   force; with none in force, nobody is weighted by reports.
 *
 * The owner polls each backend's load endpoint (`GET <path>` on its address,
 * every `intervalMs`) and reads the report from the `endpoint-load-metrics`
 * response header, or the body when the header is absent, in Envoy's TEXT
 * form (docs/resilience.md):
 *
 *     endpoint-load-metrics: TEXT cpu_utilization=0.3, rps_fractional=100, eps=2
 *
 * Each weight, divided by the mean of the weights in force, goes into the
 * slot's reported-weight word (load/backend-load.ts), where every router's
 * view build reads it (effective-weight.ts).
 */
import { request } from 'node:http';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { elapsedMs, wrapMs } from '../core/time.js';
import { ReportFlag } from '../load/backend-load.js';
import type { LoadTable } from '../load/load-table.js';
import type { Logger } from '../log.js';
import type { HealthTarget } from './targets.js';

/** ORCA weight options (a health block's `orca`). */
export interface OrcaOptions {
  /** The load endpoint's path on each backend; default `/load`. */
  path?: string;
  /** Time between polls of one backend, ms; default 1000 (A58's `weight_update_period`). */
  intervalMs?: number;
  /** A poll not answered after this many ms is skipped; default 1000. */
  timeoutMs?: number;
  /** A backend's weight counts only after it has reported this long, ms; default 10000 (A58). */
  blackoutMs?: number;
  /** A report older than this expires, ms; default 180000 (A58). */
  expiryMs?: number;
  /** Errors per query count as this much utilization each; default 1 (A58's `error_utilization_penalty`). */
  errorUtilizationPenalty?: number;
}

/** ORCA options with defaults. */
export type ResolvedOrca = Required<OrcaOptions>;

/** One load report, as read from `endpoint-load-metrics`. */
export interface LoadReport {
  /** `application_utilization` when above 0, else `cpu_utilization`. */
  utilization: number;
  /** `rps_fractional`: queries per second. */
  qps: number;
  /** `eps`: errors per second. */
  eps: number;
}

const KEYS = ['path', 'intervalMs', 'timeoutMs', 'blackoutMs', 'expiryMs', 'errorUtilizationPenalty'];

function ms(path: string, value: unknown, def: number, min: number): number {
  const v = value ?? def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > 86_400_000)
    invalidConfig(path, `must be an integer in [${min}, 86400000]`, v);
  return v;
}

/** Validates ORCA options (`InvalidConfig` naming `<path>.<field>`). @internal */
export function resolveOrca(value: unknown, path: string): ResolvedOrca {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalidConfig(path, 'must be an object', value);
  checkOptionKeys(value, KEYS, path);
  const o = value as OrcaOptions;
  const p = o.path ?? '/load';
  if (typeof p !== 'string' || !/^\/[\x21-\x7e]*$/.test(p) || p.length > 1024)
    invalidConfig(`${path}.path`, 'must be a path starting with "/" (printable ASCII, no spaces)', p);
  const penalty = o.errorUtilizationPenalty ?? 1;
  if (typeof penalty !== 'number' || !Number.isFinite(penalty) || penalty < 0)
    invalidConfig(`${path}.errorUtilizationPenalty`, 'must be a finite number >= 0', penalty);
  return {
    path: p,
    intervalMs: ms(`${path}.intervalMs`, o.intervalMs, 1000, 10),
    timeoutMs: ms(`${path}.timeoutMs`, o.timeoutMs, 1000, 1),
    blackoutMs: ms(`${path}.blackoutMs`, o.blackoutMs, 10_000, 0),
    expiryMs: ms(`${path}.expiryMs`, o.expiryMs, 180_000, 1),
    errorUtilizationPenalty: penalty,
  };
}

/**
 * Reads a report in Envoy's TEXT form: `TEXT key=value, key=value, ...`
 * (the `TEXT ` prefix optional). Known keys: `cpu_utilization`,
 * `application_utilization`, `mem_utilization` (read, unused),
 * `rps_fractional`, `eps`, `named_metrics.*` (ignored). Throws naming the
 * offending part; a report without `rps_fractional` or a utilization is
 * refused.
 */
export function parseLoadReport(text: string): LoadReport {
  const body = text.trim().replace(/^TEXT\s+/, '');
  let cpu = 0;
  let app = 0;
  let qps: number | undefined;
  let eps = 0;
  let hasUtil = false;
  for (const part of body.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    if (eq <= 0) throw new Error(`load report: ${JSON.stringify(item.slice(0, 40))} is not key=value`);
    const key = item.slice(0, eq).trim();
    const value = Number(item.slice(eq + 1).trim());
    if (!Number.isFinite(value) || value < 0)
      throw new Error(`load report: ${key} must be a finite number >= 0, got ${JSON.stringify(item.slice(eq + 1, eq + 30))}`);
    if (key === 'cpu_utilization') {
      cpu = value;
      hasUtil = true;
    } else if (key === 'application_utilization') {
      app = value;
      hasUtil = true;
    } else if (key === 'rps_fractional') qps = value;
    else if (key === 'eps') eps = value;
    else if (key !== 'mem_utilization' && !key.startsWith('named_metrics.'))
      throw new Error(`load report: unknown key ${JSON.stringify(key.slice(0, 40))}`);
  }
  if (qps === undefined || !hasUtil) throw new Error('load report: needs rps_fractional and cpu_utilization or application_utilization');
  return { utilization: app > 0 ? app : cpu, qps, eps };
}

/** A58's per-backend state. */
interface Entry {
  /** The last report's weight (0 when it gave none). */
  weight: number;
  /** When reports began without a gap longer than the expiry; -1 = none yet. */
  nonEmptySince: number;
  /** When the last usable report arrived; -1 = never. */
  lastUpdated: number;
}

/**
 * The A58 weight state of a cluster (pure: times are passed in). `record`
 * takes one report, `weights` says what is in force at an instant.
 */
export class OrcaWeightState {
  private readonly o: ResolvedOrca;
  private readonly entries = new Map<string, Entry>();

  constructor(o: ResolvedOrca) {
    this.o = o;
  }

  /** Takes backend `id`'s report at `nowMs`. A report with no qps or no utilization gives no weight (and is not "non-empty"). */
  record(id: string, r: LoadReport, nowMs: number): void {
    let e = this.entries.get(id);
    if (e === undefined) {
      e = { weight: 0, nonEmptySince: -1, lastUpdated: -1 };
      this.entries.set(id, e);
    }
    if (r.qps <= 0 || r.utilization <= 0) {
      e.weight = 0;
      return;
    }
    const weight = r.qps / (r.utilization + (r.eps / r.qps) * this.o.errorUtilizationPenalty);
    // A gap longer than the expiry starts the blackout again.
    if (e.nonEmptySince < 0 || e.lastUpdated < 0 || elapsedMs(nowMs, e.lastUpdated) >= this.o.expiryMs) e.nonEmptySince = nowMs;
    e.lastUpdated = nowMs;
    e.weight = weight;
  }

  /** Forgets backends not in `ids` (they left). */
  retain(ids: ReadonlySet<string>): void {
    for (const id of this.entries.keys()) if (!ids.has(id)) this.entries.delete(id);
  }

  /**
   * The weight in force for each of `ids` at `nowMs`: its own when out of the
   * blackout and not expired, else the mean of those in force; an empty map
   * when none is in force.
   */
  weights(ids: readonly string[], nowMs: number): Map<string, number> {
    const own = new Map<string, number>();
    let sum = 0;
    for (const id of ids) {
      const e = this.entries.get(id);
      if (e === undefined || e.weight <= 0 || e.lastUpdated < 0) continue;
      if (elapsedMs(nowMs, e.lastUpdated) >= this.o.expiryMs) continue;
      if (elapsedMs(nowMs, e.nonEmptySince) < this.o.blackoutMs) continue;
      own.set(id, e.weight);
      sum += e.weight;
    }
    const out = new Map<string, number>();
    if (own.size === 0) return out;
    const mean = sum / own.size;
    for (const id of ids) out.set(id, own.get(id) ?? mean);
    return out;
  }
}

/**
 * Polls every backend's load endpoint and writes the A58 weights into the
 * table (owner thread). Off by default: the Balancer runs one when its
 * health block has `orca`. @internal
 */
export class OrcaWeights {
  private readonly state: OrcaWeightState;
  private targets: HealthTarget[] = [];
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Reports read and refused (bad text, failed polls), for tests and diagnostics. */
  readonly counts = { reports: 0, refused: 0 };

  constructor(
    private readonly table: LoadTable,
    private readonly o: ResolvedOrca,
    private readonly log: Logger,
    private readonly clock: () => number,
  ) {
    this.state = new OrcaWeightState(o);
  }

  /** The backends to poll (the Balancer calls it on every membership). */
  sync(targets: HealthTarget[]): void {
    this.targets = targets;
    this.state.retain(new Set(targets.map((t) => t.id)));
    this.apply();
  }

  /** Starts polling every `intervalMs` (real time). */
  start(): void {
    if (this.timer !== undefined || this.closed) return;
    const tick = (): void => {
      void this.poll().finally(() => {
        if (!this.closed) this.timer = setTimeout(tick, this.o.intervalMs).unref();
      });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  /** One round: polls every backend once, then writes the weights in force. */
  async poll(): Promise<void> {
    const targets = this.targets;
    await Promise.all(
      targets.map(async (t) => {
        try {
          const text = await fetchReport(t, this.o);
          this.state.record(t.id, parseLoadReport(text), wrapMs(this.clock()));
          this.counts.reports++;
        } catch (err) {
          this.counts.refused++;
          this.log.debug({ backend: t.id, err: err instanceof Error ? err.message : String(err) }, 'poise: load report not read');
        }
      }),
    );
    if (!this.closed) this.apply();
  }

  /** Writes each target's weight in force, relative to their mean, into its slot (or clears it). */
  apply(): void {
    const t = this.table;
    const ids = this.targets.map((x) => x.id);
    const weights = this.state.weights(ids, wrapMs(this.clock()));
    let mean = 0;
    for (const w of weights.values()) mean += w / weights.size;
    let changed = false;
    for (const target of this.targets) {
      if (t.tag(target.slot) >>> 3 !== target.generation) continue;
      const w = weights.get(target.id);
      const before = t.reported.flags(target.slot) & ReportFlag.Weight;
      if (w === undefined || mean <= 0) {
        if (before !== 0) changed = t.reported.setWeight(target.slot, undefined) || changed;
      } else changed = t.reported.setWeight(target.slot, (w / mean) * 1_000_000) || changed;
    }
    if (changed) t.epochs.bumpHealth();
  }

  /** Stops polling and clears the weights it wrote. */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    let changed = false;
    for (const target of this.targets) {
      if (this.table.tag(target.slot) >>> 3 === target.generation)
        changed = this.table.reported.setWeight(target.slot, undefined) || changed;
    }
    if (changed) this.table.epochs.bumpHealth();
  }
}

/** GETs the load endpoint: the `endpoint-load-metrics` header, else the body (at most 4 KiB). */
function fetchReport(t: HealthTarget, o: ResolvedOrca): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: t.host, port: t.port, path: o.path, method: 'GET', timeout: o.timeoutMs, agent: false }, (res) => {
      const header = res.headers['endpoint-load-metrics'];
      if (typeof header === 'string') {
        res.resume();
        resolve(header);
        return;
      }
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (d: string) => {
        body += d;
        if (body.length > 4096) req.destroy(new Error('load report longer than 4096 bytes'));
      });
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`load report timed out after ${o.timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
