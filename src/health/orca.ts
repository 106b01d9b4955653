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
 * slot's ORCA weight word (load/backend-load.ts; this is its only writer,
 * the agent's weight has a word of its own), where every router's view
 * build reads it and combines it with the agent's (effective-weight.ts).
 */
import { http } from '../core/node-http.js';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { requestPath } from '../core/validate.js';
import { type LoadReportScan, ReportScan, newLoadReportScan, scanLoadReport } from '../core/load-report.js';
import { elapsedMs, wrapMs } from '../core/time.js';
import { backgroundTimers, type TimerSource } from '../core/timers.js';
import type { BackendLoad, SlotReport } from '../load/backend-load.js';
import type { LoadTable } from '../load/load-table.js';
import { tagGeneration } from '../load/slot-tags.js';
import type { Logger } from '../log.js';
import type { HealthTarget } from './targets.js';
import { VerdictSource } from '../load/verdicts.js';

/** ORCA weight options (a health block's `orca`). */
export interface OrcaOptions {
  /**
   * Where reports come from: `endpoint` (default) polls each backend's load
   * endpoint; `responses` polls nothing and uses the `endpoint-load-metrics`
   * header of the HTTP dispatcher's responses (read in every thread; with
   * `endpoint` they count too).
   */
  source?: 'endpoint' | 'responses';
  /** The load endpoint's path on each backend; default `/load`. */
  path?: string;
  /** Time between polls of one backend, ms; default 1000 (A58's `weight_update_period`). */
  intervalMs?: number;
  /** A poll's deadline, ms from its start (connect, headers and body: one timer); default 1000. */
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

const KEYS = ['source', 'path', 'intervalMs', 'timeoutMs', 'blackoutMs', 'expiryMs', 'errorUtilizationPenalty'];

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
  const p = requestPath(o.path ?? '/load', `${path}.path`);
  const penalty = o.errorUtilizationPenalty ?? 1;
  if (typeof penalty !== 'number' || !Number.isFinite(penalty) || penalty < 0)
    invalidConfig(`${path}.errorUtilizationPenalty`, 'must be a finite number >= 0', penalty);
  const source = o.source ?? 'endpoint';
  if (source !== 'endpoint' && source !== 'responses') invalidConfig(`${path}.source`, 'must be "endpoint" or "responses"', source);
  return {
    source,
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
  const scan = newLoadReportScan();
  const code = scanLoadReport(text, scan);
  if (code === ReportScan.Ok) return { utilization: scan.utilization, qps: scan.qps, eps: scan.eps };
  throw new Error(`load report: ${reportError(text, code, scan)}`);
}

/** Why a report was not read (a scanner code and its offending range), for a log line or a thrown message. @internal */
export function reportError(text: string, code: number, scan: LoadReportScan): string {
  const part = text.slice(scan.errorStart, scan.errorEnd);
  if (code === ReportScan.NotKeyValue) return `${JSON.stringify(part.slice(0, 40))} is not key=value`;
  if (code === ReportScan.UnknownKey) return `unknown key ${JSON.stringify(part.slice(0, 40))}`;
  if (code === ReportScan.BadNumber) {
    const eq = part.indexOf('=');
    return `${part.slice(0, eq).trim()} must be a finite number >= 0, got ${JSON.stringify(part.slice(eq + 1, eq + 30).trim())}`;
  }
  return 'needs rps_fractional and cpu_utilization or application_utilization';
}

/** A58's weight of one report: 0 when it has no queries or no utilization. */
export function a58Weight(r: Readonly<LoadReport>, errorUtilizationPenalty: number): number {
  if (r.qps <= 0 || r.utilization <= 0) return 0;
  return r.qps / (r.utilization + (r.eps / r.qps) * errorUtilizationPenalty);
}

/**
 * The A58 weights in force at `nowMs` of the backends in `slots`, read from
 * their report words (load/backend-load.ts), written into `out` (same
 * order): a backend's own weight when its run of reports is older than the
 * blackout and its last report younger than the expiry, else the mean of
 * those in force. Returns how many are in force (0: nobody is weighted by
 * reports; `out` is then untouched). Reports older than the expiry are
 * forgotten on the way (the next one starts a new blackout).
 */
export function weightsInForce(reported: BackendLoad, slots: readonly number[], nowMs: number, o: ResolvedOrca, out: number[]): number {
  const r: SlotReport = { utilization: 0, qps: 0, eps: 0, at: 0, since: 0 };
  let sum = 0;
  let n = 0;
  out.length = slots.length;
  for (let k = 0; k < slots.length; k++) {
    out[k] = 0;
    if (!reported.readReport(slots[k]!, nowMs, o.expiryMs, r)) continue;
    if (elapsedMs(nowMs, r.since) < o.blackoutMs) continue;
    const w = a58Weight(r, o.errorUtilizationPenalty);
    if (w <= 0) continue;
    out[k] = w;
    sum += w;
    n++;
  }
  if (n === 0) return 0;
  for (let k = 0; k < slots.length; k++) if (out[k] === 0) out[k] = sum / n;
  return n;
}

/**
 * Writes the A58 weights into the table (owner thread): every `intervalMs`
 * it polls each backend's load endpoint (source `endpoint`), recording the
 * report in the slot's report words as a dispatcher thread records a
 * response header's, and computes the weights in force from those words.
 * Off by default: the Balancer runs one when its health block has `orca`.
 *
 * One stuck endpoint never holds the others back: every poll has a hard
 * deadline (`timeoutMs` from its start: connect, headers and body, one
 * timer), each answer is applied when it arrives (answers of one event-loop
 * turn together), a round starts on time whether or not the previous one's
 * polls have ended (a backend whose poll is still running is not polled
 * twice), and each round first applies the weights in force, so a report
 * expires on time whatever any endpoint does.
 * @internal
 */
export class OrcaWeights {
  private targets: readonly HealthTarget[] = [];
  private timer: unknown;
  private closed = false;
  private readonly weights: number[] = [];
  private slots: number[] = [];
  /** The polls running, by `slot:generation` (one per backend at most). */
  private readonly running = new Map<string, Promise<void>>();
  private readonly scan = newLoadReportScan();
  private applyQueued = false;
  /** Whether this source polls load endpoints (`source: 'endpoint'`): only then is there a first verdict to await. */
  get polls(): boolean {
    return this.o.source === 'endpoint';
  }

