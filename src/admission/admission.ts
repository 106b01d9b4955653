/**
 * AdmissionGate: band holdback on the saturation of the whole pool.
 *
 * Saturation is read from the shared LoadTable, so every worker's gate sees
 * the same figure: the pool's leases of one kind (in-flight requests,
 * connections, or both) over its capacity — Σ `maxInflight` of the eligible
 * backends (recomputed when the view's epoch moves, not per request), or an
 * explicit `capacity` — or whatever a custom `saturation()` returns. No
 * eligible backend reads as saturation 1.
 *
 * A request of band b (a rank: larger = more important) is admitted while
 * saturation ≤ ceiling(b) and the pool is not full (so every band flows on an
 * idle pool); otherwise it waits in b's FIFO queue. When capacity frees, the
 * highest band is served first; an empty band never blocks a lower one.
 *
 * Across threads the gates of one table act as one queue per band: every
 * waiter takes a ticket from the table, each gate publishes its oldest
 * waiter per band, and a gate admits its head only when no thread holds a
 * waiter of a more important band or an older one of the same band
 * (load/admission-region.ts). A release in any thread wakes the waiting gates
 * through `Atomics.notify` — one plain load on the release path when nobody
 * waits — so the oldest waiter anywhere is served next, not the one whose
 * thread happened to free the capacity; a poll of `pollMs` remains only as
 * the fallback (docs/admission.md).
 */
import { PoiseError, invalidConfig } from '../core/errors.js';
import { realTimers, type TimerSource } from '../core/timers.js';
import { readAsyncOptions, type AcquireAsyncOptions, type AcquireOptions, type AsyncRequest } from '../runtime/acquire-options.js';
import type { AdmissionHook } from '../runtime/admission-hook.js';
import type { Lease } from '../runtime/lease.js';
import type { PoolGauge, RowAdmission } from '../runtime/pool-gauge.js';
import type { Router } from '../runtime/router.js';
import { readGateOptions, type AdmissionGateOptions, type AdmissionLoadKind } from './gate-options.js';
import { freshRejected, reasonOf, type AdmissionRejection, type AdmissionStats } from './gate-stats.js';
import { holdbackLimit } from './holdback.js';

export type { AdmissionGateOptions, AdmissionLoadKind } from './gate-options.js';
export { sumAdmissionStats, type AdmissionBandStats, type AdmissionRejection, type AdmissionStats } from './gate-stats.js';

interface Waiter {
  band: Band;
  /** Its ticket in the table's queue of its band (admission-region.ts). */
  ticket: number;
  opts: AcquireOptions | undefined;
  resolve: (lease: Lease) => void;
  reject: (err: unknown) => void;
  at: number;
  timer: unknown;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  done: boolean;
}

interface Band {
  /** Position in the gate's bands, most important first: the band index of the table's queue. */
  index: number;
  /** The band's rank, as configured (larger = more important). */
  rank: number;
  ceiling: number;
  /** Admit while load < limit = min(capacity, floor(ceiling × capacity) + 1) (capacity mode). */
  limit: number;
  queue: (Waiter | undefined)[];
  head: number;
  live: number;
  admitted: number;
  admittedAfterWait: number;
  rejected: Record<AdmissionRejection, number>;
}
/**
 * Per-worker admission in front of a Router, against the pool's global
 * saturation. Constructing it attaches it to the router, so
 * `router.acquireAsync()` goes through it.
 *
 * @example
 * const gate = new AdmissionGate(router, { bands: [10, 5, 1], minCeiling: 0.5 });
 * const lease = await router.acquireAsync({ band: 1 }); // batch: held back above 50 %
 * try { await work(lease); lease.release('success'); } catch { lease.release('failure'); }
 */
