/**
 * Router: chooses a backend and takes a lease on it, in any thread. That is
 * its one job — it asks which candidate set the acquire names (the whole
 * view, a failover tier or a database role; candidate-sets.ts) and draws
 * from it with that set's policy until a slot takes the lease. Around it,
 * each in its own module: the options' reader (acquire-options.ts), the
 * wait for a publication in progress (publication-wait.ts), what is written
 * after the pick (feedback.ts, which the lease records into: release,
 * samples, passive health, load reports), what admission reads of the pool
 * (pool-gauge.ts) and the gate's one-method seam (admission-hook.ts).
 *
 * Each router owns its policies and its random streams, seeded from the OS
 * in the router's own thread, and reads load only from the shared
 * LoadTable — no global minimum is ever computed. It keeps a prepared
 * candidate view (eligible slots, with the policies' tables built on them)
 * and rebuilds it only when the table's change epoch moves (one plain load
 * per acquire) or an ejection it knows of expires. The view is built off
 * the request path by candidate-view.ts; this file is the pick path.
 */
import { threadId } from 'node:worker_threads';
import { PoiseError } from '../core/errors.js';
import type { ResolvedBackendSpec } from '../core/spec.js';
import { Rng } from '../core/rng.js';
import { elapsedMs, wrapMs } from '../core/time.js';
import { AdmissionRegion } from '../load/admission-region.js';
import { DbRole } from '../load/db-state.js';
import { LeaseKind, PoolTotal, type LeaseKindCode } from '../load/leases.js';
import { LoadTable } from '../load/load-table.js';
import { SlotState, tagGeneration, tagState } from '../load/slot-tags.js';
import type { PickContext, Policy } from '../policy/types.js';
import { AcquireRequest, Intent, type AcquireAsyncOptions, type AcquireOptions, type LeaseKindName } from './acquire-options.js';
import { AdmissionSeam, type AdmissionHook } from './admission-hook.js';
import { CandidateView, flushStats } from './candidate-view.js';
import { CandidateSets, SeedSalt, deriveSeed, type CandidateSet } from './candidate-sets.js';
import { ClockWords, type Clock } from './clock.js';
import { Exclusions } from './exclusions.js';
import { Feedback } from './feedback.js';
import { ejectionBackoff } from './health.js';
import { Lease, type Outcome } from './lease.js';
import { LeaseBook } from './lease-book.js';
import { KEYED_POLICY_NAMES, type PolicyName } from './policies.js';
import { PoolGauge, RowAdmission, poolCapacity } from './pool-gauge.js';
import { PublishWait, Retry, STALE, TAG_MOVED, type RetryMode } from './publication-wait.js';
import { refuseAtShare, refuseNoRole, refuseNone } from './refusals.js';
import { READ_DRAWS, type ReadBounds, type ReadFallback } from './role-sets.js';
import { SharedRetryBudget } from './retry-budget.js';
import { checkAttachment, readRouterOptions, type RouterAttachment, type RouterOptions } from './router-options.js';
import { LoadEnv, type SlotCandidate } from './slot-candidate.js';

export type { PolicyName } from './policies.js';
export type { Outcome } from './lease.js';
export type { AcquireAsyncOptions, AcquireOptions, LeaseKindName } from './acquire-options.js';
export type { AdmissionHook } from './admission-hook.js';
export type { RouterAttachment, RouterOptions } from './router-options.js';

