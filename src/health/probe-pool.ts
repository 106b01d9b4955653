/**
 * The probe pool's prober (the `probe` policy; Prequal, NSDI '24): the
 * owner thread sends small HTTP probes to backends (`GET <path>`, answered
 * by `poise-lb/probe-server` with the `poise-load` report) and records each
 * answer in the slot's probe words (load/probe-region.ts), where every
 * thread's picks read it: one probe answers every thread.
 *
 * Why one prober on the owner rather than a shared token word any thread
 * may take: a policy only chooses (it does no I/O on the pick path), the
 * owner already runs the health supervisor's pollers on its event loop, and
 * a single prober makes the per-process rate limit a local token bucket —
 * no contended word on any thread's hot path, and no thread's probe racing
 * another's to the same backend. The cost is one event loop's latency
 * between a round and its answers, which the age limit already accounts for.
 *
 * The budget: every round (`intervalMs`) the bucket gains `share` tokens per
 * request the process made since the last round — the slots' pick counters
 * (load/leases.ts; routers add them in batches, so the count seen is at most
 * the count made, and the budget errs low) — up to `burst`; each probe
 * spends one. So probes stay at most `share` of requests (default 5 %) plus
 * one burst, whatever the number of threads, and an idle process sends
 * none. Targets are drawn at random (no two probes of one backend at once).
 *
 * Each round also writes the cold threshold every pick compares with: the
 * `quantile` of the in-flight counts of the answers younger than `maxAgeMs`.
 */
import { http } from '../core/node-http.js';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { PROBE_REPORT_HEADER, newProbeReportScan, scanProbeReport } from '../core/probe-report.js';
import { Rng } from '../core/rng.js';
import { wrapMs } from '../core/time.js';
import { backgroundTimers, type TimerSource } from '../core/timers.js';
import { integerIn, numberIn, requestPath } from '../core/validate.js';
import type { LoadTable } from '../load/load-table.js';
import type { ProbeReading } from '../load/probe-region.js';
import { tagGeneration } from '../load/slot-tags.js';
import type { Logger } from '../log.js';
import type { HealthTarget } from './targets.js';

/** Probe pool options (a health block's `probe`). */
export interface ProbeOptions {
  /** The probe path on each backend; default `/poise/probe` (the probe-server's). */
  path?: string;
  /** Probes per request at most, in (0, 1]; default 0.05. */
  share?: number;
  /** Probes the bucket may save up, 1–1000; default 8. */
  burst?: number;
  /** Time between rounds, ms; default 10. */
  intervalMs?: number;
  /** A probe's deadline, ms; default 500. */
  timeoutMs?: number;
  /** Answers older than this are not used, ms (0–86400000); default 100. */
  maxAgeMs?: number;
  /** Picks one answer may serve, per process; default 32. */
  maxUses?: number;
  /** The hot-cold quantile, in (0, 1]; default 0.75. */
  quantile?: number;
  /** Members one pick samples, 1–64; default 5. */
  sample?: number;
}

/** Probe options with defaults. */
export type ResolvedProbe = Required<ProbeOptions>;

const KEYS = ['path', 'share', 'burst', 'intervalMs', 'timeoutMs', 'maxAgeMs', 'maxUses', 'quantile', 'sample'];

/** Validates probe options (`InvalidConfig` naming `<path>.<field>`). @internal */
export function resolveProbe(value: unknown, path: string): ResolvedProbe {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalidConfig(path, 'must be an object', value);
  checkOptionKeys(value, KEYS, path);
  const o = value as ProbeOptions;
  const p = requestPath(o.path ?? '/poise/probe', `${path}.path`);
  return {
    path: p,
    share: numberIn(o.share ?? 0.05, `${path}.share`, Number.MIN_VALUE, 1),
    burst: integerIn(o.burst ?? 8, `${path}.burst`, 1, 1000),
    intervalMs: integerIn(o.intervalMs ?? 10, `${path}.intervalMs`, 1, 60_000),
    timeoutMs: integerIn(o.timeoutMs ?? 500, `${path}.timeoutMs`, 1, 60_000),
    maxAgeMs: integerIn(o.maxAgeMs ?? 100, `${path}.maxAgeMs`, 0, 86_400_000),
    maxUses: integerIn(o.maxUses ?? 32, `${path}.maxUses`, 1, 1_000_000),
    quantile: numberIn(o.quantile ?? 0.75, `${path}.quantile`, Number.MIN_VALUE, 1),
    sample: integerIn(o.sample ?? 5, `${path}.sample`, 1, 64),
  };
}

/** The owner's prober. @internal */
export class ProbePool {
  /** Probes answered and refused (bad text, failed or timed out), for tests and diagnostics. */
  readonly counts = { answered: 0, refused: 0 };
  private targets: readonly HealthTarget[] = [];
  /** Each slot's pick counter at the last round. */
  private lastPicks: Float64Array;
  private tokens = 0;
  private timer: unknown;
  private closed = false;
  /** Slots with a probe out. */
  private readonly out = new Set<number>();
  private readonly rng = new Rng();
  private readonly scan = newProbeReportScan();
  private readonly reading: ProbeReading = { inflight: 0, latencyUs: 0, ageMs: 0, uses: 0 };
  private readonly agent = new http.Agent({ keepAlive: true });