export class AdmissionGate implements AdmissionHook {
  /** The router this gate admits for. */
  readonly router: Router;
  /** The load this gate reads. */
  readonly kind: AdmissionLoadKind;
  /** What the gate reads of the router's pool (capacity, load, the release signal). */
  private readonly gauge: PoolGauge;
  /** The table's queue across threads, as this router's row sees it. */
  private readonly queue: RowAdmission;
  private readonly bands: Band[];
  private readonly byRank = new Map<number, Band>();
  private readonly defaultBand: Band;
  private readonly maxQueue: number;
  private readonly timeoutMs: number;
  private readonly pollMs: number;
  private readonly fixedCapacity: number | undefined;
  private readonly saturationFn: (() => number) | undefined;
  private readonly clock: () => number;
  private readonly timers: TimerSource;
  private closed = false;
  private waiting = 0;
  private limitsFor = -1;
  /** A wake-up wait on the table's generation is pending. */
  private armed = false;
  private scheduled = false;
  private readonly onWake = (): void => {
    this.armed = false;
    this.dispatch();
  };
  private readonly onReleased = (): void => {
    this.scheduled = false;
    this.dispatch();
  };

  /**
   * Throws one `InvalidConfig` naming every bad option (gate-options.ts);
   * then the gate attaches from outside — the router's one-method seam
   * (`attachAdmission`) and the gauge's release and close signals.
   */
  constructor(router: Router, opts: AdmissionGateOptions) {
    if (typeof router !== 'object' || router === null || typeof router.attachAdmission !== 'function' || router.gauge === undefined) {
      invalidConfig('router', 'must be a Router', router);
    }
    const { sorted, ceilings } = readGateOptions(opts);
    const o = opts;
    this.router = router;
    this.gauge = router.gauge;
    this.queue = router.gauge.queue;
    this.kind = o.kind ?? router.gauge.kind;
    this.maxQueue = o.maxQueue ?? 1024;
    this.timeoutMs = o.timeoutMs ?? 60_000;
    this.pollMs = o.pollMs ?? 20;
    this.fixedCapacity = o.capacity;
    this.saturationFn = o.saturation;
    this.timers = o.timers ?? realTimers;
    const timers = this.timers;
    this.clock = o.clock ?? (() => timers.now());
    this.bands = sorted.map((rank, i) => ({
      index: i,
      rank,
      ceiling: ceilings[i]!,
      limit: 0,
      queue: [],
      head: 0,
      live: 0,
      admitted: 0,
      admittedAfterWait: 0,
      rejected: freshRejected(),
    }));
    for (const band of this.bands) this.byRank.set(band.rank, band);
    this.defaultBand = this.byRank.get(o.defaultBand ?? sorted[0]!)!;
    router.attachAdmission(this);
    router.gauge.onRelease(() => this.released());
    router.gauge.onClose(() => this.routerClosed());
  }

  /** Each band's ceiling, most important first. */
  ceilings(): { band: number; ceiling: number }[] {
    return this.bands.map((b) => ({ band: b.rank, ceiling: b.ceiling }));
  }