  /** Endpoint reports read and refused (bad text, failed polls), for tests and diagnostics. */
  readonly counts = { reports: 0, refused: 0 };

  constructor(
    private readonly table: LoadTable,
    private readonly o: ResolvedOrca,
    private readonly log: Logger,
    private readonly clock: () => number,
    /** The rounds' and the polls' deadlines' timers (unref'd real ones unless a test injects its own). */
    private readonly timers: TimerSource = backgroundTimers,
  ) {}

  /** The backends to poll (the Balancer calls it on every membership). */
  sync(targets: readonly HealthTarget[]): void {
    // Each new occupant awaits its first poll (a `responses` source has no poll: nothing to await); one no longer polled awaits nothing.
    if (this.o.source === 'endpoint') {
      const key = (t: HealthTarget): string => `${t.slot}:${t.generation}`;
      const before = new Set(this.targets.map(key));
      const after = new Set(targets.map(key));
      for (const t of targets) if (!before.has(key(t))) this.table.verdicts.expect(t.slot, VerdictSource.Orca);
      for (const t of this.targets) if (!after.has(key(t))) this.settle(t);
    }
    this.targets = targets;
    this.slots = targets.map((t) => t.slot);
    this.apply();
  }

  /** Starts the rounds, one every `intervalMs` (on the timer source), each started on time. */
  start(): void {
    if (this.timer !== undefined || this.closed) return;
    const tick = (): void => {
      if (this.closed) return;
      this.timer = this.timers.setTimeout(tick, this.o.intervalMs);
      void this.poll();
    };
    this.timer = this.timers.setTimeout(tick, 0);
  }

  /**
   * One round: applies the weights in force (expiring old reports), then
   * polls every backend whose last poll has ended (source `endpoint`),
   * applying each answer as it arrives. Resolves when every poll of the
   * round has answered or reached its deadline, and what they brought is
   * applied.
   */
  async poll(): Promise<void> {
    this.apply();
    if (this.o.source !== 'endpoint') return;
    const polls: Promise<void>[] = [];
    for (const t of this.targets) {
      const key = `${t.slot}:${t.generation}`;
      let p = this.running.get(key);
      if (p === undefined) {
        p = this.pollOne(t).finally(() => this.running.delete(key));
        this.running.set(key, p);
      }
      polls.push(p);
    }
    await Promise.all(polls);
    if (!this.closed) this.apply();
  }

