/**
 * Outlier detection, as Envoy defines it, decided by the owner thread from
 * the per-slot interval counters every router adds to (`countOutcome`) —
 * so one view spans all threads.
 *
 * Each sweep (every `intervalMs`) takes and zeroes each backend's success
 * and failure counts, then:
 * - success rate: among backends with at least `successRateRequestVolume`
 *   requests — and only if there are `successRateMinimumHosts` of them —
 *   ejects those whose success rate is below mean − (stdevFactor / 1000) × σ
 *   (population σ);
 * - failure percentage: among backends with `failurePercentageRequestVolume`
 *   requests (at least `failurePercentageMinimumHosts` of them), ejects those
 *   failing `failurePercentageThreshold` % or more;
 * - each candidate is ejected with probability `enforcing…` %, and only if
 *   the ejected share *after* its ejection stays at or below
 *   `maxEjectionPercent` % of the cluster ({@link ejectionAllowed}, Envoy's
 *   rule since 1.28: never above the limit, so a limit below one host ejects
 *   nobody unless `alwaysEjectOneHost`);
 * - an ejection lasts `baseEjectionTimeMs × n` (n = ejections in a row,
 *   capped at `maxEjectionTimeMs`); n drops by one for every sweep a backend
 *   spends routable after a full interval back.
 * Consecutive failures stay inline in the routers (runtime/health.ts).
 */
import { Rng } from '../core/rng.js';
import type { LoadTable } from '../load/load-table.js';
import { tagGeneration } from '../load/slot-tags.js';
import type { Logger } from '../log.js';
import type { ResolvedOutlier } from './config.js';
import type { HealthCounters } from './stats.js';
import type { HealthTarget } from './targets.js';

/** One backend's interval: successes and failures. */
export interface IntervalSample {
  successes: number;
  failures: number;
}

/** Why the detector found a backend an outlier. */
export type OutlierReason = 'successRate' | 'failurePercentage';

/**
 * The outliers among one interval's samples (pure and deterministic):
 * `reasons[i]` is why sample i is an outlier, or undefined. Success rate
 * first (Envoy's order); a backend flagged by both reports `successRate`.
 */
export function findOutliers(samples: readonly IntervalSample[], o: ResolvedOutlier): (OutlierReason | undefined)[] {
  const out = new Array<OutlierReason | undefined>(samples.length).fill(undefined);
  const rates: number[] = [];
  const judged: number[] = [];
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i]!;
    const volume = s.successes + s.failures;
    if (volume >= o.successRateRequestVolume) {
      judged.push(i);
      rates.push((100 * s.successes) / volume);
    }
  }
  if (judged.length >= o.successRateMinimumHosts) {
    const mean = rates.reduce((a, b) => a + b, 0) / rates.length;
    const variance = rates.reduce((a, r) => a + (r - mean) * (r - mean), 0) / rates.length;
    const threshold = mean - (o.successRateStdevFactor / 1000) * Math.sqrt(variance);
    for (let k = 0; k < judged.length; k++) if (rates[k]! < threshold) out[judged[k]!] = 'successRate';
  }
  const fp: number[] = [];
  for (let i = 0; i < samples.length; i++) {
    const s = samples[i]!;
    if (s.successes + s.failures >= o.failurePercentageRequestVolume) fp.push(i);
  }
  if (fp.length >= o.failurePercentageMinimumHosts) {
    for (const i of fp) {
      const s = samples[i]!;
      if (out[i] === undefined && (100 * s.failures) / (s.successes + s.failures) >= o.failurePercentageThreshold)
        out[i] = 'failurePercentage';
    }
  }
  return out;
}

/**
 * Whether one more host may be ejected when `ejected` of `total` hosts are
 * out already (Envoy's `ejectHost`): the share after this ejection,
 * (ejected + 1) / total, must stay at or below `maxEjectionPercent` % —
 * compared in integers, so 2 of 3 hosts fit under 67 % and 1 of 2 under
 * 50 %. With `alwaysEjectOneHost` the first ejection is allowed whatever the
 * limit (Envoy's `always_eject_one_host`), so a cluster too small for the
 * limit can still lose its one bad host.
 */
export function ejectionAllowed(ejected: number, total: number, o: ResolvedOutlier): boolean {
  if (o.alwaysEjectOneHost && ejected === 0) return true;
  return 100 * (ejected + 1) <= o.maxEjectionPercent * total;
}

