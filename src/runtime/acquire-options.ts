/**
 * The options of an acquire and their one reader, in a module of their own:
 * the Router, the admission seam (admission-hook.ts) and the gate all name
 * and read them, and none of them has to import another for it.
 * {@link AcquireRequest} reads `AcquireOptions` (every acquire path, no
 * allocation); {@link readAsyncOptions} reads what `acquireAsync` adds
 * (band, signal, timeoutMs) for the gate and the gateless path alike.
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn, positiveNumber } from '../core/validate.js';
import { LeaseKind, type LeaseKindCode } from '../load/leases.js';
import { ReadBounds, checkLag } from './role-sets.js';

/** Lease kind names. */
export type LeaseKindName = 'request' | 'connection';

/** Options of `Router.acquire`. */
export interface AcquireOptions {
  /** Affinity key for `rendezvous` / `maglev` / `ring-hash`. */
  key?: string | number;
  /** Only backends of this failover priority. */
  priority?: number;
  /** Backend ids to avoid (retries). */
  exclude?: ReadonlySet<string> | readonly string[];
  /** Overrides the router's lease kind for this lease. */
  kind?: LeaseKindName;
  /**
   * Database routing by role (the spec's `role`, or what a `roles` health
   * check read): `'write'` picks among primaries; `'read'` among replicas
   * within `maxLagMs` (and at `minLsn`), else the primary (or `ReplicaLag`
   * with the router's `readFallback: 'refuse'`). Not with `priority`.
   */
  intent?: 'read' | 'write';
  /** A read's lag bound, ms; default the router's `maxLagMs` (10 000). */
  maxLagMs?: number;
  /**
   * Read-your-writes: only a replica whose replay LSN has reached this one
   * (PostgreSQL's text form `'16/B374D848'`, or a bigint), else the primary.
   * The string form costs no allocation per acquire.
   */
  minLsn?: string | bigint;
}

/** Options of `Router.acquireAsync`. */
export interface AcquireAsyncOptions extends AcquireOptions {
  /**
   * The admission band: its rank, one of the gate's `bands` (larger = more
   * important). Default: the gate's `defaultBand`. Needs an `AdmissionGate`
   * on the router. Not a failover tier: that is `priority`.
   */
  band?: number;
  /** Aborting it rejects a queued request with `Cancelled`. */
  signal?: AbortSignal;
  /** Longest wait in the admission queue, ms (default: the gate's, 60 000); then `QueueTimeout`. */
  timeoutMs?: number;
}

/**
 * Checks `acquireAsync(options).priority`: the failover tier only. The
 * pre-1.0 object form `{ admission, failover }` is refused with its
 * replacement named (the admission band is `band`). @internal
 */
export function checkAsyncPriority(priority: unknown): number | undefined {
  if (typeof priority === 'object' && priority !== null) {
    invalidConfig(
      'acquireAsync(options).priority',
      'is the failover tier, an integer >= 0; the admission band is its own option now: acquireAsync({ band, priority })',
      priority,
    );
  }
  return priority === undefined ? undefined : integerIn(priority, 'acquireAsync(options).priority', 0);
}

/** A lease kind's code from its name (`field` names the option in the error). */
export function kindCode(name: unknown, field: string): LeaseKindCode {
  if (name === 'request') return LeaseKind.Request;
  if (name === 'connection') return LeaseKind.Connection;
  return invalidConfig(field, 'must be "request" or "connection"', name);
}

/** What an acquire asks for by database role (`AcquireOptions.intent`). */
export const Intent = { None: 0, Write: 1, Read: 2 } as const;
/** An intent code. */
export type IntentCode = (typeof Intent)[keyof typeof Intent];

/**
 * Refuses a misspelled acquire option (`exlcude`) instead of ignoring it.
 * A `for...in` over a small literal walks V8's enum cache and compares
 * internalized strings: no allocation, unlike `Object.keys` (the heap bytes
 * per acquire in `npm run bench:workers` show it).
 */
function checkAcquireKeys(opts: object): void {
  for (const k in opts) {
    if (k !== 'key' && k !== 'priority' && k !== 'exclude' && k !== 'kind' && k !== 'intent' && k !== 'maxLagMs' && k !== 'minLsn') {
      invalidConfig(`acquire(options).${k}`, 'unknown option (accepted: key, priority, exclude, kind, intent, maxLagMs, minLsn)');
    }
  }
}

/**
 * The one reader of {@link AcquireOptions}: every acquire path (`acquire`,
 * `acquireHandle`, and `acquireAsync` through them, with or without a gate)
 * fills the router's one instance per call. Fields, not a new object: the
 * acquire path allocates nothing (a text `minLsn` is parsed in place,
 * role-sets.ts). The Router then asks which candidate set the request names
 * (candidate-sets.ts) and draws from it.
 */
