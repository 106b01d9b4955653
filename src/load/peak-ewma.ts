/**
 * PeakEWMA: a latency estimate that jumps up at once and decays down slowly.
 *
 * Units: every time and latency here is in **milliseconds** (a float; the
 * clock returns milliseconds, samples are milliseconds, `tauMs` is the decay
 * constant in milliseconds).
 *
 * The rules (Sōzu's, and tower's / Finagle's before it):
 * - **Decay on read.** Between observations the estimate decays towards 0 as
 *   `est · e^(−Δt/τ)`, where Δt is the time since the last observation, so a
 *   backend that has been quiet for a while is tried again. Every read decays
 *   to the read's instant. Reads never write: any number of readers (threads
 *   reading shared memory) see the same value, and how often anyone read has
 *   no effect on later observations.
 * - **Peak rule.** A sample above the decayed estimate replaces it: a latency
 *   spike is believed immediately.
 * - **EWMA otherwise.** With `w = e^(−Δt/τ)`, `est = est · w + sample · (1 − w)`:
 *   the older the previous observation, the more the new sample counts. `est`
 *   here is the value recorded at the previous observation, since reads do
 *   not write; tower and Sōzu write the decayed value back on every read, so
 *   their blend starts from the last read instead. (Consequence here: a
 *   sample just under a long-decayed estimate can leave it higher than it
 *   read a moment before, never higher than the previous record.)
 * - **Cost** for load-aware policies is `estimate × (pending + 1)`, so an idle
 *   fast backend beats a busy one and pending work multiplies latency.
 *
 * Defaults are Sōzu's: τ = 1 s (`tauMs = 1000`) and an initial estimate of
 * 50 ms (`initialMs = 50`), the cost of a backend that has never been measured.
 * (linkerd and Finagle decay over 10 s; pass `tauMs: 10_000` for that.)
 *
 * This file is the one kernel: {@link peakEwmaNext} is the update and
 * {@link DecayTable} the decay factor. {@link decayEstimate},
 * {@link observeSample} and {@link PeakEwma} apply them to float
 * milliseconds for one backend; the LoadTable's PeakEWMA region
 * (ewma-region.ts) applies them to integer microseconds in shared memory,
 * where elapsed times are whole milliseconds and the factor is looked up.
 */
import { invalidConfig, checkOptionKeys } from '../core/errors.js';
import { positiveNumber, nonNegativeNumber } from '../core/validate.js';

/**
 * The estimate `estimate` (recorded at `lastMs`) decayed to `nowMs`:
 * `estimate · e^(−(nowMs − lastMs)/tauMs)`. A clock that went backwards
 * (`nowMs < lastMs`) decays nothing. All arguments in milliseconds.
 * {@link PeakEwma}'s read. @internal
 *
 * @example
 * decayEstimate(100, 0, 1000, 1000); // 100 / e ≈ 36.79
 */
export function decayEstimate(estimate: number, lastMs: number, nowMs: number, tauMs: number): number {
  const dt = nowMs - lastMs;
  return dt > 0 ? estimate * Math.exp(-dt / tauMs) : estimate;
}

/**
 * The estimate after observing `sampleMs` at `nowMs`, given `estimate`
 * recorded at `lastMs`: the sample itself when it is above the decayed
 * estimate (the peak rule), else `estimate · w + sampleMs · (1 − w)` with
 * `w = e^(−Δt/tauMs)`. Record `nowMs` as the new `lastMs`. All in milliseconds.
 * {@link PeakEwma}'s update. @internal
 *
 * @example
 * observeSample(50, 0, 200, 10, 1000); // 200: a peak replaces the estimate
 * observeSample(50, 0, 10, 1000, 1000); // 50/e + 10·(1 − 1/e) ≈ 24.71
 */
export function observeSample(estimate: number, lastMs: number, sampleMs: number, nowMs: number, tauMs: number): number {
  const dt = nowMs - lastMs;
  return peakEwmaNext(estimate, dt > 0 ? Math.exp(-dt / tauMs) : 1, sampleMs);
}

/**
 * The PeakEWMA update with decay weight `w = e^(−Δt/τ)`: the peak rule (a
 * sample above the decayed estimate replaces it), else the EWMA
 * `estimate · w + sample · (1 − w)`. Any unit, as long as both are the same.
 */
export function peakEwmaNext(estimate: number, w: number, sample: number): number {
  const decayed = estimate * w;
  return sample > decayed ? sample : decayed + sample * (1 - w);
}

