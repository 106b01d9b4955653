/**
 * The PeakEWMA region: per slot, two estimates (connect time, request
 * latency) in integer microseconds with the shared-clock millisecond of
 * their last update, under one seqlock word per slot. The math is the
 * kernel's (peak-ewma.ts); this file is the protocol over shared memory.
 *
 * Writers take the lock with a CAS that records their row (so the owner can
 * release a lock left by a thread that died inside the section), store the
 * pair, and unlock with a new version. A writer that finds the lock held
 * drops its sample: two simultaneous samples on one backend, one of them is
 * enough for an estimate.
 *
 * Readers: {@link EwmaRegion.estimateUs} is the exact read (seqlock retry,
 * for statistics and tests). {@link EwmaRegion.estimateHintUs} is the pick
 * path's read: two plain loads and no lock. Each load is tear-free (an
 * aligned Int32 element); the pair may be torn by a concurrent update — an
 * estimate with its neighbour's timestamp — which decays it by the wrong
 * few milliseconds for one comparison. That is the stale-information case
 * power of two choices tolerates; the next read is whole again.
 *
 * The cold start (the request latency only; docs/policies.md, "The cold
 * start"): the initial estimate is a prior, no evidence — a slot's first
 * sample replaces it in the PeakEWMA and in the mean whatever Δt (the mean
 * word, negated until then, says which slots have had none: slot-candidate.ts
 * probes those instead of costing them the prior). Then, until τ after that
 * first sample (word 28), a sample weighs at least its share of the series'
 * age. A warm slot's update is the kernel's exactly.
 *
 * Times are whole milliseconds of the shared clock modulo 2^30, compared by
 * wrapping difference (core/time.ts): correct for intervals below 2^29 ms.
 */
import { elapsedMs, wrapMs } from '../core/time.js';
import { H_INITIAL_US, S_EWMA, S_EWMA_LOCK, S_EWMA_MEAN, S_EWMA_SINCE, SLOT_WORDS, type Layout } from './layout.js';
import { DECAY_STEPS, DecayTable, peakEwmaNext } from './peak-ewma.js';

/**
 * PeakEWMA series kept per slot. The latency series also has a plain EWMA
 * beside it (words 26–27, {@link EwmaRegion.meanHintUs}), updated with it
 * under the same lock and at the same instants, so its timestamp equals the
 * latency's whenever both are read whole.
 */
export const EwmaSeries = { ConnectTime: 0, Latency: 1 } as const;
/** A PeakEWMA series code. */
export type EwmaSeriesCode = (typeof EwmaSeries)[keyof typeof EwmaSeries];

const MAX_US = 0x7fffffff;

/** The PeakEWMA words of one table. */
export class EwmaRegion {
  /** The decay factors (τ from the table's header). */
  readonly decay: DecayTable;
  private readonly i32: Int32Array;
  private readonly layout: Layout;
  private readonly slotBase: number;
  private readonly steps: Float64Array;

  constructor(i32: Int32Array, layout: Layout, tauMs: number) {
    this.i32 = i32;
    this.layout = layout;
    this.slotBase = layout.slotBase;
    this.decay = new DecayTable(tauMs);
    this.steps = this.decay.steps;
  }

  /**
   * The exact estimate of `series` on `slot` decayed to `nowMs`, integer µs:
   * the pair read under the seqlock (retried while a writer holds it or the
   * version moved; after 4 attempts — a writer that died mid-update, until
   * the owner unlocks its row — the last pair read, each word whole).
   */
  estimateUs(slot: number, series: EwmaSeriesCode, nowMs: number): number {
    const i = this.i32;
    const o = this.slotBase + slot * SLOT_WORDS;
    const e = o + S_EWMA + series * 2;
    let est = 0;
    let at = 0;
    for (let attempt = 0; attempt < 4; attempt++) {
      // Seqlock read: lock word, the pair, the lock word again (all SC loads,
      // so the pair cannot be reordered outside the two lock reads).
      const v1 = Atomics.load(i, o + S_EWMA_LOCK);
      est = Atomics.load(i, e);
      at = Atomics.load(i, e + 1);
      if ((v1 & 0xff) === 0 && Atomics.load(i, o + S_EWMA_LOCK) === v1) break;
    }
    return this.decayed(est, at, nowMs);
  }

  /** The pick path's estimate: two plain loads, no lock (see the file comment for why that is enough). */
  estimateHintUs(slot: number, series: number, nowMs: number): number {
    const e = this.slotBase + slot * SLOT_WORDS + S_EWMA + series * 2;
    return this.decayed(this.i32[e]!, this.i32[e + 1]!, nowMs);
  }

