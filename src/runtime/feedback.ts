/**
 * Feedback: everything written after a pick. A lease records its own
 * outcome here (tower's completion handle): the code that chose — the
 * Router and its policy — never writes feedback.
 *
 * On release it writes, in this order, the samples (PeakEWMA; a failure's
 * sample is a penalty, {@link FAILURE_PENALTY_FACTOR}), the
 * passive-health words (a success clears the consecutive failures; a
 * failure counts one and, at the threshold, ejects the backend with backoff
 * and jitter), the outlier detector's interval counts (batched per
 * candidate like the picks, flushed every 64 and at least once a second),
 * and last the lease counters; then it signals waiting admission gates and
 * the router's pool gauge. Health first, load
 * last: while the lease is still counted the owner cannot reuse the slot (it
 * reuses a tombstone only once its counters read zero after closing it), so
 * every health write lands on the lease's own backend — returning the load
 * first would let the slot's next occupant inherit this backend's sample,
 * failure or ejection.
 *
 * Also here: a connect-time sample on an open lease (`Lease.connected`),
 * request turns counted on a connection lease (`Lease.beginRequest` /
 * `endRequest`, what the proxy does per request–reply turn), and the
 * backend's own load report read from a response (`Lease.reportLoad`).
 */
import type { Backoff } from '../core/backoff.js';
import { invalidConfig } from '../core/errors.js';
import { EwmaSeries } from '../load/ewma-region.js';
import { LeaseKind } from '../load/leases.js';
import type { LoadTable } from '../load/load-table.js';
import { tagGeneration } from '../load/slot-tags.js';
import type { Logger } from '../log.js';
import type { ResolvedEjection } from './health.js';
import type { Outcome } from './lease.js';
import type { LeaseBook } from './lease-book.js';
import { flushStats } from './candidate-view.js';
import type { PoolGauge } from './pool-gauge.js';
import type { SlotCandidate } from './slot-candidate.js';

/** Outcomes a candidate batches before one shared add (as its picks). */
const STATS_BATCH = 64;

/**
 * What a failure weighs in the latency estimates: its sample is this many
 * times the backend's current mean (never less than the failure's own
 * latency), so a backend that fails fast cannot look fast. With a factor F a
 * backend failing a share p of its requests settles at (1 − p) / (1 − pF)
 * times its true mean, and grows without bound from p = 1 / F (the penalty
 * blends in at the same weight as a success, whatever the request rate).
 * Measured in test/runtime/fast-fail-share.test.ts; docs/policies.md.
 */
export const FAILURE_PENALTY_FACTOR = 2;

function checkSample(value: unknown, field: string): void {
  if (typeof value !== 'number' || !(value >= 0) || value === Number.POSITIVE_INFINITY) {
    invalidConfig(field, 'must be a finite number >= 0 (milliseconds)', value);
  }
}

/** The feedback writer of one router (its thread only). */
export class Feedback {
  private readonly table: LoadTable;
  private readonly row: number;
  private readonly book: LeaseBook;
  private readonly gauge: PoolGauge;
  private readonly now: () => number;
  private readonly ejection: ResolvedEjection;
  private readonly backoff: Backoff;
  private readonly log: Logger;
  /**
   * Whether this router's request releases feed the latency histogram (set
   * by an HTTP dispatcher with the adaptive hedge delay, the one reader):
   * off, a release skips its two shared adds and the bucket's log2 — in
   * bench:thread-scaling they made every request release 1.3–1.5× slower.
   * @internal
   */
  recordsLatencies = false;

  /** @internal Built by the Router, with its row, book, gauge and clock. */
  constructor(
    table: LoadTable,
    row: number,
    book: LeaseBook,
    gauge: PoolGauge,
    now: () => number,
    ejection: ResolvedEjection,
    backoff: Backoff,
    log: Logger,
  ) {
    this.table = table;
    this.row = row;
    this.book = book;
    this.gauge = gauge;
    this.now = now;
    this.ejection = ejection;
    this.backoff = backoff;
    this.log = log;
  }