  constructor(
    private readonly table: LoadTable,
    private readonly o: ResolvedProbe,
    private readonly log: Logger,
    private readonly clock: () => number,
    private readonly timers: TimerSource = backgroundTimers,
  ) {
    this.lastPicks = new Float64Array(table.capacity);
    table.probes.configure(o);
  }

  /** The backends to probe (every membership); a new one's pick counter is read from now on. */
  sync(targets: readonly HealthTarget[]): void {
    const known = new Set(this.targets.map((t) => t.slot));
    for (const t of targets) if (!known.has(t.slot)) this.lastPicks[t.slot] = this.table.leases.picks(t.slot);
    this.targets = targets;
  }

  /** Starts the rounds (on the timer source). */
  start(): void {
    if (this.timer !== undefined || this.closed) return;
    const tick = (): void => {
      if (this.closed) return;
      this.timer = this.timers.setTimeout(tick, this.o.intervalMs);
      void this.round();
    };
    this.timer = this.timers.setTimeout(tick, this.o.intervalMs);
  }

  /** One round: tokens for the requests since the last, probes of random targets, the cold threshold. Resolves when its probes end. */
  async round(): Promise<void> {
    if (this.closed) return;
    this.refill();
    const sends: Promise<void>[] = [];
    const n = this.targets.length;
    // Partial Fisher–Yates over a copy: distinct random targets, at most one probe out per backend.
    const order = this.targets.slice();
    for (let k = 0; k < n && this.tokens >= 1; k++) {
      const j = k + this.rng.below(n - k);
      const t = order[j]!;
      order[j] = order[k]!;
      if (this.out.has(t.slot)) continue;
      this.tokens -= 1;
      sends.push(this.probe(t));
    }
    this.table.probes.countSent(sends.length);
    this.threshold();
    if (sends.length === 0) return;
    await Promise.all(sends);
    // The answers of this round count at once, not a round later.
    if (!this.closed) this.threshold();
  }

  /** The bucket gains `share` per pick since the last round, up to `burst`. */
  private refill(): void {
    let delta = 0;
    for (const t of this.targets) {
      const now = this.table.leases.picks(t.slot);
      // The counter wraps at 2^32.
      delta += (now - this.lastPicks[t.slot]! + 0x1_0000_0000) % 0x1_0000_0000;
      this.lastPicks[t.slot] = now;
    }
    this.tokens = Math.min(this.o.burst, this.tokens + delta * this.o.share);
  }

  /** Writes the quantile of the fresh answers' in-flight counts (−1 without any). */
  private threshold(): void {
    const now = wrapMs(this.clock());
    const rifs: number[] = [];
    for (const t of this.targets) {
      if (this.table.probes.read(t.slot, now, this.reading) && this.reading.ageMs <= this.o.maxAgeMs) rifs.push(this.reading.inflight);
    }
    if (rifs.length === 0) {
      this.table.probes.setColdInflight(-1);
      return;
    }
    rifs.sort((a, b) => a - b);
    this.table.probes.setColdInflight(rifs[Math.max(0, Math.ceil(this.o.quantile * rifs.length) - 1)]!);
  }

  private async probe(t: HealthTarget): Promise<void> {
    this.out.add(t.slot);
    try {
      const text = await fetchProbe(t, this.o, this.agent, this.timers);
      if (!scanProbeReport(text, this.scan)) throw new Error(`probe answer is not a report: ${JSON.stringify(text.slice(0, 60))}`);
      // A membership may have moved the slot on while the probe ran.
      if (this.closed || tagGeneration(this.table.tag(t.slot)) !== t.generation) return;
      this.table.probes.record(t.slot, this.scan.rif, this.scan.latencyUs, wrapMs(this.clock()), true);
      this.counts.answered++;
    } catch (err) {
      this.counts.refused++;
      this.log.debug({ backend: t.id, err: err instanceof Error ? err.message : String(err) }, 'poise: probe not answered');
    } finally {
      this.out.delete(t.slot);
    }
  }

  /** Stops the rounds; picks fall back to `p2c:latency`. */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.table.probes.disable();
    this.agent.destroy();
  }
}

/** GETs the probe path: the `poise-load` header, else the body (at most 1 KiB), within `timeoutMs`. */
function fetchProbe(t: HealthTarget, o: ResolvedProbe, agent: unknown, timers: TimerSource): Promise<string> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let deadline: unknown;
    const finish = (err: Error | undefined, text = ''): void => {
      if (settled) return;
      settled = true;
      timers.clearTimeout(deadline);
      if (err === undefined) resolve(text);
      else {
        req.destroy();
        reject(err);
      }
    };
    const req = http.request({ host: t.host, port: t.port, path: o.path, method: 'GET', agent: agent as never }, (res) => {
      const header = res.headers[PROBE_REPORT_HEADER];
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (d: string) => {
        body += d;
        if (body.length > 1024) finish(new Error('probe answer longer than 1024 bytes'));
      });
      res.on('end', () => finish(undefined, typeof header === 'string' ? header : body));
      res.on('error', (e) => finish(e));
    });
    deadline = timers.setTimeout(() => finish(new Error(`probe not answered after ${o.timeoutMs} ms`)), o.timeoutMs);
    req.on('error', (e) => finish(e));
    req.end();
  });
}