/** The length of the n-th ejection in a row (n >= 1): base × n, capped. */
export function ejectionTimeMs(n: number, o: ResolvedOutlier): number {
  return Math.min(o.baseEjectionTimeMs * n, o.maxEjectionTimeMs);
}

interface Track {
  target: HealthTarget;
  /** Ejections in a row (the multiplier). */
  multiplier: number;
  /** Whether it was ejected at the previous sweep (a full interval back is needed before the multiplier drops). */
  wasEjected: boolean;
}

/** The owner's outlier detector for one cluster. @internal */
export class OutlierDetector {
  private tracks = new Map<string, Track>();
  private timer: NodeJS.Timeout | undefined;
  private readonly rng = new Rng();
  private readonly pair = new Int32Array(2);

  constructor(
    private readonly table: LoadTable,
    readonly config: ResolvedOutlier,
    private readonly log: Logger,
    private readonly counters: HealthCounters,
    private readonly clock: () => number,
    /** Called first in every sweep: flushes the owner thread's batched outcome counts into the table. */
    private readonly beforeSweep: () => void = () => {},
  ) {}

  /** Follows the membership: new slots start with a zero multiplier. */
  sync(targets: readonly HealthTarget[]): void {
    const next = new Map<string, Track>();
    for (const t of targets) {
      const key = `${t.slot}:${t.generation}`;
      next.set(key, this.tracks.get(key) ?? { target: t, multiplier: 0, wasEjected: false });
    }
    this.tracks = next;
  }

  /** Starts the sweep timer (unref'd). */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.sweep(), this.config.intervalMs).unref();
  }

  /** The multiplier of a backend, by id. */
  multiplierOf(id: string): number {
    for (const tr of this.tracks.values()) if (tr.target.id === id) return tr.multiplier;
    return 0;
  }

  /** Stops the timer. */
  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One sweep: take every interval, find the outliers, eject within the limits. Returns the ids ejected. */
  sweep(): string[] {
    this.beforeSweep();
    const t = this.table;
    const now = this.clock();
    this.counters.outlierSweeps++;
    const live: Track[] = [];
    const samples: IntervalSample[] = [];
    let ejected = 0;
    for (const tr of this.tracks.values()) {
      const slot = tr.target.slot;
      if (tagGeneration(t.tag(slot)) !== tr.target.generation) continue;
      t.health.takeInterval(slot, this.pair);
      if (t.ejectedForMs(slot, now) > 0) {
        // Ejected hosts are not judged (their counts are stragglers).
        ejected++;
        tr.wasEjected = true;
        continue;
      }
      if (!tr.wasEjected && tr.multiplier > 0) tr.multiplier--;
      tr.wasEjected = false;
      live.push(tr);
      samples.push({ successes: this.pair[0]!, failures: this.pair[1]! });
    }
    const total = ejected + live.length;
    const reasons = findOutliers(samples, this.config);
    const out: string[] = [];
    for (let k = 0; k < live.length; k++) {
      const reason = reasons[k];
      if (reason === undefined) continue;
      const tr = live[k]!;
      const enforcing = reason === 'successRate' ? this.config.enforcingSuccessRate : this.config.enforcingFailurePercentage;
      if (enforcing < 100 && this.rng.below(100) >= enforcing) continue;
      if (!ejectionAllowed(ejected, total, this.config)) {
        this.counters.ejectionsSkippedMaxPercent++;
        this.log.warn(
          { backend: tr.target.id, address: tr.target.address, reason, ejected, total, maxEjectionPercent: this.config.maxEjectionPercent },
          'poise: outlier not ejected (max ejection percent)',
        );
        continue;
      }
      tr.multiplier++;
      tr.wasEjected = true;
      const ms = ejectionTimeMs(tr.multiplier, this.config);
      t.health.eject(tr.target.slot, now + ms);
      ejected++;
      if (reason === 'successRate') this.counters.ejectedSuccessRate++;
      else this.counters.ejectedFailurePercentage++;
      const s = samples[k]!;
      this.log.warn(
        {
          backend: tr.target.id,
          address: tr.target.address,
          reason,
          successes: s.successes,
          failures: s.failures,
          ejectMs: ms,
          ejections: tr.multiplier,
        },
        'poise: backend ejected (outlier detection)',
      );
      out.push(tr.target.id);
    }
    if (out.length > 0) t.epochs.bumpHealth();
    return out;
  }
}
