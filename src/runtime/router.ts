/**
 * Router: chooses a backend and takes a lease on it, in any thread. That is
 * its one job: what is written after the pick (release, samples, passive
 * health) is the feedback module's (feedback.ts), which the lease records
 * into; what admission reads of the pool is the PoolGauge (pool-gauge.ts).
 *
 * Each router owns its policy and its random streams, seeded from the OS in
 * the router's own thread, and reads load only from the shared LoadTable —
 * no global minimum is ever computed. It keeps a prepared candidate view
 * (eligible slots, with the policy's tables built on them) and rebuilds it
 * only when the table's change epoch moves (one plain load per acquire) or
 * an ejection it knows of expires. The view is built off the request path
 * by candidate-view.ts; this file is the pick path.
 */
import { threadId } from 'node:worker_threads';
import { PoiseError, invalidConfig, checkOptionKeys } from '../core/errors.js';
import type { ResolvedBackendSpec } from '../core/spec.js';
import { Rng, type Seed } from '../core/rng.js';
import { elapsedMs, wrapMs } from '../core/time.js';
import { integerIn, positiveNumber } from '../core/validate.js';
import { LAYOUT_VERSION } from '../load/layout.js';
import { LeaseKind, PoolTotal, type LeaseKindCode } from '../load/leases.js';
import { LoadTable } from '../load/load-table.js';
import { SlotState } from '../load/slot-tags.js';
import type { PickContext, Policy } from '../policy/types.js';
import { defaultLogger, type Logger } from '../log.js';
import { checkAsyncPriority, type AcquireAsyncOptions, type AcquireOptions, type LeaseKindName } from './acquire-options.js';
import type { AdmissionHook } from './admission-hook.js';
import { ClockWords, type Clock } from './clock.js';
import { Feedback } from './feedback.js';
import { ejectionBackoff, resolveEjection, type EjectionOptions } from './health.js';
import { Lease, type Outcome } from './lease.js';
import { LeaseBook } from './lease-book.js';
import { KEYED_POLICY_NAMES, policySetup, type PolicyName, type PolicySetup } from './policies.js';
import { PoolGauge, RowAdmission } from './pool-gauge.js';
import { SharedRetryBudget } from './retry-budget.js';
import { AdmissionRegion } from '../load/admission-region.js';
import { CandidateView, flushStats } from './candidate-view.js';
import { DbRole, type DbRoleCode } from '../load/db-state.js';
import { VerdictSource } from '../load/verdicts.js';
import { READ_DRAWS, ReadBounds, checkLag, type ReadFallback, type RoleSet } from './role-sets.js';
import { LoadEnv, Metric, type SlotCandidate } from './slot-candidate.js';

export type { PolicyName } from './policies.js';
export type { Outcome } from './lease.js';
export type { AcquireAsyncOptions, AcquireOptions, LeaseKindName } from './acquire-options.js';
export type { AdmissionHook } from './admission-hook.js';

/** What a thread needs to attach a Router: structured-clonable; the buffer is shared, not copied. */
export interface RouterAttachment {
  /** The LoadTable's shared memory (counters, epochs and the spec blob). */
  buffer: SharedArrayBuffer;
  /** The table layout version the attachment was made for. */
  layoutVersion: number;
  /** The process's shared clock (ticked by the owner's ticker thread). */
  clock: SharedArrayBuffer;
}

/** Options of a Router. */
export interface RouterOptions {
  /** Default `'p2c:latency'`. */
  policy?: PolicyName;
  /**
   * `p2c:latency` only: the tail rule. When one of the two candidates' mean
   * latency (a plain EWMA beside the PeakEWMA) is more than `latencyRatio`
   * times the other's, the faster wins whatever their in-flight counts; within
   * the ratio the PeakEWMA cost decides. A number >= 1; default 2;
   * `Infinity` turns it off (Finagle's and tower's cost alone).
   * docs/policies.md, "The tail rule".
   */
  latencyRatio?: number;
  /** Replay seed (debug only); default: OS seed drawn in the router's own thread. */
  seed?: Seed;
  /** Passive health: consecutive failures → ejection with exponential backoff + jitter. */
  ejection?: EjectionOptions;
  /**
   * What a lease counts by default: `'connection'` (active connections, its
   * sample is a connect time) or `'request'` (in-flight requests, its sample
   * is a request latency). Default: `'connection'` for `p2c:connections` and
   * `p2c:connectionTime`, else `'request'`.
   */
  leaseKind?: LeaseKindName;
  /** Milliseconds; default the shared process clock. Inject one in tests (owner thread). Read modulo 2^30. */
  clock?: Clock;
  /** Default `defaultLogger()`. */
  logger?: Logger;
  /**
   * Longest one acquire waits, in all, for the owner to publish a change
   * whose tags it already saw, ms; default 5. Tests that must catch the
   * publication window on a loaded machine raise it.
   * @internal
   */
  publishWaitMs?: number;
  /** A read's default lag bound (`acquire({ intent: 'read' })`), ms; default 10 000. */
  maxLagMs?: number;
  /**
   * When no replica qualifies for a read: `'primary'` (default) reads from a
   * primary; `'refuse'` throws `PoiseError` `ReplicaLag`.
   */
  readFallback?: ReadFallback;
}