  private async pollOne(t: HealthTarget): Promise<void> {
    try {
      const text = await fetchReport(t, this.o, this.timers);
      const scan = this.scan;
      const code = scanLoadReport(text, scan);
      if (code !== ReportScan.Ok) throw new Error(`load report: ${reportError(text, code, scan)}`);
      // A membership may have moved the slot on while the poll ran.
      if (this.closed || tagGeneration(this.table.tag(t.slot)) !== t.generation) return;
      this.table.reported.report(t.slot, scan.utilization, scan.qps, scan.eps, wrapMs(this.clock()));
      this.counts.reports++;
      this.queueApply();
    } catch (err) {
      this.counts.refused++;
      this.log.debug({ backend: t.id, err: err instanceof Error ? err.message : String(err) }, 'poise: load report not read');
    }
    // Closed meanwhile: close() settled every target already, and a source configured after it may await this slot's bit.
    if (this.closed) return;
    this.settle(t);
  }

  /** The target's first poll is in (or it is no longer polled): settle its bit, and announce it to waiters. */
  private settle(t: HealthTarget): void {
    const table = this.table;
    if (tagGeneration(table.tag(t.slot)) === t.generation && table.verdicts.settle(t.slot, VerdictSource.Orca)) table.epochs.bumpHealth();
  }

  /** Applies the answers of this event-loop turn together, once, at its end. */
  private queueApply(): void {
    if (this.applyQueued) return;
    this.applyQueued = true;
    setImmediate(() => {
      this.applyQueued = false;
      if (!this.closed) this.apply();
    }).unref();
  }

  /** Writes each target's weight in force, relative to their mean, into its slot (or clears it). */
  apply(): void {
    const t = this.table;
    const n = weightsInForce(t.reported, this.slots, wrapMs(this.clock()), this.o, this.weights);
    let mean = 0;
    if (n > 0) for (const w of this.weights) mean += w / this.weights.length;
    let changed = false;
    for (let k = 0; k < this.targets.length; k++) {
      const target = this.targets[k]!;
      if (tagGeneration(t.tag(target.slot)) !== target.generation) continue;
      // ORCA's own word (load/backend-load.ts): the agent's weight beside it is never touched here.
      if (n === 0 || mean <= 0) changed = t.reported.setOrcaWeight(target.slot, undefined) || changed;
      else changed = t.reported.setOrcaWeight(target.slot, (this.weights[k]! / mean) * 1_000_000) || changed;
    }
    if (changed) t.epochs.bumpHealth();
  }

  /** Stops the rounds and clears the weights it wrote. */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    let changed = false;
    for (const target of this.targets) {
      if (tagGeneration(this.table.tag(target.slot)) === target.generation)
        changed = this.table.reported.setOrcaWeight(target.slot, undefined) || changed;
      this.settle(target);
    }
    if (changed) this.table.epochs.bumpHealth();
  }
}

/**
 * GETs the load endpoint: the `endpoint-load-metrics` header, else the body
 * (at most 4 KiB). One deadline, `timeoutMs` from the start, covers the
 * connect, the headers and the body: an endpoint that answers a byte at a
 * time is cut off like a silent one.
 */
function fetchReport(t: HealthTarget, o: ResolvedOrca, timers: TimerSource): Promise<string> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let deadline: unknown;
    const finish = (err: Error | undefined, text = ''): void => {
      if (settled) return;
      settled = true;
      timers.clearTimeout(deadline);
      // Nothing more is read: a body still coming (or a header still dripping) ends with the socket.
      req.destroy();
      if (err === undefined) resolve(text);
      else reject(err);
    };
    const req = http.request({ host: t.host, port: t.port, path: o.path, method: 'GET', agent: false }, (res) => {
      const header = res.headers['endpoint-load-metrics'];
      if (typeof header === 'string') return finish(undefined, header);
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (d: string) => {
        body += d;
        if (body.length > 4096) finish(new Error('load report longer than 4096 bytes'));
      });
      res.on('end', () => finish(undefined, body));
      res.on('error', (e) => finish(e));
    });
    deadline = timers.setTimeout(() => finish(new Error(`load report not complete after ${o.timeoutMs} ms`)), o.timeoutMs);
    req.on('error', (e) => finish(e));
    req.on('close', () => finish(new Error('connection closed before a complete report')));
    req.end();
  });
}