export class AcquireRequest {
  /** The affinity key (keyed policies). */
  key: string | number | undefined = undefined;
  /** The lease kind code. */
  kind: LeaseKindCode = LeaseKind.Request;
  /** The database role asked for ({@link Intent}). */
  intent: IntentCode = Intent.None;
  /** The failover tier, or -1: the whole view. */
  priority = -1;
  /** Backend ids to avoid, when any (checked to be a Set or an array). */
  exclude: ReadonlySet<string> | readonly string[] | undefined = undefined;
  /** A read's bounds: lag and minimum LSN (set only with `intent: 'read'`). */
  readonly bounds = new ReadBounds();

  /**
   * Reads `opts` (undefined: the defaults) over the previous call's values.
   * Throws `InvalidConfig` naming the option (`acquire(options).<name>`).
   */
  read(opts: AcquireOptions | undefined, defaultKind: LeaseKindCode, defaultMaxLagMs: number): void {
    this.key = undefined;
    this.kind = defaultKind;
    this.intent = Intent.None;
    this.priority = -1;
    this.exclude = undefined;
    if (opts === undefined) return;
    if (typeof opts !== 'object' || opts === null) invalidConfig('acquire(options)', 'must be an object', opts);
    checkAcquireKeys(opts);
    this.key = opts.key;
    if (opts.kind !== undefined) this.kind = kindCode(opts.kind, 'acquire(options).kind');
    if (opts.intent !== undefined) {
      if (opts.priority !== undefined) invalidConfig('acquire(options).priority', 'cannot be combined with intent (roles choose the set)');
      if (opts.intent === 'write') {
        this.intent = Intent.Write;
      } else if (opts.intent === 'read') {
        this.intent = Intent.Read;
        this.bounds.maxLagMs = opts.maxLagMs === undefined ? defaultMaxLagMs : checkLag(opts.maxLagMs, 'acquire(options).maxLagMs');
        this.bounds.setMinLsn(opts.minLsn);
      } else {
        invalidConfig('acquire(options).intent', 'must be "read" or "write"', opts.intent);
      }
    } else if (opts.maxLagMs !== undefined || opts.minLsn !== undefined) {
      invalidConfig(`acquire(options).${opts.minLsn !== undefined ? 'minLsn' : 'maxLagMs'}`, 'applies only with intent: "read"');
    } else if (opts.priority !== undefined) {
      this.priority = integerIn(opts.priority, 'acquire(options).priority', 0);
    }
    const ex = opts.exclude;
    if (ex !== undefined && !(ex instanceof Set) && !Array.isArray(ex)) {
      invalidConfig('acquire(options).exclude', 'must be a Set or an array of backend ids', ex);
    }
    this.exclude = ex;
  }
}

/** The admission-side fields of one `acquireAsync` call, read by {@link readAsyncOptions}. */
export interface AsyncRequest<B> {
  /** The band the call names, as the resolver returned it (undefined: the default). */
  band: B | undefined;
  /** The caller's signal. */
  signal: AbortSignal | undefined;
  /** The call's own queue timeout, ms. */
  timeoutMs: number | undefined;
  /** What is left for the acquire itself (read by {@link AcquireRequest} when the lease is taken). */
  acquire: AcquireOptions | undefined;
}

const ASYNC_KEYS = ['key', 'priority', 'band', 'exclude', 'kind', 'intent', 'maxLagMs', 'minLsn', 'signal', 'timeoutMs'];

/**
 * The one reader of {@link AcquireAsyncOptions}' own fields, for both
 * paths of `acquireAsync` (through an admission gate, or at once without
 * one): the keys, the band (through `band`, the gate's resolver — the
 * gateless one refuses any), the failover `priority` (the pre-1.0 object
 * form refused), `timeoutMs` and `signal`. What is left is an acquire's,
 * read by {@link AcquireRequest} when the lease is taken. Off the
 * allocation-free path (acquireAsync makes a promise anyway). Throws
 * `InvalidConfig` naming `acquireAsync(options).<name>`.
 */
export function readAsyncOptions<B>(opts: AcquireAsyncOptions | undefined, band: (rank: unknown) => B): AsyncRequest<B> {
  if (opts === undefined) return { band: undefined, signal: undefined, timeoutMs: undefined, acquire: undefined };
  if (typeof opts !== 'object' || opts === null) invalidConfig('acquireAsync(options)', 'must be an object', opts);
  checkOptionKeys(opts, ASYNC_KEYS, 'acquireAsync(options)');
  const { signal, timeoutMs, band: rank, ...rest } = opts;
  const b = rank === undefined ? undefined : band(rank);
  checkAsyncPriority(rest.priority);
  if (timeoutMs !== undefined) positiveNumber(timeoutMs, 'acquireAsync(options).timeoutMs');
  if (signal !== undefined && !(signal instanceof AbortSignal))
    invalidConfig('acquireAsync(options).signal', 'must be an AbortSignal', signal);
  return { band: b, signal, timeoutMs, acquire: rest };
}
