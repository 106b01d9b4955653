/**
 * FlowController: a concurrency limit with band holdback.
 *
 * Saturation is the fraction of `capacity` held by admitted permits. As in
 * the holdback seed, a band (a rank: larger = more important) is held back
 * while saturation exceeds its ceiling (from {@link holdbackCeilings}): a
 * request of band b is admitted when saturation ≤ ceiling(b) and a permit is
 * free; otherwise it waits in b's FIFO queue. So every band flows on an idle
 * pool, even one whose ceiling is 0. When a permit is released, queues are
 * served most important band first. So as the pool fills, the lowest band is
 * held back first and the highest keeps flowing up to `maxCeiling` (default:
 * the whole capacity) — the holdback policy of the flow-control seed, applied to
 * connection or request admission in front of a Router.
 */
import { PoiseError, invalidConfig, checkOptionKeys } from '../core/errors.js';
import { holdbackCeilings, holdbackLimit, type HoldbackOptions } from './holdback.js';
import { integerIn, finiteNumber } from '../core/validate.js';

/** Options of {@link FlowController}. */
export interface FlowControllerOptions extends HoldbackOptions {
  /** Permits available at saturation 1: a positive integer. */
  capacity: number;
  /** The bands, each a rank, any order; a larger rank is more important. */
  bands: readonly number[];
  /** Waiters per band before `acquire` rejects with `Overloaded`; default 1024. */
  maxQueue?: number;
}

/** An admission; `release()` returns its capacity exactly once. */
export interface Permit {
  /** The band it was admitted in. */
  readonly band: number;
  release(): void;
}

interface Waiter {
  resolve: (permit: Permit) => void;
  reject: (err: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

interface Lane {
  rank: number;
  ceiling: number;
  /** Admit while held < limit = min(capacity, floor(ceiling × capacity) + 1). */
  limit: number;
  queue: Waiter[];
}

/**
 * @example
 * const flow = new FlowController({ capacity: 64, bands: [2, 1, 0], minCeiling: 0.5 });
 * const permit = await flow.acquire(0);   // batch traffic: held back above 50 % saturation
 * try { await work(); } finally { permit.release(); }
 */
export class FlowController {
  readonly capacity: number;
  private readonly lanes: Lane[];
  private readonly byRank = new Map<number, Lane>();
  private readonly maxQueue: number;
  private held = 0;
  private closed = false;

  /** Throws `InvalidConfig` naming a bad option. */
  constructor(opts: FlowControllerOptions) {
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, ['capacity', 'bands', 'maxQueue', 'shape', 'domain', 'minCeiling', 'maxCeiling']);
    const { capacity, bands, maxQueue = 1024 } = opts;
    integerIn(capacity, 'options.capacity', 1);
    integerIn(maxQueue, 'options.maxQueue', 0);
    if (!Array.isArray(bands) || bands.length === 0) {
      invalidConfig('options.bands', 'must be a non-empty array of band ranks (numbers)', bands);
    }
    for (let i = 0; i < bands.length; i++) finiteNumber(bands[i], `options.bands[${i}]`);
    const sorted = [...bands].sort((a, b) => b - a);
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i] === sorted[i - 1]) invalidConfig('options.bands', `must not repeat ${sorted[i]}`);
    }
    const ceilings = holdbackCeilings(sorted, {
      shape: opts.shape,
      domain: opts.domain,
      minCeiling: opts.minCeiling,
      maxCeiling: opts.maxCeiling,
    });
    this.capacity = capacity;
    this.maxQueue = maxQueue;
    this.lanes = sorted.map((rank, i) => {
      const ceiling = ceilings[i]!;
      return { rank, ceiling, limit: holdbackLimit(ceiling, capacity), queue: [] };
    });
    for (const lane of this.lanes) this.byRank.set(lane.rank, lane);
  }

  /** Current saturation: held permits / capacity. */
  get saturation(): number {
    return this.held / this.capacity;
  }

  /** Permits currently held. */
  get inUse(): number {
    return this.held;
  }

  /** Each band's ceiling, most important first. */
  ceilings(): { band: number; ceiling: number; limit: number; queued: number }[] {
    return this.lanes.map((l) => ({ band: l.rank, ceiling: l.ceiling, limit: l.limit, queued: l.queue.length }));
  }

  /** A permit now, or undefined when `band` is held back (nothing is queued). */
  tryAcquire(band: number): Permit | undefined {
    const lane = this.lane(band);
    if (this.closed || !this.admissible(lane)) return undefined;
    return this.grant(lane);
  }

  /**
   * Resolves with a permit once `band` is admissible. Rejects with
   * `Overloaded` when its queue is full or the controller is closed, and with
   * the signal's reason when `signal` aborts first.
   */
  acquire(band: number, opts: { signal?: AbortSignal } = {}): Promise<Permit> {
    const lane = this.lane(band);
    if (this.closed) return Promise.reject(new PoiseError('Overloaded', 'flow controller is closed'));
    if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);
    if (this.admissible(lane)) return Promise.resolve(this.grant(lane));
    if (lane.queue.length >= this.maxQueue) {
      return Promise.reject(new PoiseError('Overloaded', `band ${band}: queue full (${this.maxQueue} waiting)`));
    }
    return new Promise<Permit>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, signal: opts.signal, onAbort: undefined };
      if (opts.signal !== undefined) {
        const signal = opts.signal;
        waiter.onAbort = () => {
          const at = lane.queue.indexOf(waiter);
          if (at >= 0) lane.queue.splice(at, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      lane.queue.push(waiter);
    });
  }

  /** Rejects every waiter with `Overloaded` and refuses new requests. Held permits may still be released. */
  close(): void {
    this.closed = true;
    for (const lane of this.lanes) {
      for (const w of lane.queue.splice(0)) {
        if (w.onAbort !== undefined) w.signal?.removeEventListener('abort', w.onAbort);
        w.reject(new PoiseError('Overloaded', 'flow controller is closed'));
      }
    }
  }

  private lane(band: number): Lane {
    const lane = this.byRank.get(band);
    if (lane === undefined) {
      invalidConfig('band', `must be one of the configured bands (${this.lanes.map((l) => l.rank).join(', ')})`, band);
    }
    return lane;
  }

  /** Admissible when it fits under its ceiling and no more important lane is waiting. */
  private admissible(lane: Lane): boolean {
    if (this.held >= lane.limit) return false;
    for (const other of this.lanes) {
      if (other === lane) return true;
      if (other.queue.length > 0) return false;
    }
    return true;
  }

  private grant(lane: Lane): Permit {
    this.held++;
    let open = true;
    return {
      band: lane.rank,
      release: () => {
        if (!open) return;
        open = false;
        this.held--;
        this.dispatch();
      },
    };
  }

  /** Serves waiters, most important lane first, while they fit under their ceilings. */
  private dispatch(): void {
    for (const lane of this.lanes) {
      while (lane.queue.length > 0 && this.held < lane.limit) {
        const w = lane.queue.shift()!;
        if (w.onAbort !== undefined) w.signal?.removeEventListener('abort', w.onAbort);
        w.resolve(this.grant(lane));
      }
      // A lane that still waits blocks the less important ones (their ceilings are lower).
      if (lane.queue.length > 0) return;
    }
  }
}