  /**
   * Returns the lease of `handle` with its outcome and samples; false when
   * the handle was already released (or is not this router's). Throws
   * `InvalidConfig` for an unknown outcome or a bad sample (the lease then
   * stays open).
   */
  release(handle: number, outcome: Outcome, latencyMs?: number, connectMs?: number): boolean {
    if (outcome !== 'success' && outcome !== 'failure' && outcome !== 'overload' && outcome !== 'cancelled') {
      invalidConfig('release(outcome)', 'must be one of "success", "failure", "overload", "cancelled"', outcome);
    }
    if (latencyMs !== undefined) checkSample(latencyMs, 'release(options).latencyMs');
    if (connectMs !== undefined) checkSample(connectMs, 'release(options).connectMs');
    const book = this.book;
    const i = book.find(handle);
    if (i < 0) return false;
    const cand = book.candidateOf(i);
    const kind = book.kindOf(i);
    book.close(i);
    const t = this.table;
    const slot = cand.slot;
    // The open lease pins the slot's generation (file comment), so this plain
    // read only confirms it; it guards the health writes all the same.
    if (tagGeneration(t.tags.tagHint(slot)) === cand.generation) {
      const h = t.health;
      if (outcome === 'success') {
        if (latencyMs !== undefined || connectMs !== undefined) {
          const now = this.now();
          if (latencyMs !== undefined) {
            t.ewma.observe(slot, kind === LeaseKind.Connection ? EwmaSeries.ConnectTime : EwmaSeries.Latency, latencyMs, now, this.row);
            // The request latency's histogram: the hedge delay's quantile (load/latency-histogram.ts).
            if (kind === LeaseKind.Request && this.recordsLatencies) t.latencies.record(slot, latencyMs);
          }
          if (connectMs !== undefined) t.ewma.observe(slot, EwmaSeries.ConnectTime, connectMs, now, this.row);
        }
        h.clearFailures(slot);
        // Batched with the router's picks (one shared add per 64, and the timer).
        if (cand.retired) h.countOutcomes(slot, 1, 0);
        else if (++cand.unflushedOk === STATS_BATCH) flushStats(t, cand);
      } else if (outcome === 'failure') {
        const series = kind === LeaseKind.Connection ? EwmaSeries.ConnectTime : EwmaSeries.Latency;
        const now = this.now();
        t.ewma.observe(slot, series, this.penaltyMs(slot, series, latencyMs ?? 0, now, h.failures(slot) === 0), now, this.row);
        if (cand.retired) h.countOutcomes(slot, 0, 1);
        else if (++cand.unflushedFail === STATS_BATCH) flushStats(t, cand);
        if (h.addFailure(slot) === this.ejection.consecutiveFailures) this.eject(cand);
      }
    }
    t.leases.down(slot, kind, this.row);
    // Gates waiting in any thread learn of the freed capacity (one plain load when none waits).
    t.admission.released();
    this.gauge.released();
    return true;
  }

  /**
   * A failure's latency sample (ms): {@link FAILURE_PENALTY_FACTOR} times the
   * backend's mean — the request latency's plain EWMA (the tail rule's
   * figure; the initial estimate before the first sample), or for a
   * connection lease its connect time's estimate — decayed to `now`, and
   * never below the failure's own `latencyMs`. Two plain loads and numbers
   * (no allocation).
   *
   * The connect-time series is a peak estimate (a higher sample replaces
   * it), so its own estimate times the factor would double it at every
   * consecutive failure (2^k, up to the ceiling, and τ·ln 2^k to come back):
   * there only the first failure of a run (`first`) doubles it, and later
   * ones hold it (a sample equal to the estimate). The latency series' base
   * is the plain mean, which a penalty moves by one blend, not a replace.
   */
  private penaltyMs(slot: number, series: number, latencyMs: number, now: number, first: boolean): number {
    const e = this.table.ewma;
    const latency = series === EwmaSeries.Latency;
    const baseUs = latency ? e.meanHintUs(slot, now) : e.estimateHintUs(slot, series, now);
    const ms = ((latency || first ? FAILURE_PENALTY_FACTOR : 1) * baseUs) / 1000;
    return Math.max(ms, latencyMs);
  }

