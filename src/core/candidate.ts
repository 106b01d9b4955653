/**
 * Candidate contracts: what a policy may ask of the members of a slice.
 *
 * A policy reads four things: `id` (identity, for state that must survive a
 * membership change), `weight`, `isEligible()` and `load()` (lower is
 * lighter). Priority and locality policies also read the metadata of
 * {@link Prioritized} and {@link Localized}.
 */
import { PoiseError, describe } from './errors.js';
import { validateWeight } from './weight.js';
import { integerIn } from './validate.js';

/** Administrative and health status of a backend. */
export type Status = 'ready' | 'draining' | 'unavailable';

const STATUSES: readonly Status[] = ['ready', 'draining', 'unavailable'];

/** True when `value` is a {@link Status}. */
export function isStatus(value: unknown): value is Status {
  // A switch rather than STATUSES.includes: policies call this per candidate.
  switch (value) {
    case 'ready':
    case 'draining':
    case 'unavailable':
      return true;
    default:
      return false;
  }
}

/** The least a policy needs from a member of its slice. */
export interface Candidate {
  /** Identity; unique within one slice. */
  readonly id: string;
  /** An integer in [1, 2^32 − 1]. */
  readonly weight: number;
  /** May this member be chosen for ordinary traffic now? */
  isEligible(): boolean;
  /** Current load; lower is lighter. Only load-aware policies call it. */
  load(): number;
}

/** A candidate that also carries a {@link Status}. */
export interface StatusCandidate extends Candidate {
  readonly status: Status;
}

/** A candidate with a failover priority (lower is preferred) and the two extra predicates. */
export interface PriorityCandidate extends Candidate {
  /** Failover priority: an integer in [0, 2^32 − 1]; 0 is tried first; gaps mean nothing. */
  readonly priority: number;
  /** Counts in its priority's configured capacity (the availability denominator). */
  isMember(): boolean;
  /** May use-all panic choose this member? */
  isPanicEligible(): boolean;
}

/** A candidate with a locality and that locality's configured weight. */
export interface LocalityCandidate extends PriorityCandidate {
  readonly locality: string;
  /** The control plane's share for this (priority, locality); every member of the group must agree. */
  readonly localityWeight: number;
}

/** Options of {@link Backend}. */
export interface BackendOptions {
  /** Integer in [1, 2^32 − 1]; default 1. */
  weight?: number;
  /** Default `'ready'`. */
  status?: Status;
  /** Current load (lower is lighter); default a constant 0. */
  load?: () => number;
}

const ZERO_LOAD = (): number => 0;

/**
 * The plain candidate: an id, a weight, a status and an optional load source.
 * Only `'ready'` backends are eligible. `status` may be changed in place; the
 * other fields are fixed at construction.
 *
 * @example
 * const b = new Backend('db-1', { weight: 3, load: () => pool.active });
 */
export class Backend implements StatusCandidate {
  readonly id: string;
  readonly weight: number;
  /** Mutable: set it to drain or restore the backend. */
  status: Status;
  private readonly loadFn: () => number;

  constructor(id: string, opts: BackendOptions = {}) {
    if (typeof id !== 'string' || id.length === 0) {
      throw new PoiseError('InvalidConfig', `id: must be a non-empty string, got ${describe(id)}`, { field: 'id' });
    }
    const status = opts.status ?? 'ready';
    if (!isStatus(status)) {
      throw new PoiseError('InvalidConfig', `status: must be one of ${STATUSES.join(', ')}, got ${describe(status)}`, {
        field: 'status',
      });
    }
    if (opts.load !== undefined && typeof opts.load !== 'function') {
      throw new PoiseError('InvalidConfig', `load: must be a function returning a number, got ${describe(opts.load)}`, { field: 'load' });
    }
    this.id = id;
    this.weight = validateWeight(opts.weight ?? 1, 'weight');
    this.status = status;
    this.loadFn = opts.load ?? ZERO_LOAD;
  }

  isEligible(): boolean {
    return this.status === 'ready';
  }

  load(): number {
    return this.loadFn();
  }
}

/** The largest accepted priority, 2^32 − 1. */
export const MAX_PRIORITY = 0xffff_ffff;