interface Tier {
  cands: SlotCandidate[];
  policy: Policy<SlotCandidate>;
}

const PICK_BATCH = 64;
/** take() result: the view went stale during the draw (see acquireHandle). */
const STALE = -1;
/** take() result: a drawn slot's tag changed but the epoch announcing it has not moved yet (see acquireAfterStale). */
const TAG_MOVED = -2;
/** take() result: a read found no replica fresh enough (see role-sets.ts). */
const LAGGING = -3;
/** Rebuilds of the view one acquire may do when membership moves under it (then it fails as usual). */
const MAX_STALE_ROUNDS = 16;
/** Longest one acquire waits, in all, for the owner to publish a change whose tags it already saw (ms; `publishWaitMs`). */
const MAX_PUBLISH_WAIT_MS = 5;
/** Retry modes of one draw: refuse as usual; return STALE when the epoch moved; also return TAG_MOVED. */
const NO_RETRY = 0;
const RETRY_STALE = 1;
const RETRY_WAIT = 2;
type RetryMode = typeof NO_RETRY | typeof RETRY_STALE | typeof RETRY_WAIT;

/**
 * Prepares `policy` for a new view now, before any acquire has excluded a
 * member (an exclusion marks candidates ineligible for that acquire only,
 * and a plan sampled then would keep them out until the next view). A
 * snapshot the policy refuses is left to the pick, which throws the same
 * error to the acquire.
 */
function prepareQuietly(policy: Policy<SlotCandidate>, view: SlotCandidate[]): void {
  try {
    policy.prepare(view);
  } catch {
    // The next pick on this view prepares again and throws the error to its caller.
  }
}

function deriveSeed(seed: Seed, salt: number): bigint {
  return BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + BigInt(salt) * 0xbf58476d1ce4e5b9n + 1n);
}

function kindCode(name: unknown, field: string): LeaseKindCode {
  if (name === 'request') return LeaseKind.Request;
  if (name === 'connection') return LeaseKind.Connection;
  return invalidConfig(field, 'must be "request" or "connection"', name);
}

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
 * A router over a Balancer's LoadTable.
 *
 * @example
 * // owner thread
 * const balancer = new Balancer();
 * balancer.update([{ id: 'a', address: '127.0.0.1:7001' }, { id: 'b', address: '127.0.0.1:7002' }]);
 * const router = balancer.router({ policy: 'p2c:latency' });
 * const lease = router.acquire();
 * lease.release('success', { latencyMs: 12 });
 * // any other thread: Router.attach(balancer.attachment()) (pass it in workerData)
 */
export class Router {
  /** The policy this router was built with. */
  readonly policyName: PolicyName;
  /** This thread's attribution row in the table. */
  readonly row: number;
  /**
   * The read-only gauge of this router's pool: what an admission gate reads
   * (capacity, load by kind) and waits on (a release signal).
   */
  readonly gauge: PoolGauge;
  /**
   * The process's retry budget (the Balancer's `retryBudget`, kept in the
   * shared table: every thread draws on it). `connect()`, `routedStream()`,
   * `TcpProxy` and the HTTP dispatcher ask it before each retry; without a
   * configured budget it allows every retry (and counts it).
   */
  readonly retryBudget: SharedRetryBudget;
  private readonly table: LoadTable;
  private readonly setup: PolicySetup;
  private readonly policy: Policy<SlotCandidate>;
  private readonly seed: Seed | undefined;
  private readonly rng: Rng;
  private readonly clockWords: ClockWords;
  private readonly customClock: Clock | undefined;
  private readonly log: Logger;
  private readonly publishWaitMs: number;
  private readonly env: LoadEnv;
  private readonly timed: boolean;
  private readonly defaultKind: LeaseKindCode;
  private readonly book = new LeaseBook();
  private readonly feedback: Feedback;
  private readonly ctx: PickContext = { key: undefined };
  private readonly tierPolicies = new Map<number, Policy<SlotCandidate>>();
  private readonly candidates: CandidateView;
  private tiers = new Map<number, Tier>();
  /** By role code: the role's set for the view in force (built at its first use after a rebuild). */
  private roleSets: (RoleSet | undefined)[] = [undefined, undefined, undefined];
  /** By role code: the role's policy instance (kept across views, as the tier policies). */
  private readonly rolePolicies: (Policy<SlotCandidate> | undefined)[] = [undefined, undefined, undefined];
  private readonly read = new ReadBounds();
  private readonly maxLagMs: number;
  private readonly readFallback: ReadFallback;
  /** The change epoch the view was built at. */
  private epoch = -1;
  /** `candidates.members` of the last build (the array the policies are prepared on). */
  private view: SlotCandidate[] = [];
  private hasExpiry = false;
  private expiryAt = 0;
  private blocked: SlotCandidate[] = [];
  private nBlocked = 0;
  private shut = false;
  /** The attached admission gate, if any (see admission-hook.ts). */
  private gate: AdmissionHook | undefined;
  /** Σ maxInflight of the eligible members of the last build (Infinity when one is unlimited, 0 when none). */
  private eligibleCapacity = 0;
  /** The current take() refused a connection lease at this process's budget share (then its refusal is `Overloaded`). */
  private atShare = false;
  /** Flushes the batched pick counts at least once a second, so a lightly used router's picks show up. */
  private readonly flushTimer: ReturnType<typeof setInterval>;