  /**
   * Records a connect-time sample on an open lease. It does not clear the
   * backend's failures: a backend that accepts and then resets before
   * answering is failing (Envoy's outlier detection counts it a connection
   * failure), so only {@link answered} or a `'success'` release does.
   */
  connected(handle: number, connectMs: number): void {
    checkSample(connectMs, 'connected(connectMs)');
    const i = this.book.find(handle);
    if (i < 0) return;
    const c = this.book.candidateOf(i);
    if (tagGeneration(this.table.tags.tagHint(c.slot)) !== c.generation) return;
    this.table.ewma.observe(c.slot, EwmaSeries.ConnectTime, connectMs, this.now(), this.row);
  }

  /** The backend of an open lease sent its first byte: it answered, so its consecutive failures are cleared. */
  answered(handle: number): void {
    const i = this.book.find(handle);
    if (i < 0) return;
    const c = this.book.candidateOf(i);
    // The open lease pins the generation (file comment): the clear lands on the lease's own backend.
    if (tagGeneration(this.table.tags.tagHint(c.slot)) === c.generation) this.table.health.clearFailures(c.slot);
  }

  /**
   * Counts one in-flight request on an open lease's backend; false when the
   * handle is not open. The open lease keeps the slot's generation, so the
   * count lands on the lease's own backend.
   */
  requestUp(handle: number): boolean {
    const i = this.book.find(handle);
    if (i < 0) return false;
    this.table.leases.up(this.book.candidateOf(i).slot, LeaseKind.Request, this.row);
    return true;
  }

  /** Returns a count {@link requestUp} took; records `latencyMs` as a request-latency sample when given. */
  requestDown(handle: number, latencyMs: number | undefined): void {
    if (latencyMs !== undefined) checkSample(latencyMs, 'endRequest(latencyMs)');
    const i = this.book.find(handle);
    if (i < 0) return;
    const c = this.book.candidateOf(i);
    // Sample first, count last (the release order): the lease still holds the slot either way.
    if (latencyMs !== undefined && tagGeneration(this.table.tags.tagHint(c.slot)) === c.generation) {
      this.table.ewma.observe(c.slot, EwmaSeries.Latency, latencyMs, this.now(), this.row);
    }
    this.table.leases.down(c.slot, LeaseKind.Request, this.row);
    this.table.admission.released();
    this.gauge.released();
  }

  /**
   * The `q` quantile of an open lease's backend's request latency to
   * headers, ms, from the shared histogram (load/latency-histogram.ts);
   * -1 when the handle is not open or the backend has fewer than
   * `minSamples` samples.
   */
  latencyQuantileMs(handle: number, q: number, minSamples: number): number {
    const i = this.book.find(handle);
    if (i < 0) return -1;
    return this.table.latencies.quantileMs(this.book.candidateOf(i).slot, q, minSamples);
  }

  /**
   * Records an open lease's backend's load report, stamped with this
   * router's clock; false when the handle is not open or another thread was
   * recording the same backend's report at that instant (load/backend-load.ts).
   */
  reportLoad(handle: number, utilization: number, qps: number, eps: number): boolean {
    const i = this.book.find(handle);
    if (i < 0) return false;
    return this.table.reported.report(this.book.candidateOf(i).slot, utilization, qps, eps, this.now());
  }

  /** Records the backend's probe report (in flight, latency µs) read from a response, while `handle` pins its slot. */
  reportProbe(handle: number, inflight: number, latencyUs: number): boolean {
    const i = this.book.find(handle);
    if (i < 0) return false;
    return this.table.probes.record(this.book.candidateOf(i).slot, inflight, latencyUs, this.now(), false);
  }

  /** Ejects `c`'s backend for a backoff with jitter and publishes it (the health epoch); one warning naming it. */
  private eject(c: SlotCandidate): void {
    const t = this.table;
    const now = this.now();
    const ms = this.backoff.delayMs(t.health.ejections(c.slot));
    t.health.eject(c.slot, now + ms);
    t.epochs.bumpHealth();
    this.log.warn(
      { backend: c.id, address: c.spec.address, slot: c.slot, ejectMs: Math.round(ms), failures: this.ejection.consecutiveFailures },
      'poise: backend ejected after consecutive failures',
    );
  }
}
