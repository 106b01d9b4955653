/**
 * The one error hierarchy of Poise. Callers branch on {@link PoiseError.code},
 * never on the message: codes are stable and never change meaning, messages
 * may be reworded.
 */

/** Every code a {@link PoiseError} can carry. New codes may be added; existing ones never change meaning. */
export type PoiseErrorCode =
  /** The candidate slice was empty. */
  | 'Empty'
  /** The slice had members, but none of them may be chosen now. */
  | 'NoEligibleCandidates'
  /** A checked weight sum exceeded Number.MAX_SAFE_INTEGER (or a documented narrower bound). */
  | 'WeightOverflow'
  /** Two members of one snapshot share an identity. */
  | 'DuplicateIdentity'
  /** Fail-closed panic: traffic landed on a panicking priority and was shed on purpose. */
  | 'PanicRejected'
  /** Contradictory topology metadata, such as two locality weights for one (priority, locality). */
  | 'InconsistentTopology'
  /** A weight outside the integers [1, 2^32 − 1]. */
  | 'InvalidWeight'
  /** An option, flag or document field out of its accepted range. */
  | 'InvalidConfig'
  /** Admission refused: a queue is full, a limit is reached, or the component is closed. */
  | 'Overloaded'
  /** A conditional write lost: the stored version is not the one expected, or the given version is not newer. */
  | 'Conflict'
  /** The thing named does not exist (no such backend, nothing stored for the cluster). */
  | 'NotFound'
  /** The component was closed; nothing more is accepted. */
  | 'Closed'
  /** A fixed capacity is exhausted (table slots, open leases, attribution rows, the version space); nothing was counted or written. */
  | 'CapacityExhausted'
  /** A dependency (Redis, a socket) cannot be reached now; the same call may succeed later. */
  | 'Unavailable'
  /**
   * Data read back from a store or received from it (a Redis snapshot or
   * notice, a last-known snapshot file) is not a valid snapshot. Not the
   * caller's input: nothing was applied or written, the last good state is kept.
   */
  | 'Corrupt'
  /** Admission refused: the request's band already holds its queue limit of waiters. */
  | 'QueueFull'
  /** Admission refused: the request waited in its band's queue for its whole timeout. */
  | 'QueueTimeout'
  /** The caller's AbortSignal aborted the operation (a queued admission); `cause` is the signal's reason. */
  | 'Cancelled'
  /**
   * A write was applied on the Redis master but fewer replicas than required
   * (`waitReplicas`) acknowledged it in time: it is stored, and a failover
   * before it replicates can lose it.
   */
  | 'NotReplicated'
  /**
   * A read (`acquire({ intent: 'read' })`) found no replica within its
   * `maxLagMs` (or at its `minLsn`) and the router refuses rather than falling
   * back to the primary (`readFallback: 'refuse'`), or there is no primary to
   * fall back to.
   */
  | 'ReplicaLag'
  /** `balancer.ready()` timed out: some backend has not had its first health or role verdict (the message names each and what it awaits). */
  | 'NotReady'
  /**
   * One connect attempt to a backend did not complete within its connect
   * timeout (`connectTimeoutMs`): the attempt's error, so the run's
   * `NoEligibleCandidates` carries it as `cause`, and the reason a run (the
   * proxy's refusal) ended with when its last attempt timed out.
   */
  | 'ConnectTimeout'
  /**
   * An outbound connect failed for want of a resource of this host (file
   * descriptors, socket buffers, memory, ephemeral ports: EMFILE, ENFILE,
   * ENOBUFS, ENOMEM, EADDRNOTAVAIL); no backend is blamed. The reason a run
   * ended with (`RetryRun.reason`, the proxy's `local-error` refusal); the
   * error `connect()` and `routedStream()` end with keeps its older code,
   * `CapacityExhausted`, with the system error as `cause`.
   */
  | 'LocalResource';

/** Every code, for validation and exhaustive tables. */
export const POISE_ERROR_CODES: readonly PoiseErrorCode[] = [
  'Empty',
  'NoEligibleCandidates',
  'WeightOverflow',
  'DuplicateIdentity',
  'PanicRejected',
  'InconsistentTopology',
  'InvalidWeight',
  'InvalidConfig',
  'Overloaded',
  'Conflict',
  'NotFound',
  'Closed',
  'CapacityExhausted',
  'Unavailable',
  'Corrupt',
  'QueueFull',
  'QueueTimeout',
  'Cancelled',
  'NotReplicated',
  'ReplicaLag',
  'NotReady',
  'ConnectTimeout',
  'LocalResource',
];

/**
 * The brand every PoiseError carries, registered process-wide with
 * `Symbol.for` so that two copies of the package (a dependency installed
 * twice, a bundled and an unbundled copy) still recognise each other's errors.
 */
const BRAND: unique symbol = Symbol.for('poise-lb.PoiseError') as never;

/**
 * A Poise failure with a stable machine-readable `code`.
 *
 * @example
 * try { policy.pick(candidates); }
 * catch (err) { if (err instanceof PoiseError && err.code === 'Empty') shed(); else throw err; }
 */
export class PoiseError extends Error {
  /** The stable code; branch on this. */
  readonly code: PoiseErrorCode;
  /** For `InvalidConfig` and `InvalidWeight`: the path of the offending field, when known (`backends[3].weight`). */
  readonly field: string | undefined;

  constructor(code: PoiseErrorCode, message: string, options?: { field?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'PoiseError';
    this.code = code;
    this.field = options?.field;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /**
   * `err instanceof PoiseError` is true for a PoiseError of any copy of the
   * package (by brand, not by prototype chain).
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }
}

/** True when `err` is a {@link PoiseError} (of any copy of the package), optionally with the given code. */
export function isPoiseError(err: unknown, code?: PoiseErrorCode): err is PoiseError {
  return err instanceof PoiseError && (code === undefined || err.code === code);
}

/** Throws `InvalidConfig` naming the field and the reason. Shared by every options validator. @internal */
export function invalidConfig(field: string, reason: string, got?: unknown): never {
  // biome-ignore lint/complexity/noArguments: arguments.length tells `got: undefined` apart from no `got`
  const suffix = arguments.length >= 3 ? `, got ${describe(got)}` : '';
  throw new PoiseError('InvalidConfig', `${field}: ${reason}${suffix}`, { field });
}

/**
 * Throws `InvalidConfig` for a key of `value` that is not in `allowed`: a
 * misspelled option (`capcity`) must not silently mean "the default".
 * `value` that is not a plain object is left to the caller's own check.
 * @internal
 */
export function checkOptionKeys(value: unknown, allowed: readonly string[], path = 'options'): void {
  if (typeof value !== 'object' || value === null) return;
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) invalidConfig(`${path}.${key}`, `unknown option (accepted: ${allowed.join(', ')})`);
  }
}

/** A short, safe rendering of an offending value for an error message. @internal */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}