  private constructor(table: LoadTable, clock: SharedArrayBuffer, opts: RouterOptions) {
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, [
      'policy',
      'latencyRatio',
      'seed',
      'ejection',
      'leaseKind',
      'clock',
      'logger',
      'publishWaitMs',
      'maxLagMs',
      'readFallback',
    ]);
    this.maxLagMs = checkLag(opts.maxLagMs ?? 10_000, 'options.maxLagMs');
    this.readFallback = opts.readFallback ?? 'primary';
    if (this.readFallback !== 'primary' && this.readFallback !== 'refuse') {
      invalidConfig('options.readFallback', 'must be "primary" or "refuse"', this.readFallback);
    }
    this.publishWaitMs = integerIn(opts.publishWaitMs ?? MAX_PUBLISH_WAIT_MS, 'options.publishWaitMs', 0, 10_000);
    this.table = table;
    this.policyName = opts.policy ?? 'p2c:latency';
    this.setup = policySetup(this.policyName, { latencyRatio: opts.latencyRatio });
    const ejection = resolveEjection(opts.ejection);
    if (opts.clock !== undefined && typeof opts.clock !== 'function')
      invalidConfig('options.clock', 'must be a function returning milliseconds', opts.clock);
    this.seed = opts.seed;
    // Seeds are drawn here, in the router's own thread (or derived from a replay seed).
    this.rng = new Rng(opts.seed === undefined ? undefined : deriveSeed(opts.seed, 1));
    const backoff = ejectionBackoff(ejection, this.rng);
    this.env = new LoadEnv(table, this.setup.metric);
    this.policy = this.setup.create(opts.seed === undefined ? undefined : deriveSeed(opts.seed, 2), this.env);
    this.clockWords = new ClockWords(clock);
    this.customClock = opts.clock;
    this.log = opts.logger ?? defaultLogger();
    this.timed = this.setup.metric === Metric.ConnectTime || this.setup.metric === Metric.Latency;
    const connectionDefault = this.setup.metric === Metric.ConnectTime || this.setup.metric === Metric.Connections;
    this.defaultKind =
      opts.leaseKind === undefined
        ? connectionDefault
          ? LeaseKind.Connection
          : LeaseKind.Request
        : kindCode(opts.leaseKind, 'options.leaseKind');
    this.candidates = new CandidateView(table, this.env, this.log, KEYED_POLICY_NAMES.includes(this.policyName));
    this.row = table.leases.claimRow(threadId);
    this.env.pool = new PoolTotal(table.leases, table.words, table.layout, this.row);
    this.gauge = new PoolGauge(
      table.leases,
      () => this.capacity(),
      this.defaultKind === LeaseKind.Connection ? 'connection' : 'request',
      new RowAdmission(table.admission, this.row, AdmissionRegion.BANDS),
    );
    this.retryBudget = new SharedRetryBudget(table.retries, () => this.now());
    this.feedback = new Feedback(table, this.row, this.book, this.gauge, () => this.now(), ejection, backoff, this.log);
    // A router starts with the view of the membership in force.
    this.rebuild();
    this.flushTimer = setInterval(() => this.flushPicks(), 1000);
    this.flushTimer.unref();
  }

  /**
   * Attaches a router to a table in this thread. Throws `InvalidConfig` for a
   * bad attachment or option.
   */
  static attach(attachment: RouterAttachment, opts: RouterOptions = {}): Router {
    if (typeof attachment !== 'object' || attachment === null || !(attachment.buffer instanceof SharedArrayBuffer)) {
      invalidConfig('attachment.buffer', 'must be a SharedArrayBuffer (from balancer.attachment())', attachment?.buffer);
    }
    if (attachment.layoutVersion !== LAYOUT_VERSION) {
      invalidConfig(
        'attachment.layoutVersion',
        `must be ${LAYOUT_VERSION} (same poise-lb version in every thread)`,
        attachment.layoutVersion,
      );
    }
    if (!(attachment.clock instanceof SharedArrayBuffer)) {
      invalidConfig('attachment.clock', 'must be a SharedArrayBuffer (from balancer.attachment())', attachment.clock);
    }
    return new Router(LoadTable.attach(attachment.buffer), attachment.clock, opts);
  }

  /**
   * Membership version of the view in force: the one the last acquire (or
   * {@link refresh}) built. A pure read; the owner may already have
   * published a newer membership, which the next acquire picks up.
   */
  get version(): number {
    return this.candidates.version;
  }

  /**
   * Brings the view up to date now when the table moved since it was built
   * (the next acquire would do the same), and returns its membership version.
   * For a thread that waits for a version without routing meanwhile.
   */
  refresh(): number {
    if (this.table.epochs.change() !== this.epoch) this.rebuild();
    return this.candidates.version;
  }

  /**
   * The spec of backend `id` in the view in force (as of the last acquire or
   * {@link refresh}), or undefined when that membership has no such backend
   * (removed, or not yet seen). A pure read: a map lookup.
   * @internal
   */
  member(id: string): Readonly<ResolvedBackendSpec> | undefined {
    return this.candidates.byId.get(id)?.spec;
  }

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.shut;
  }

  /** Leases this router holds open. */
  get openLeases(): number {
    return this.book.count;
  }

  /** The lease kind this router counts by default. */
  get leaseKind(): LeaseKindName {
    return this.gauge.kind;
  }

  /**
   * Picks a backend and takes a lease on it. Throws `PoiseError`: `Empty` (no
   * backends), `NoEligibleCandidates` (none may be chosen: all draining,
   * excluded, or at `maxInflight`), `PanicRejected` (fail-closed priority
   * panic), `InvalidConfig` (bad options), `Closed` (a closed router).
   */
  acquire(opts?: AcquireOptions): Lease {
    const handle = this.acquireHandle(opts);
    return new Lease(this.feedback, handle, this.book.candidateOf(this.book.find(handle)));
  }

  /**
   * Admission-aware acquire. With an admission gate attached (an
   * `AdmissionGate` from `poise-lb/runtime`), the request waits in the queue
   * of its `band` while the pool's saturation is above the band's ceiling,
   * and rejects with `QueueFull`, `QueueTimeout`, `Cancelled`, `Closed` or
   * the acquire's own error. `priority` is the failover tier, as in
   * {@link acquire}. Without a gate it acquires at once (a `band` is then
   * `InvalidConfig`). With `intent`, a refusal for want of a role while a
   * member's first roles check is still out waits for the first verdicts
   * within `timeoutMs` (default 60 000) instead of failing at once
   * (docs/health.md, "Waiting for the first verdicts").
   *
   * @example
   * const lease = await router.acquireAsync({ band: 10, signal: AbortSignal.timeout(5000) });
   */
  acquireAsync(opts?: AcquireAsyncOptions): Promise<Lease> {
    const first = this.admit(opts);
    // With an intent, a refusal for want of a role waits for the first role verdicts (below).
    if (typeof opts !== 'object' || opts === null || opts.intent === undefined) return first;
    return first.catch((err: unknown) => this.afterVerdicts(err, opts, performance.now()));
  }

  /**
   * A refused `acquireAsync({ intent })` (`NoEligibleCandidates`: no known
   * primary; `ReplicaLag`: no replica and no primary) while some member's
   * active check has not delivered its first result — its role is not known
   * yet, right after start or after it joined: waits for the next change of
   * the table (every first verdict bumps the change epoch; load/verdicts.ts)
   * and tries again, until the request's `timeoutMs` (default 60 000, the
   * admission gate's) has passed since the call, then rejects with the last
   * refusal, saying what it waited for. Nothing waits once every member has
   * its first verdict: a refusal then is the answer. Off the pick path: the
   * scan of the members runs only on a refusal.
   */
  private async afterVerdicts(err: unknown, opts: AcquireAsyncOptions, start: number): Promise<Lease> {
    const limit = opts.timeoutMs ?? 60_000;
    const epochs = this.table.epochs;
    for (;;) {
      if (!(err instanceof PoiseError) || (err.code !== 'NoEligibleCandidates' && err.code !== 'ReplicaLag') || this.shut) throw err;
      // The epoch before the look: a verdict that lands after it moves the epoch, and the wait returns at once.
      const seen = epochs.change();
      if (!this.awaitingRoles()) throw err;
      const left = limit - (performance.now() - start);
      if (left <= 0) {
        throw new PoiseError(err.code, `${err.message} (a member's first role check was still pending after ${limit} ms)`, {
          field: 'timeoutMs',
          cause: err,
        });
      }
      if (opts.signal?.aborted) throw new PoiseError('Cancelled', 'acquireAsync: the signal was aborted', { cause: opts.signal.reason });
      // A pending waitAsync holds no handle: this timer keeps the thread alive while the request waits (a worker
      // whose only business is this request would otherwise exit under it).
      const hold = setTimeout(() => {}, left);
      const signal = opts.signal;
      let onAbort: (() => void) | undefined;
      try {
        const changed = epochs.changedAsync(seen, left);
        if (signal === undefined) await changed;
        else
          await Promise.race([
            changed,
            new Promise<void>((resolve) => {
              onAbort = resolve;
              signal.addEventListener('abort', onAbort, { once: true });
            }),
          ]);
      } finally {
        clearTimeout(hold);
        if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
      }
      if (signal?.aborted) throw new PoiseError('Cancelled', 'acquireAsync: the signal was aborted', { cause: signal.reason });
      try {
        return await this.admit(opts);
      } catch (e) {
        err = e;
      }
    }
  }

  /** Whether a member of the view in force still awaits its active check's first result (the role comes with it). */
  private awaitingRoles(): boolean {
    if (this.table.epochs.change() !== this.epoch) this.rebuild();
    const v = this.table.verdicts;
    for (const c of this.candidates.all) if ((v.pending(c.slot) & VerdictSource.Check) !== 0) return true;
    return false;
  }

  /** One admission: through the gate when one is attached, else the acquire now. */
  private admit(opts: AcquireAsyncOptions | undefined): Promise<Lease> {
    if (this.gate !== undefined) return this.gate.acquireAsync(opts);
    try {
      if (opts === undefined) return Promise.resolve(this.acquire());
      if (typeof opts !== 'object' || opts === null) invalidConfig('acquireAsync(options)', 'must be an object', opts);
      const { signal, timeoutMs, band, ...rest } = opts;
      if (band !== undefined) invalidConfig('acquireAsync(options).band', 'needs an AdmissionGate attached to this router', band);
      checkAsyncPriority(rest.priority);
      if (timeoutMs !== undefined) positiveNumber(timeoutMs, 'acquireAsync(options).timeoutMs');
      if (signal?.aborted) throw new PoiseError('Cancelled', 'acquireAsync: the signal was aborted', { cause: signal.reason });
      return Promise.resolve(this.acquire(rest));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Attaches an admission gate; `AdmissionGate`'s constructor calls it.
   * Throws `InvalidConfig` when one is already attached.
   * @internal
   */
  attachAdmission(hook: AdmissionHook): void {
    if (this.gate !== undefined) invalidConfig('router', 'already has an admission gate attached');
    this.gate = hook;
  }

  /** The gauge's capacity: the current view's (rebuilt first when an epoch moved). */
  private capacity(): number {
    if (this.table.epochs.change() !== this.epoch || (this.hasExpiry && elapsedMs(this.now(), this.expiryAt) >= 0)) this.rebuild();
    return this.eligibleCapacity;
  }

  /**
   * The allocation-free form of {@link acquire}: returns a lease handle (a
   * small integer) for {@link releaseHandle}. The benchmark's zero-allocation
   * path; applications usually prefer `acquire()`.
   */
  acquireHandle(opts?: AcquireOptions): number {
    if (this.shut) throw new PoiseError('Closed', 'acquire: the router is closed');
    const handle = this.tryAcquire(opts, RETRY_WAIT);
    return handle >= 0 ? handle : this.acquireAfterStale(opts, handle);
  }

  /** Returns a lease taken by {@link acquireHandle} (see `Lease.release`); false when the handle was already released. */
  releaseHandle(handle: number, outcome: Outcome, latencyMs?: number, connectMs?: number): boolean {
    return this.feedback.release(handle, outcome, latencyMs, connectMs);
  }

  /**
   * One draw over the current view (rebuilt first if an epoch moved).
   * Returns a handle, or STALE / TAG_MOVED when the membership moved under
   * the draw and `retry` allows it (see {@link take}). Kept apart from the
   * rare retry loop so that the common path stays small enough for V8 to
   * inline the policy and load() into it (which keeps their numbers unboxed:
   * 0 bytes per acquire).
   */
  private tryAcquire(opts: AcquireOptions | undefined, retry: RetryMode): number {
    // One plain load per acquire (epochs.ts, changeHint: a stale read costs
    // at most one draw from the old view, which the tag check below makes
    // safe). The clock is read only when something needs it: a timed
    // metric's decay, or a known ejection's expiry.
    if (this.table.epochs.changeHint() !== this.epoch || (this.hasExpiry && elapsedMs(this.now(), this.expiryAt) >= 0)) this.rebuild();
    if (this.timed) this.env.now = this.now();
    this.atShare = false;
    let cands = this.view;
    let policy = this.policy;
    let kind = this.defaultKind;
    let readSet: RoleSet | undefined;
    if (opts === undefined) {
      this.ctx.key = undefined;
    } else {
      if (typeof opts !== 'object' || opts === null) invalidConfig('acquire(options)', 'must be an object', opts);
      checkAcquireKeys(opts);
      this.ctx.key = opts.key;
      if (opts.kind !== undefined) kind = kindCode(opts.kind, 'acquire(options).kind');
      if (opts.intent !== undefined) {
        if (opts.priority !== undefined)
          invalidConfig('acquire(options).priority', 'cannot be combined with intent (roles choose the set)');
        if (opts.intent === 'write') {
          const set = this.roleSet(DbRole.Primary);
          cands = set.cands;
          policy = set.policy;
        } else if (opts.intent === 'read') {
          readSet = this.roleSet(DbRole.Replica);
          this.read.maxLagMs = opts.maxLagMs === undefined ? this.maxLagMs : checkLag(opts.maxLagMs, 'acquire(options).maxLagMs');
          this.read.setMinLsn(opts.minLsn);
        } else {
          invalidConfig('acquire(options).intent', 'must be "read" or "write"', opts.intent);
        }
      } else if (opts.maxLagMs !== undefined || opts.minLsn !== undefined) {
        invalidConfig(`acquire(options).${opts.minLsn !== undefined ? 'minLsn' : 'maxLagMs'}`, 'applies only with intent: "read"');
      } else if (opts.priority !== undefined) {
        const tier = this.tier(opts.priority);
        cands = tier.cands;
        policy = tier.policy;
      }
      const ex = opts.exclude;
      if (ex !== undefined) {
        if (ex instanceof Set) {
          if (ex.size > 0) this.blockIds(ex);
        } else if (Array.isArray(ex)) {
          if (ex.length > 0) this.blockIds(ex);
        } else {
          invalidConfig('acquire(options).exclude', 'must be a Set or an array of backend ids', ex);
        }
      }
    }
    try {
      if (readSet !== undefined) return this.takeRead(readSet, kind, retry);
      if (cands.length === 0) {
        // Emptied by changes published while the view was being built (its
        // blob older than the tags it read): rebuild rather than refuse.
        if (retry !== NO_RETRY && this.table.epochs.change() !== this.epoch) return STALE;
        if (opts?.intent === 'write') this.throwNoRole('write', 'no backend is a known primary');
        this.throwNone(cands);
      }
      // Room in the book before anything is counted in the table.
      this.book.reserve();
      return this.take(cands, policy, kind, retry, 0);
    } catch (err) {
      // A policy refuses with its own NoEligibleCandidates once every member is blocked; when a share refused one, say so.
      if (this.atShare && err instanceof PoiseError && err.code === 'NoEligibleCandidates') this.throwAtShare(cands);
      throw err;
    } finally {
      if (this.nBlocked > 0) this.unblockAll();
    }
  }

  /**
   * The membership moved while an acquire was drawing (a drawn slot changed
   * generation or state, or the view came out empty): rebuild the view and
   * draw again, a bounded number of times, rather than fail a request
   * because of a change that is published or being published.
   *
   * TAG_MOVED means the slot's tag changed but the epoch has not moved: the
   * owner (another thread) is between its tag stores and its epoch bump.
   * Refusing now would fail the request on a change it is about to
   * announce, so wait for the bump with `Atomics.wait` on the epoch word
   * (the owner notifies after bumping) — at most `publishWaitMs` (5 ms) in all
   * per acquire; after that, draws refuse as they always did. Never spins:
   * every round either sleeps or rebuilds, and rounds are bounded.
   */
  private acquireAfterStale(opts: AcquireOptions | undefined, code: number): number {
    let waitedMs = 0;
    for (let round = 1; ; round++) {
      if (code === TAG_MOVED) {
        const t0 = performance.now();
        this.table.epochs.waitForChange(this.epoch, this.publishWaitMs - waitedMs);
        waitedMs += performance.now() - t0;
      }
      const retry = round >= MAX_STALE_ROUNDS ? NO_RETRY : waitedMs < this.publishWaitMs ? RETRY_WAIT : RETRY_STALE;
      code = this.tryAcquire(opts, retry);
      if (code >= 0) return code;
    }
  }

  /**
   * Draws from `cands` until a slot takes the lease; returns its handle, or
   * (only when `retry` allows) STALE when a refusal coincided with a
   * published change, so the caller rebuilds its view and draws again, or
   * TAG_MOVED when the slot's tag no longer matches the view but the epoch
   * has not moved yet, so the caller waits for the publication first.
   */
  private take(cands: SlotCandidate[], policy: Policy<SlotCandidate>, kind: LeaseKindCode, retry: RetryMode, draws: number): number {
    const t = this.table;
    const leases = t.leases;
    let behind = 0;
    for (let attempt = 0; ; attempt++) {
      let c = cands[policy.pick(cands, this.ctx)]!;
      if (c.blocked) c = this.fallback(cands);
      // A read (draws > 0): a replica behind the read's bounds is blocked for this acquire and another drawn (role-sets.ts).
      if (draws > 0 && !this.read.fresh(t.db, c.slot)) {
        this.block(c);
        if (++behind >= draws) return LAGGING;
        continue;
      }
      const count = leases.up(c.slot, kind, this.row);
      const tag = t.tags.tag(c.slot);
      const state = tag & 7;
      // The lease stands only if, after our increment, the slot still holds
      // this generation in a leasable state: the owner changes the tag before
      // it reads the counters to reuse a slot, so either it sees our lease or
      // we see its new tag (both SC; slot-tags.ts). The cap is checked on the
      // count our own increment returned: of two threads racing for the last
      // unit, the later add sees both, so the cap is never exceeded (at worst
      // both back off).
      // An unavailable slot is leased only when priority panic chose it (the layer plans over every member).
      const tagOk = tag >>> 3 === c.generation && (state === SlotState.Ready || state === SlotState.Unavailable);
      // The fleet connection budget (load/connection-budget.ts): this
      // process's share, checked on the same returned count, so it is exact
      // across threads too (0 = no budget; the zero share is −1).
      const share = kind === LeaseKind.Connection ? t.budget.word(c.slot) : 0;
      const overShare = share !== 0 && count > share;
      if (tagOk && (c.maxInflight === 0 || count <= c.maxInflight) && !overShare) {
        // The pick counter is statistics: batch it (one shared add per 64 picks, and the timer).
        if (++c.unflushedPicks === PICK_BATCH) this.flushPick(c);
        return this.book.openLease(c, kind);
      }
      leases.down(c.slot, kind, this.row);
      if (overShare && tagOk) {
        t.budget.refused(c.slot);
        this.atShare = true;
      }
      if (retry !== NO_RETRY) {
        if (t.epochs.change() !== this.epoch) return STALE;
        // Only a tag change is a publication in progress; a full slot (maxInflight) is not.
        if (!tagOk && retry === RETRY_WAIT) return TAG_MOVED;
      }
      this.block(c);
      if (attempt >= cands.length) this.throwNone(cands);
    }
  }

  /**
   * A read: a fresh replica (role-sets.ts), else the primary set, or
   * `ReplicaLag` when the router refuses stale reads or no primary is known.
   */
  private takeRead(replicas: RoleSet, kind: LeaseKindCode, retry: RetryMode): number {
    this.book.reserve();
    const draws = Math.min(replicas.eligible, READ_DRAWS);
    if (draws > 0) {
      let code: number;
      try {
        code = this.take(replicas.cands, replicas.policy, kind, retry, draws);
      } catch (err) {
        // Every replica blocked (excluded, behind, at maxInflight) before the draws ran out: none qualifies.
        if (!(err instanceof PoiseError) || err.code !== 'NoEligibleCandidates') throw err;
        code = LAGGING;
      }
      if (code !== LAGGING) return code;
    } else if (retry !== NO_RETRY && replicas.cands.length === 0 && this.table.epochs.change() !== this.epoch) {
      return STALE;
    }
    if (this.readFallback === 'refuse')
      this.throwNoRole('read', `no replica within maxLagMs ${this.read.maxLagMs}${this.read.hasMin ? ' at minLsn' : ''}`);
    const primaries = this.roleSet(DbRole.Primary);
    if (primaries.cands.length === 0) this.throwNoRole('read', 'no replica qualifies and no backend is a known primary');
    return this.take(primaries.cands, primaries.policy, kind, retry, 0);
  }

  private throwNoRole(intent: 'read' | 'write', why: string): never {
    if (this.candidates.all.length === 0) throw new PoiseError('Empty', 'acquire: the membership has no backends');
    if (intent === 'write') throw new PoiseError('NoEligibleCandidates', `acquire({ intent: 'write' }): ${why}`);
    throw new PoiseError('ReplicaLag', `acquire({ intent: 'read' }): ${why}`);
  }

  private flushPick(c: SlotCandidate): void {
    flushStats(this.table, c);
  }

  /**
   * Stops new acquires (open leases can still be released) and flushes the
   * batched pick counts. The thread's row stays claimed until the thread exits.
   */
  close(): void {
    this.shut = true;
    clearInterval(this.flushTimer);
    this.flushPicks();
    this.gate?.routerClosed();
  }

  /**
   * The connection leases this process holds on backend `slot` above its
   * fleet connection budget share (0 without a budget, or within it): what
   * routed sockets idle on it hand back (outbound/hand-back.ts).
   * @internal
   */
  overShare(slot: number): number {
    const w = this.table.budget.word(slot);
    return w === 0 ? 0 : Math.max(0, this.table.connections(slot) - Math.max(w, 0));
  }

  /** Adds this router's batched picks and outcomes to the table's counters (also done at least once a second). */
  flushPicks(): void {
    this.candidates.flushPicks();
  }

  /**
   * Records backend `slot`'s own load report (ORCA: utilization, queries/s,
   * errors/s; the HTTP dispatcher reads it from a response header), stamped
   * with this router's clock, for the owner's A58 weights. The caller holds
   * a lease on the slot. False when another thread was recording the same
   * backend's report at that instant (load/backend-load.ts). @internal
   */
  reportLoad(slot: number, utilization: number, qps: number, eps: number): boolean {
    return this.table.reported.report(slot, utilization, qps, eps, this.now());
  }

  // --- view --------------------------------------------------------------------

  /** Shared-clock ms modulo 2^30: the ticker's word, or the injected clock. */
  private now(): number {
    // One plain load while the ticker is awake (clock.ts): at worst a
    // millisecond old, which is the clock's resolution anyway.
    return this.customClock === undefined ? this.clockWords.now() : wrapMs(this.customClock());
  }

  /** Rebuilds the candidate view (a new array, so policies re-prepare). */
  private rebuild(): void {
    // Read the epoch first (SC): a change that lands during the rebuild moves
    // it past the value recorded here, so the next acquire rebuilds again.
    const epoch = this.table.epochs.change();
    const now = this.now();
    const cv = this.candidates;
    cv.build(now);
    this.view = cv.members;
    let capacity = 0;
    const budget = this.table.budget;
    const byConnections = this.defaultKind === LeaseKind.Connection;
    for (const c of cv.members) {
      if (!c.eligible) continue;
      // A connection router's capacity is also capped by the process's budget share (the owner bumps the health epoch when a share moves).
      const share = byConnections ? budget.share(c.slot) : undefined;
      const cap = c.maxInflight === 0 ? Number.POSITIVE_INFINITY : c.maxInflight;
      capacity += share === undefined ? cap : Math.min(cap, share);
    }
    this.eligibleCapacity = capacity;
    this.tiers = new Map();
    this.roleSets[DbRole.Primary] = undefined;
    this.roleSets[DbRole.Replica] = undefined;
    prepareQuietly(this.policy, this.view);
    // The next rebuild the clock calls for: the soonest ejection's end, or the next step of a slow-start ramp.
    const next = cv.rampStepMs > 0 && (cv.soonestExpiryMs === 0 || cv.rampStepMs < cv.soonestExpiryMs) ? cv.rampStepMs : cv.soonestExpiryMs;
    this.hasExpiry = next > 0;
    this.expiryAt = wrapMs(now + next);
    this.epoch = epoch;
  }

  private tier(priority: number): Tier {
    let tier = this.tiers.get(priority);
    if (tier === undefined) {
      integerIn(priority, 'acquire(options).priority', 0);
      let policy = this.tierPolicies.get(priority);
      if (policy === undefined) {
        policy = this.setup.create(this.seed === undefined ? undefined : deriveSeed(this.seed, 3 + priority), this.env);
        this.tierPolicies.set(priority, policy);
      }
      tier = { cands: this.view.filter((c) => c.priority === priority), policy };
      prepareQuietly(policy, tier.cands);
      this.tiers.set(priority, tier);
    }
    return tier;
  }

  /**
   * The set of role `role` for the view in force: its members as the view
   * was built (a role change bumps the health epoch, so it rebuilds), with
   * the role's own policy prepared on them. Built at its first use after a
   * rebuild (off the steady-state pick path).
   */
  private roleSet(role: DbRoleCode): RoleSet {
    let set = this.roleSets[role];
    if (set === undefined) {
      let policy = this.rolePolicies[role];
      if (policy === undefined) {
        policy = this.setup.create(this.seed === undefined ? undefined : deriveSeed(this.seed, -role), this.env);
        this.rolePolicies[role] = policy;
      }
      const db = this.table.db;
      const cands = this.view.filter((c) => db.role(c.slot) === role);
      let eligible = 0;
      for (const c of cands) if (c.eligible) eligible++;
      set = { cands, policy, eligible };
      prepareQuietly(policy, cands);
      this.roleSets[role] = set;
    }
    return set;
  }

  // --- exclusion -----------------------------------------------------------------

  private block(c: SlotCandidate): void {
    if (c.blocked) return;
    c.blocked = true;
    this.blocked[this.nBlocked++] = c;
  }

  private blockIds(ids: ReadonlySet<string> | readonly string[]): void {
    ids.forEach(this.blockId, this);
  }

  private blockId(id: string): void {
    const c = this.candidates.byId.get(id);
    if (c !== undefined) this.block(c);
  }

  private unblockAll(): void {
    for (let k = 0; k < this.nBlocked; k++) this.blocked[k]!.blocked = false;
    this.nBlocked = 0;
  }

  /** When a prepared policy returned a blocked member: the first usable one from a random start. */
  private fallback(cands: SlotCandidate[]): SlotCandidate {
    const n = cands.length;
    const start = this.rng.below(n);
    for (let k = 0; k < n; k++) {
      const c = cands[(start + k) % n]!;
      if (c.isEligible()) return c;
    }
    for (let k = 0; k < n; k++) {
      const c = cands[(start + k) % n]!;
      if (c.isPanicEligible()) return c;
    }
    return this.throwNone(cands);
  }

  private throwAtShare(cands: SlotCandidate[]): never {
    throw new PoiseError(
      'Overloaded',
      `acquire: none of the ${cands.length} candidates may take a connection lease: this process holds its whole connection budget share on those it tried`,
    );
  }

  private throwNone(cands: SlotCandidate[]): never {
    if (this.candidates.all.length === 0) throw new PoiseError('Empty', 'acquire: the membership has no backends');
    if (this.atShare) this.throwAtShare(cands);
    throw new PoiseError(
      'NoEligibleCandidates',
      `acquire: none of the ${cands.length} candidates may take a lease (draining, unavailable, excluded, ejected or at maxInflight)`,
    );
  }
}