  /**
   * Admits a request of `band` (now, or after waiting in its FIFO queue)
   * and takes the lease; `priority` is the failover tier, as in
   * `router.acquire`. Rejects with `QueueFull`, `QueueTimeout`, `Cancelled`,
   * `Closed`, `NoEligibleCandidates` or the acquire's own error;
   * `InvalidConfig` for bad options (an object `priority`, the pre-1.0
   * admission form, names `band`). `router.acquireAsync(opts)` calls this.
   */
  acquireAsync(opts?: AcquireAsyncOptions): Promise<Lease> {
    let req: AsyncRequest<Band>;
    try {
      // The one reader of acquireAsync's options (runtime/acquire-options.ts), the gateless path's too.
      req = readAsyncOptions(opts, this.bandOf);
    } catch (err) {
      return Promise.reject(err);
    }
    const band = req.band ?? this.defaultBand;
    const acquireOpts = req.acquire;
    const signal = req.signal;
    const timeoutMs = req.timeoutMs ?? this.timeoutMs;
    if (this.closed)
      return Promise.reject(this.reject(band, 'Closed', new PoiseError('Closed', 'acquireAsync: the admission gate is closed')));
    if (signal?.aborted) return Promise.reject(this.reject(band, 'Cancelled', cancelled(signal)));
    try {
      const lease = this.atOnce(band, acquireOpts);
      if (lease !== undefined) return Promise.resolve(lease);
    } catch (err) {
      return Promise.reject(err);
    }
    if (band.live >= this.maxQueue) {
      return Promise.reject(
        this.reject(
          band,
          'QueueFull',
          new PoiseError('QueueFull', `acquireAsync: band ${band.rank} already holds ${this.maxQueue} waiters (options.maxQueue)`),
        ),
      );
    }
    return new Promise<Lease>((resolve, reject) => {
      const w: Waiter = {
        band,
        ticket: this.queue.takeTicket(band.index),
        opts: acquireOpts,
        resolve,
        reject,
        at: this.clock(),
        timer: undefined,
        signal,
        onAbort: undefined,
        done: false,
      };
      w.timer = this.timers.setTimeout(() => {
        if (this.finish(w)) {
          reject(
            this.reject(
              band,
              'QueueTimeout',
              new PoiseError('QueueTimeout', `acquireAsync: band ${band.rank} waited ${timeoutMs} ms for capacity`),
            ),
          );
        }
      }, timeoutMs);
      if (signal !== undefined) {
        w.onAbort = () => {
          if (this.finish(w)) reject(this.reject(band, 'Cancelled', cancelled(signal)));
        };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
      band.queue.push(w);
      band.live++;
      if (band.live === 1) this.queue.setOldest(band.index, w.ticket);
      if (this.waiting++ === 0) this.queue.setCounted(true);
      this.arm();
    });
  }

  /**
   * The at-once half of {@link acquireAsync}, for a caller that cannot wait
   * (a grpc-js pick is synchronous): the lease when a request of `band`
   * (a rank; undefined = the default band) is admitted now, undefined when
   * it would have to wait — then it calls `acquireAsync`, which queues it.
   * Throws what `acquireAsync` would reject with at once (`Closed`, the
   * acquire's own error; `InvalidConfig` for a band the gate has not).
   * Allocates nothing. @internal
   */
  admitNow(band: number | undefined, opts: AcquireOptions | undefined): Lease | undefined {
    const b = band === undefined ? this.defaultBand : this.bandOf(band);
    if (this.closed) throw this.reject(b, 'Closed', new PoiseError('Closed', 'acquireAsync: the admission gate is closed'));
    return this.atOnce(b, opts);
  }

  /** Admits now when nobody of `band` or above waits anywhere and the band's ceiling allows: the lease, else undefined. */
  private atOnce(band: Band, acquireOpts: AcquireOptions | undefined): Lease | undefined {
    if (!this.waitingFrom(band) && this.queue.nobodyWaitsFor(band.index) && this.admissible(band)) {
      try {
        const lease = this.router.acquire(acquireOpts);
        band.admitted++;
        return lease;
      } catch (err) {
        // Admitted on a figure another thread made stale (it took the last
        // unit first): wait for capacity like everyone else.
        if (!this.lostRace(err, acquireOpts)) throw this.reject(band, reasonOf(err), err);
      }
    }
    return undefined;
  }

  /** The band of rank `rank`, or `InvalidConfig` naming the gate's bands. */
  private readonly bandOf = (rank: unknown): Band => {
    const b = this.byRank.get(rank as number);
    if (b === undefined) {
      invalidConfig('acquireAsync(options).band', `must be one of the gate's bands (${this.bands.map((x) => x.rank).join(', ')})`, rank);
    }
    return b;
  };

  /** A lease of the router was released (the gauge's signal): serve the queues in a microtask, never inside the release. */
  private released(): void {
    if (this.waiting > 0 && !this.scheduled) {
      this.scheduled = true;
      queueMicrotask(this.onReleased);
    }
  }

  /** The router was closed: same as {@link close}. Called on the router's gauge's close signal. */
  routerClosed(): void {
    this.close();
  }

  /** Rejects every waiter with `Closed`, stops the timer and refuses new requests. Admitted leases stay valid. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const band of this.bands) {
      for (const w of band.queue.slice(band.head)) {
        if (w !== undefined && this.finish(w))
          w.reject(
            this.reject(band, 'Closed', new PoiseError('Closed', 'acquireAsync: the admission gate was closed while the request waited')),
          );
      }
      band.queue = [];
      band.head = 0;
    }
  }

  /** Saturation now: the pool's load over its capacity (1 with no eligible capacity), or the custom figure. */
  saturation(): number {
    if (this.gauge.capacity() === 0) return 1;
    if (this.saturationFn !== undefined) return this.customSaturation();
    const cap = this.capacity();
    return cap === Number.POSITIVE_INFINITY ? 0 : this.gauge.load(this.kind) / cap;
  }

  /** Plain numbers for a metrics collector: saturation, capacity, load, and per band queue length, oldest wait, admitted, rejected by reason. */
  admissionStats(): AdmissionStats {
    const now = this.clock();
    return {
      saturation: this.saturation(),
      capacity: this.saturationFn !== undefined ? Number.NaN : this.capacity(),
      load: this.gauge.load(this.kind),
      waiting: this.waiting,
      bands: this.bands.map((b) => {
        const oldest = this.headOf(b);
        return {
          band: b.rank,
          ceiling: b.ceiling,
          queued: b.live,
          oldestWaitMs: oldest === undefined ? 0 : Math.max(0, now - oldest.at),
          admitted: b.admitted,
          admittedAfterWait: b.admittedAfterWait,
          rejected: { ...b.rejected },
        };
      }),
    };
  }

  // --- internals -----------------------------------------------------------------

  private capacity(): number {
    const eligible = this.gauge.capacity();
    return this.fixedCapacity === undefined || eligible === 0 ? eligible : this.fixedCapacity;
  }

  private customSaturation(): number {
    const s = this.saturationFn!();
    if (typeof s !== 'number' || Number.isNaN(s)) return 1;
    return Math.max(0, s);
  }

  /** Is `band` admissible now: saturation ≤ its ceiling and the pool not full. */
  private admissible(band: Band): boolean {
    const eligible = this.gauge.capacity();
    if (eligible === 0) return false;
    if (this.saturationFn !== undefined) {
      const s = this.customSaturation();
      return s < 1 && s <= band.ceiling + 1e-12;
    }
    const cap = this.fixedCapacity ?? eligible;
    if (cap === Number.POSITIVE_INFINITY) return true;
    if (cap !== this.limitsFor) {
      for (const b of this.bands) b.limit = holdbackLimit(b.ceiling, cap);
      this.limitsFor = cap;
    }
    return this.gauge.load(this.kind) < band.limit;
  }

  /**
   * After an admission the acquire found every backend full: another thread
   * took the last units first (the two reads are not one instant). For a
   * request free to use any backend, a refusal while the pool has finite
   * capacity can only mean that; a request restricted by `exclude`, a
   * failover tier or a database intent is a lost race only when the pool now reads full.
   */
  private lostRace(err: unknown, opts: AcquireOptions | undefined): boolean {
    if (!(err instanceof PoiseError) || (err.code !== 'NoEligibleCandidates' && err.code !== 'Empty')) return false;
    const eligible = this.gauge.capacity();
    if (eligible === 0) return true;
    if (opts === undefined || (opts.exclude === undefined && opts.priority === undefined && opts.intent === undefined)) {
      return eligible !== Number.POSITIVE_INFINITY;
    }
    return this.saturation() >= 1;
  }

  /** Does `band` or a more important one have waiters? (A new arrival must not pass them.) */
  private waitingFrom(band: Band): boolean {
    if (this.waiting === 0) return false;
    for (const b of this.bands) {
      if (b.live > 0) return true;
      if (b === band) return false;
    }
    return false;
  }

  /**
   * Serves waiters, most important band first, while each fits under its
   * ceiling and is the oldest waiter of its band in every thread (and no
   * thread waits in a more important band). What stops it waits for the next
   * release anywhere (or the poll fallback).
   */
  private dispatch(): void {
    if (this.closed) return;
    // Read before any check: a release after this read wakes the wait armed below at once.
    const generation = this.queue.generation();
    let admitted = 0;
    for (const band of this.bands) {
      while (band.live > 0) {
        // Ceilings never rise towards less important bands, so a band that
        // does not fit means none below fits either: stop.
        if (!this.admissible(band)) {
          this.arm(generation);
          return;
        }
        const w = this.headOf(band)!;
        // Not this thread's turn: an older waiter of this band, or one of a
        // more important band, waits in another thread, which the same
        // release woke. Nothing below this band may go ahead of it either.
        if (!this.queue.mayAdmit(band.index, w.ticket)) {
          this.arm(generation);
          return;
        }
        let lease: Lease;
        try {
          lease = this.router.acquire(w.opts);
        } catch (err) {
          if (this.lostRace(err, w.opts)) {
            this.arm(generation);
            return;
          }
          if (this.finish(w)) w.reject(this.reject(band, reasonOf(err), err));
          continue;
        }
        this.finish(w);
        band.admitted++;
        band.admittedAfterWait++;
        admitted++;
        w.resolve(lease);
      }
    }
    // Capacity left over after this gate's queues emptied: the next oldest
    // waiter may be in another thread, which waits for a release that may not
    // come. Wake it.
    if (admitted > 0) this.queue.wake();
  }

  /** The oldest live waiter of `band` (drops finished ones from the front). */
  private headOf(band: Band): Waiter | undefined {
    const q = band.queue;
    while (band.head < q.length) {
      const w = q[band.head];
      if (w !== undefined && !w.done) return w;
      q[band.head++] = undefined;
    }
    return undefined;
  }

  /** Takes `w` out of its queue (once): clears its timer and listener; false when already finished. */
  private finish(w: Waiter): boolean {
    if (w.done) return false;
    w.done = true;
    if (w.timer !== undefined) this.timers.clearTimeout(w.timer);
    if (w.onAbort !== undefined) w.signal?.removeEventListener('abort', w.onAbort);
    const band = w.band;
    band.live--;
    this.waiting--;
    // Compact the front of the queue once it is mostly finished entries.
    if (band.live === 0) {
      band.queue.length = 0;
      band.head = 0;
    } else if (band.head > 1024 && band.head * 2 > band.queue.length) {
      band.queue.splice(0, band.head);
      band.head = 0;
    }
    // The band's oldest waiter as every thread sees it.
    this.queue.setOldest(band.index, this.headOf(band)?.ticket);
    if (this.waiting === 0) this.queue.setCounted(false);
    return true;
  }

  private reject(band: Band, reason: AdmissionRejection, err: unknown): unknown {
    band.rejected[reason]++;
    return err;
  }

  /**
   * While something waits, one wait on the table's generation is pending:
   * a release in any thread moves it (and notifies); `pollMs` bounds the wait
   * for a wake-up the hint could miss. `seen` is the generation read before
   * the checks that found nothing to admit, so no release is lost between.
   */
  private arm(seen = this.queue.generation()): void {
    if (this.armed || this.waiting === 0 || this.closed) return;
    this.armed = true;
    void this.queue.waitForRelease(seen, this.pollMs).then(this.onWake);
  }
}

function cancelled(signal: AbortSignal): PoiseError {
  return new PoiseError('Cancelled', 'acquireAsync: the signal was aborted', { cause: signal.reason });
}