  /**
   * The latency's plain EWMA (no peak rule) on `slot` decayed to `nowMs`,
   * integer µs: two plain loads, no lock — the same argument as
   * {@link estimateHintUs} (each word whole; a torn pair decays by a few
   * wrong milliseconds for one comparison). Before the slot's first sample,
   * the initial estimate undecayed: a prior is what is assumed while
   * nothing is known, and time alone teaches nothing (decayed, a failure
   * 10 s after the join was penalised at 2 × 2 µs and the failing backend
   * looked fast; test/runtime/unmeasured-backend.test.ts).
   */
  meanHintUs(slot: number, nowMs: number): number {
    const mean = this.meanRecordedUs(slot);
    return mean < 0 ? -mean : this.meanDecayedUs(slot, mean, nowMs);
  }

  /**
   * The latency's plain EWMA on `slot` as last recorded, integer µs, not
   * decayed — negative (the initial estimate, negated) while the slot has
   * had no sample: what the tail rule reads (slot-candidate.ts). One plain
   * load.
   */
  meanRecordedUs(slot: number): number {
    return this.i32[this.slotBase + slot * SLOT_WORDS + S_EWMA_MEAN]!;
  }

  /**
   * `recordedUs` — the mean {@link meanRecordedUs} just read on `slot`, not
   * negative — decayed to `nowMs` from its last update: the tail rule's read
   * without loading the mean word twice.
   */
  meanDecayedUs(slot: number, recordedUs: number, nowMs: number): number {
    return this.decayed(recordedUs, this.i32[this.slotBase + slot * SLOT_WORDS + S_EWMA_MEAN + 1]!, nowMs);
  }

  /** `est` recorded at `at`, decayed to `nowMs` (a small integer: no allocation). */
  private decayed(est: number, at: number, nowMs: number): number {
    const dt = elapsedMs(wrapMs(nowMs), at);
    if (dt <= 0) return est;
    // The factor is looked up inline (a helper returning a double, if not
    // inlined, would box it); | 0 keeps the result a small integer.
    if (dt < DECAY_STEPS) return Math.round(est * this.steps[dt]!) | 0;
    return Math.round(est * this.decay.factor(dt)) | 0;
  }