/**
 * The plain EWMA update with decay weight `w = e^(−Δt/τ)`, no peak rule:
 * `estimate · w + sample · (1 − w)`. The LoadTable keeps it beside the
 * PeakEWMA latency (the mean a tail rule compares: a latency peak shared by
 * every backend — a pause of the caller's event loop — moves it by (1 − w)
 * only, where it replaces the PeakEWMA at once). Any unit.
 */
export function ewmaNext(estimate: number, w: number, sample: number): number {
  return estimate * w + sample * (1 - w);
}

/** Entries of a {@link DecayTable}: elapsed times below 4.096 s are looked up (32 KiB per table). */
export const DECAY_STEPS = 4096;

/**
 * `e^(−k/τ)` for whole milliseconds k, looked up instead of calling
 * `Math.exp` on every read of a shared estimate. The same expression, so the
 * same doubles bit for bit; longer intervals fall back to `Math.exp`.
 */
export class DecayTable {
  /** Decay constant τ, ms. */
  readonly tauMs: number;
  /** `steps[k] = Math.exp(-k / tauMs)`. */
  readonly steps: Float64Array;

  constructor(tauMs: number) {
    this.tauMs = tauMs;
    this.steps = new Float64Array(DECAY_STEPS);
    for (let k = 0; k < DECAY_STEPS; k++) this.steps[k] = Math.exp(-k / tauMs);
  }

  /** e^(−dt/τ) for an elapsed time dt >= 0 ms (an integer). */
  factor(dt: number): number {
    return dt < DECAY_STEPS ? this.steps[dt]! : Math.exp(-dt / this.tauMs);
  }
}

/** Options of {@link PeakEwma}. */
export interface PeakEwmaOptions {
  /** Decay constant τ in milliseconds; finite and > 0. Default 1000 (Sōzu). */
  tauMs?: number;
  /** Estimate before the first sample, in milliseconds; finite and >= 0. Default 50 (Sōzu). */
  initialMs?: number;
  /** Current time in milliseconds. Default `performance.now`. Inject one in tests. */
  clock?: () => number;
}

const defaultClock = (): number => performance.now();

/**
 * One backend's PeakEWMA latency estimate, for your own candidates (a
 * `Backend`'s `load`, a custom policy). The runtime's routers do not use this
 * class: they read the LoadTable's shared estimates (ewma-region.ts), which
 * the same kernel updates in integer microseconds.
 *
 * @example
 * let now = 0;
 * const ewma = new PeakEwma({ clock: () => now });
 * ewma.observe(120);        // a peak: the estimate is 120 ms at once
 * now = 1000;
 * ewma.estimate();          // 120 / e ≈ 44.1 ms
 * ewma.cost(3);             // estimate × (3 + 1)
 */
export class PeakEwma {
  /** Decay constant τ, milliseconds. */
  readonly tauMs: number;
  private readonly clock: () => number;
  private est: number;
  private lastMs: number;

  /** Throws `InvalidConfig` naming the option when one is out of range. */
  constructor(options: PeakEwmaOptions = {}) {
    checkOptionKeys(options, ['tauMs', 'initialMs', 'clock']);
    const { tauMs = 1000, initialMs = 50, clock = defaultClock } = options;
    positiveNumber(tauMs, 'options.tauMs', 'milliseconds');
    nonNegativeNumber(initialMs, 'options.initialMs', 'milliseconds');
    if (typeof clock !== 'function') invalidConfig('options.clock', 'must be a function returning milliseconds', clock);
    this.tauMs = tauMs;
    this.clock = clock;
    this.est = initialMs;
    this.lastMs = clock();
  }

  /** Records a latency sample in milliseconds (finite, >= 0; else `InvalidConfig`). */
  observe(sampleMs: number): void {
    nonNegativeNumber(sampleMs, 'sampleMs', 'milliseconds');
    const now = this.clock();
    this.est = observeSample(this.est, this.lastMs, sampleMs, now, this.tauMs);
    if (now > this.lastMs) this.lastMs = now;
  }

  /** The estimate decayed to now, in milliseconds. Does not modify the state. */
  estimate(): number {
    return decayEstimate(this.est, this.lastMs, this.clock(), this.tauMs);
  }

  /** `estimate() × (pending + 1)`: the cost a load-aware policy compares. */
  cost(pending: number): number {
    return this.estimate() * (pending + 1);
  }
}