function validatePriority(priority: unknown): number {
  return integerIn(priority, 'priority', 0, MAX_PRIORITY);
}

function statusOf(c: Candidate): Status | undefined {
  const s = (c as Partial<StatusCandidate>).status;
  return isStatus(s) ? s : undefined;
}

/**
 * Wraps any candidate with a failover priority. A draining inner candidate is
 * neither a member of its priority (it leaves the availability denominator)
 * nor panic-eligible; other ineligible members may be revived by use-all
 * panic unless `.withPanicEligibility(false)`.
 *
 * @example
 * const standby = new Prioritized(new Backend('db-standby'), 1).withPanicEligibility(false);
 */
export class Prioritized<C extends Candidate = Candidate> implements PriorityCandidate {
  readonly inner: C;
  readonly priority: number;
  /** False when panic must never revive this member (a circuit breaker, an admission limit). */
  readonly panicEligible: boolean;

  constructor(inner: C, priority: number, panicEligible = true) {
    this.inner = inner;
    this.priority = validatePriority(priority);
    this.panicEligible = panicEligible;
  }

  /** A copy with panic eligibility set. */
  withPanicEligibility(eligible: boolean): Prioritized<C> {
    return new Prioritized(this.inner, this.priority, eligible);
  }

  isMember(): boolean {
    return statusOf(this.inner) !== 'draining';
  }
  // The pass-throughs are written out in each wrapper class, not inherited
  // from a shared base: in Localized(Prioritized(Backend)) a shared
  // `get weight` would call itself for another receiver, its inner property
  // access would see two shapes, and V8 stops inlining it (measured: +1.8 µs
  // per per-decision pick at n = 512; docs/internals.md, "Wrapper classes
  // write their pass-throughs out").
  get id(): string {
    return this.inner.id;
  }
  get weight(): number {
    return this.inner.weight;
  }
  get status(): Status | undefined {
    return statusOf(this.inner);
  }
  isEligible(): boolean {
    return this.inner.isEligible();
  }
  load(): number {
    return this.inner.load();
  }
  isPanicEligible(): boolean {
    return this.panicEligible && statusOf(this.inner) !== 'draining';
  }
}

function isPriorityCandidate(c: Candidate): c is PriorityCandidate {
  const p = c as Partial<PriorityCandidate>;
  return typeof p.priority === 'number' && typeof p.isMember === 'function' && typeof p.isPanicEligible === 'function';
}

/**
 * Wraps a candidate (usually a {@link Prioritized}) with a locality and that
 * locality's weight (default 1). A plain inner candidate has priority 0.
 *
 * @example
 * const e = new Localized(new Prioritized(new Backend('api-west-1'), 0), 'us-west-2').withLocalityWeight(3);
 */
export class Localized<C extends Candidate = Candidate> implements LocalityCandidate {
  readonly inner: C;
  readonly locality: string;
  readonly localityWeight: number;

  constructor(inner: C, locality: string, localityWeight = 1) {
    if (typeof locality !== 'string') {
      throw new PoiseError('InvalidConfig', `locality: must be a string, got ${describe(locality)}`, {
        field: 'locality',
      });
    }
    this.inner = inner;
    this.locality = locality;
    this.localityWeight = validateWeight(localityWeight, 'localityWeight');
  }

  /** A copy with the locality weight set; throws `InvalidWeight` outside [1, 2^32 − 1]. */
  withLocalityWeight(weight: number): Localized<C> {
    return new Localized(this.inner, this.locality, weight);
  }

  get priority(): number {
    return isPriorityCandidate(this.inner) ? this.inner.priority : 0;
  }
  // Pass-throughs written out per class: see Prioritized.
  get id(): string {
    return this.inner.id;
  }
  get weight(): number {
    return this.inner.weight;
  }
  get status(): Status | undefined {
    return statusOf(this.inner);
  }
  isEligible(): boolean {
    return this.inner.isEligible();
  }
  load(): number {
    return this.inner.load();
  }
  isMember(): boolean {
    return isPriorityCandidate(this.inner) ? this.inner.isMember() : statusOf(this.inner) !== 'draining';
  }
  isPanicEligible(): boolean {
    return isPriorityCandidate(this.inner) ? this.inner.isPanicEligible() : statusOf(this.inner) !== 'draining';
  }
}