  /**
   * Records a sample of `series` on `slot` (the kernel's peak rule, else
   * EWMA with w = e^(−Δt/τ); for the request latency, the cold start's
   * first and young samples: see the file comment). `row` is the writer's
   * attribution row (owner of the lock while writing). Returns false when another writer held the
   * lock: the sample is then dropped.
   */
  observe(slot: number, series: EwmaSeriesCode, sampleMs: number, nowMs: number, row: number): boolean {
    const i = this.i32;
    const o = this.slotBase + slot * SLOT_WORDS;
    const lock = o + S_EWMA_LOCK;
    const e = o + S_EWMA + series * 2;
    const now = wrapMs(nowMs);
    // Fast path, no write at all: within the same millisecond as the last
    // update (dt = 0, so w = 1) a sample at or below the estimate leaves both
    // words exactly as they are — unless the request latency has had no
    // sample yet (the mean word negative: the first replaces the prior). Under
    // load almost every sample lands here, which keeps the slot's cache line
    // shared instead of bouncing. Plain loads (tear-free): a pair torn by a
    // concurrent writer can at worst drop this one sample, which is what a
    // held lock does anyway (below).
    if (now === i[e + 1] && sampleMs * 1000 <= i[e]! && (series !== EwmaSeries.Latency || i[o + S_EWMA_MEAN]! >= 0)) return true;
    // SC load of the seqlock word: a held lock means another writer is
    // updating this slot — drop the sample rather than wait.
    const v = Atomics.load(i, lock);
    if ((v & 0xff) !== 0) return false;
    // CAS acquires the lock and records which row holds it, so the owner can
    // release a lock left behind by a thread that died inside this section.
    if (Atomics.compareExchange(i, lock, v, v | (row + 1)) !== v) return false;
    const dt = elapsedMs(now, Atomics.load(i, e + 1));
    let w = dt > 0 ? this.decay.factor(dt) : 1;
    // The request latency's plain mean, or its prior negated before the
    // slot's first sample (see reset).
    const m = o + S_EWMA_MEAN;
    const prior = series === EwmaSeries.Latency ? Atomics.load(i, m) : 0;
    // The cold start (see the file comment): the first sample replaces the
    // prior in the PeakEWMA as in the mean, whatever Δt; then, while the
    // series is young, a sample weighs at least its share of the series' age.
    if (prior < 0) w = 0;
    else if (series === EwmaSeries.Latency && dt > 0) {
      // Until the series is τ old, a sample weighs what it would in a mean
      // over the series' age (the first sample counting 1 ms), when that is
      // more than e^(−Δt/τ) gives it: a shorter τ while the estimates hold
      // little evidence, so the samples of a caller still warming up wash
      // out in fractions of a second instead of τ · ln(their excess). Once
      // τ old the word is cleared: one load. Inline, not a helper: a double
      // returned from a call that is not inlined would be boxed.
      const since = Atomics.load(i, o + S_EWMA_SINCE);
      if (since >= 0) {
        const age = elapsedMs(now, since);
        if (age >= this.decay.tauMs) Atomics.store(i, o + S_EWMA_SINCE, -1);
        else {
          const young = (age - dt + 1) / (age + 1);
          if (young < w) w = young;
        }
      }
    }
    const next = peakEwmaNext(Atomics.load(i, e) / 1000, w, sampleMs);
    const us = Math.round(next * 1000);
    // Stores inside the lock; the unlocking store (new version, low byte 0)
    // is SC, so a reader that sees it also sees both words.
    // biome-ignore lint/complexity/useMathMinMax: hot path; a compare keeps the value a small integer (docs/internals.md, numbers that do not allocate)
    Atomics.store(i, e, us > MAX_US ? MAX_US : us);
    if (dt > 0) Atomics.store(i, e + 1, now);
    if (series === EwmaSeries.Latency) {
      // The latency's plain EWMA moves at the same instants (dt = 0 is
      // w = 1: no change), inside the same lock, with the same weight; its
      // timestamp is the latency's. Until the slot's first sample it holds
      // the initial estimate negated (a prior, see reset): the first sample
      // replaces it whatever dt, and starts the series' age.
      if (prior < 0 || dt > 0) {
        // ewmaNext in µs, written out: no second factor lookup and no double crossing a call.
        const mean = prior < 0 ? Math.round(sampleMs * 1000) | 0 : Math.round(prior * w + sampleMs * 1000 * (1 - w)) | 0;
        // biome-ignore lint/complexity/useMathMinMax: as above, a compare keeps a small integer
        Atomics.store(i, m, mean > MAX_US ? MAX_US : mean);
        Atomics.store(i, m + 1, now);
        if (prior < 0) Atomics.store(i, o + S_EWMA_SINCE, now);
      }
    }
    Atomics.store(i, lock, (v + 0x100) & ~0xff);
    return true;
  }

  /** Owner: both estimates of a slot back to the table's initial value, updated at `nowMs` (the slot is Free or Closing). */
  reset(slot: number, nowMs: number): void {
    const i = this.i32;
    const o = this.slotBase + slot * SLOT_WORDS;
    const at = wrapMs(nowMs);
    const init = Atomics.load(i, H_INITIAL_US);
    // No router takes samples on a Free or Closing slot; the stores are
    // visible before the tag that admits the next occupant (SC).
    for (let k = 0; k < 2; k++) {
      Atomics.store(i, o + S_EWMA + 2 * k, init);
      Atomics.store(i, o + S_EWMA + 2 * k + 1, at);
    }
    // The mean starts as a prior, stored negated: read as the initial
    // estimate (undecayed) until the first sample replaces it; negative, it
    // also tells p2c:latency's cost the slot is unmeasured (probed). A
    // blend from 50 ms would keep every backend within a tail-rule ratio of
    // every other for seconds (τ · ln(50 / 3 ms) ≈ 2.8 s at τ = 1 s), the
    // slow one included: bench:http's slow backend took 7 % of those
    // seconds' requests.
    Atomics.store(i, o + S_EWMA_MEAN, -init);
    Atomics.store(i, o + S_EWMA_MEAN + 1, at);
    Atomics.store(i, o + S_EWMA_SINCE, -1);
  }

  /** Owner, reclaiming a dead thread's row: releases every PeakEWMA lock it died holding. */
  unlockRow(row: number): void {
    const i = this.i32;
    for (let s = 0; s < this.layout.capacity; s++) {
      const p = this.slotBase + s * SLOT_WORDS + S_EWMA_LOCK;
      const v = Atomics.load(i, p);
      // Only the dead row's id in the low byte is released; a CAS so a live
      // writer's lock is never touched.
      if ((v & 0xff) === row + 1) Atomics.compareExchange(i, p, v, (v + 0x100) & ~0xff);
    }
  }
}