const PICK_BATCH = 64;
/** take() result: a read found no replica fresh enough (see role-sets.ts). */
const LAGGING = -3;

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
   * (capacity, load by kind) and waits on (the release and close signals).
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
  private readonly rng: Rng;
  private readonly clockWords: ClockWords;
  private readonly customClock: Clock | undefined;
  private readonly env: LoadEnv;
  private readonly timed: boolean;
  private readonly defaultKind: LeaseKindCode;
  private readonly maxLagMs: number;
  private readonly readFallback: ReadFallback;
  private readonly book = new LeaseBook();
  private readonly feedback: Feedback;
  private readonly ctx: PickContext = { key: undefined };
  private readonly candidates: CandidateView;
  /** The sets acquires draw from (the whole view, tiers, roles), prepared per view. */
  private readonly sets: CandidateSets;
  /** The acquire being read (one per router, refilled per call: no allocation). */
  private readonly req = new AcquireRequest();
  /** `req.bounds`: the read in progress's lag and LSN bounds. */
  private readonly bounds: ReadBounds;
  private readonly publish: PublishWait;
  /** The members the acquire in progress ruled out. */
  private readonly excl: Exclusions;
  private readonly seam: AdmissionSeam;
  /** The change epoch the view was built at. */
  private epoch = -1;
  private hasExpiry = false;
  private expiryAt = 0;
  private shut = false;
  /** The current take() refused a connection lease at this process's budget share (then its refusal is `Overloaded`). */
  private atShare = false;
  /** Flushes the batched pick counts at least once a second, so a lightly used router's picks show up. */
  private readonly flushTimer: ReturnType<typeof setInterval>;

  private constructor(table: LoadTable, clock: SharedArrayBuffer, options: RouterOptions) {
    const o = readRouterOptions(options);
    this.table = table;
    this.policyName = o.policyName;
    this.maxLagMs = o.maxLagMs;
    this.readFallback = o.readFallback;
    this.timed = o.timed;
    this.defaultKind = o.defaultKind;
    // Seeds are drawn here, in the router's own thread (or derived from a replay seed).
    this.rng = new Rng(o.seed === undefined ? undefined : deriveSeed(o.seed, SeedSalt.Router));
    const backoff = ejectionBackoff(o.ejection, this.rng);
    this.env = new LoadEnv(table, o.setup.metric);
    this.sets = new CandidateSets(o.setup, this.env, o.seed, table.db);
    this.bounds = this.req.bounds;
    this.clockWords = new ClockWords(clock);
    this.customClock = o.clock;
    this.publish = new PublishWait(table.epochs, o.publishWaitMs);
    this.candidates = new CandidateView(table, this.env, o.logger, KEYED_POLICY_NAMES.includes(this.policyName));
    this.excl = new Exclusions(this.candidates.byId, this.rng);
    this.row = table.leases.claimRow(threadId);
    this.env.pool = new PoolTotal(table.leases, table.words, table.layout, this.row);
    this.gauge = new PoolGauge(
      table.leases,
      table.budget,
      () => this.refreshIfDue(),
      this.defaultKind === LeaseKind.Connection ? 'connection' : 'request',
      new RowAdmission(table.admission, this.row, AdmissionRegion.BANDS),
    );
    this.retryBudget = new SharedRetryBudget(table.retries, () => this.now());
    this.feedback = new Feedback(table, this.row, this.book, this.gauge, () => this.now(), o.ejection, backoff, o.logger);
    this.seam = new AdmissionSeam(
      { acquire: (opts) => this.acquire(opts), closed: () => this.shut, members: () => this.members() },
      table.epochs,
      table.verdicts,
    );
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
    checkAttachment(attachment);
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
    return this.seam.acquireAsync(opts);
  }

  /**
   * Attaches an admission gate; `AdmissionGate`'s constructor calls it.
   * Throws `InvalidConfig` when one is already attached. The one seam left
   * between router and gate (admission-hook.ts says why).
   * @internal
   */
  attachAdmission(hook: AdmissionHook): void {
    this.seam.attach(hook);
  }

  /**
   * The allocation-free form of {@link acquire}: returns a lease handle (a
   * small integer) for {@link releaseHandle}. The benchmark's zero-allocation
   * path; applications usually prefer `acquire()`.
   */
  acquireHandle(opts?: AcquireOptions): number {
    if (this.shut) throw new PoiseError('Closed', 'acquire: the router is closed');
    const handle = this.tryAcquire(opts, Retry.Wait);
    return handle >= 0 ? handle : this.acquireAfterStale(opts, handle);
  }

  /** Returns a lease taken by {@link acquireHandle} (see `Lease.release`); false when the handle was already released. */
  /**
   * From now on this router's request releases with a latency feed the
   * backend's shared latency histogram (what `Lease.latencyQuantileMs`
   * reads). The HTTP dispatcher calls it when it hedges on the adaptive
   * delay; a router nobody reads quantiles through skips those writes.
   * @internal
   */
  recordLatencyQuantiles(): void {
    this.feedback.recordsLatencies = true;
  }

  releaseHandle(handle: number, outcome: Outcome, latencyMs?: number, connectMs?: number): boolean {
    return this.feedback.release(handle, outcome, latencyMs, connectMs);
  }

  /**
   * One draw over the current view (rebuilt first if an epoch moved), from
   * the candidate set the options name. Returns a handle, or STALE /
   * TAG_MOVED when the membership moved under the draw and `retry` allows
   * it (see {@link take}). Kept apart from the rare retry loop so that the
   * common path stays small enough for V8 to inline the policy and load()
   * into it (which keeps their numbers unboxed: 0 bytes per acquire).
   */
  private tryAcquire(opts: AcquireOptions | undefined, retry: RetryMode): number {
    // One plain load per acquire (epochs.ts, changeHint: a stale read costs
    // at most one draw from the old view, which the tag check below makes
    // safe). The clock is read only when something needs it: a timed
    // metric's decay, or a known ejection's expiry.
    if (this.table.epochs.changeHint() !== this.epoch || (this.hasExpiry && elapsedMs(this.now(), this.expiryAt) >= 0)) this.rebuild();
    if (this.timed) this.env.now = this.now();
    this.atShare = false;
    const req = this.req;
    req.read(opts, this.defaultKind, this.maxLagMs);
    this.ctx.key = req.key;
    // Which set: chosen (and prepared at its first use in this view) before the exclusions mark members.
    const set =
      req.intent === Intent.Read
        ? this.sets.role(DbRole.Replica)
        : req.intent === Intent.Write
          ? this.sets.role(DbRole.Primary)
          : req.priority >= 0
            ? this.sets.tier(req.priority)
            : this.sets.all;
    if (req.exclude !== undefined) this.excl.blockIds(req.exclude);
    const cands = set.cands;
    try {
      if (req.intent === Intent.Read) return this.takeRead(set, req.kind, retry);
      if (cands.length === 0) {
        // Emptied by changes published while the view was being built (its
        // blob older than the tags it read): rebuild rather than refuse.
        if (retry !== Retry.No && this.table.epochs.change() !== this.epoch) return STALE;
        if (req.intent === Intent.Write) refuseNoRole(this.candidates.all.length, 'write', 'no backend is a known primary');
        refuseNone(this.candidates.all.length, cands.length, this.atShare);
      }
      // Room in the book before anything is counted in the table.
      this.book.reserve();
      return this.take(cands, set.policy, req.kind, retry, 0);
    } catch (err) {
      // A policy refuses with its own NoEligibleCandidates once every member is blocked; when a share refused one, say so.
      if (this.atShare && err instanceof PoiseError && err.code === 'NoEligibleCandidates') refuseAtShare(cands.length);
      throw err;
    } finally {
      if (this.excl.count > 0) this.excl.clear();
    }
  }

  /**
   * The membership moved while an acquire was drawing (a drawn slot changed
   * generation or state, or the view came out empty): rebuild the view and
   * draw again, a bounded number of times, waiting for a publication in
   * progress when the draw saw one (TAG_MOVED; publication-wait.ts) rather
   * than fail a request because of a change that is published or being
   * published.
   */
  private acquireAfterStale(opts: AcquireOptions | undefined, code: number): number {
    const wait = this.publish;
    wait.begin();
    for (let round = 1; ; round++) {
      if (code === TAG_MOVED) wait.sleep(this.epoch);
      code = this.tryAcquire(opts, wait.mode(round));
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
      if (c.blocked) c = this.excl.fallback(cands) ?? refuseNone(this.candidates.all.length, cands.length, this.atShare);
      // A read (draws > 0): a replica behind the read's bounds is blocked for this acquire and another drawn (role-sets.ts).
      if (draws > 0 && !this.bounds.fresh(t.db, c.slot)) {
        this.excl.block(c);
        if (++behind >= draws) return LAGGING;
        continue;
      }
      const count = leases.up(c.slot, kind, this.row);
      const tag = t.tags.tag(c.slot);
      const state = tagState(tag);
      // The lease stands only if, after our increment, the slot still holds
      // this generation in a leasable state: the owner changes the tag before
      // it reads the counters to reuse a slot, so either it sees our lease or
      // we see its new tag (both SC; slot-tags.ts). The cap is checked on the
      // count our own increment returned: of two threads racing for the last
      // unit, the later add sees both, so the cap is never exceeded (at worst
      // both back off).
      // An unavailable slot is leased only when priority panic chose it (the layer plans over every member).
      const tagOk = tagGeneration(tag) === c.generation && (state === SlotState.Ready || state === SlotState.Unavailable);
      // The fleet connection budget (load/connection-budget.ts): this
      // process's share, checked on the same returned count, so it is exact
      // across threads too (0 = no budget; the zero share is −1).
      const share = kind === LeaseKind.Connection ? t.budget.word(c.slot) : 0;
      const overShare = share !== 0 && count > share;
      if (tagOk && (c.maxInflight === 0 || count <= c.maxInflight) && !overShare) {
        // The pick counter is statistics: batch it (one shared add per 64 picks, and the timer).
        if (++c.unflushedPicks === PICK_BATCH) flushStats(t, c);
        return this.book.openLease(c, kind);
      }
      leases.down(c.slot, kind, this.row);
      if (overShare && tagOk) {
        t.budget.refused(c.slot);
        this.atShare = true;
      }
      if (retry !== Retry.No) {
        if (t.epochs.change() !== this.epoch) return STALE;
        // Only a tag change is a publication in progress; a full slot (maxInflight) is not.
        if (!tagOk && retry === Retry.Wait) return TAG_MOVED;
      }
      this.excl.block(c);
      if (attempt >= cands.length) refuseNone(this.candidates.all.length, cands.length, this.atShare);
    }
  }

  /**
   * A read: a fresh replica (role-sets.ts), else the primary set, or
   * `ReplicaLag` when the router refuses stale reads or no primary is known.
   */
  private takeRead(replicas: CandidateSet, kind: LeaseKindCode, retry: RetryMode): number {
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
    } else if (retry !== Retry.No && replicas.cands.length === 0 && this.table.epochs.change() !== this.epoch) {
      return STALE;
    }
    if (this.readFallback === 'refuse')
      refuseNoRole(
        this.candidates.all.length,
        'read',
        `no replica within maxLagMs ${this.bounds.maxLagMs}${this.bounds.hasMin ? ' at minLsn' : ''}`,
      );
    const primaries = this.sets.role(DbRole.Primary);
    if (primaries.cands.length === 0)
      refuseNoRole(this.candidates.all.length, 'read', 'no replica qualifies and no backend is a known primary');
    return this.take(primaries.cands, primaries.policy, kind, retry, 0);
  }

  /**
   * Stops new acquires (open leases can still be released) and flushes the
   * batched pick counts; an attached gate learns of it through the gauge.
   * The thread's row stays claimed until the thread exits.
   */
  close(): void {
    this.shut = true;
    clearInterval(this.flushTimer);
    this.flushPicks();
    this.gauge.closed();
  }

  /** {@link PoolGauge.overShare}: what routed sockets idle on backend `slot` hand back (outbound/hand-back.ts). @internal */
  overShare(slot: number): number {
    return this.gauge.overShare(slot);
  }

  /** Adds this router's batched picks and outcomes to the table's counters (also done at least once a second). */
  flushPicks(): void {
    this.candidates.flushPicks();
  }

  // --- view --------------------------------------------------------------------

  /** Shared-clock ms modulo 2^30: the ticker's word, or the injected clock. */
  private now(): number {
    // One plain load while the ticker is awake (clock.ts): at worst a
    // millisecond old, which is the clock's resolution anyway.
    return this.customClock === undefined ? this.clockWords.now() : wrapMs(this.customClock());
  }

  /** Rebuilds the view when an epoch moved or a known expiry passed (what the gauge's capacity reads first). */
  private refreshIfDue(): void {
    if (this.table.epochs.change() !== this.epoch || (this.hasExpiry && elapsedMs(this.now(), this.expiryAt) >= 0)) this.rebuild();
  }

  /** The members of the view in force, brought up to date first (the first-verdict wait's scan). */
  private members(): readonly SlotCandidate[] {
    this.refresh();
    return this.candidates.all;
  }

  /** Rebuilds the candidate view (a new array, so policies re-prepare), the pool's capacity, and resets the candidate sets. */
  private rebuild(): void {
    // Read the epoch first (SC): a change that lands during the rebuild moves
    // it past the value recorded here, so the next acquire rebuilds again.
    const epoch = this.table.epochs.change();
    const now = this.now();
    const cv = this.candidates;
    cv.build(now);
    this.gauge.setCapacity(poolCapacity(cv.members, this.table.budget, this.defaultKind === LeaseKind.Connection));
    this.sets.reset(cv.members);
    // The next rebuild the clock calls for: the soonest ejection's end, or the next step of a slow-start ramp.
    const next = cv.rampStepMs > 0 && (cv.soonestExpiryMs === 0 || cv.rampStepMs < cv.soonestExpiryMs) ? cv.rampStepMs : cv.soonestExpiryMs;
    this.hasExpiry = next > 0;
    this.expiryAt = wrapMs(now + next);
    this.epoch = epoch;
  }
}
