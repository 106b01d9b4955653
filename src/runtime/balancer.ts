/**
 * Balancer: the owner of a LoadTable. It takes membership snapshots,
 * validates them, assigns each backend a stable slot, writes the table,
 * publishes the spec blob and moves the epochs that every router checks.
 *
 * Slots are stable per id while it stays. A removed backend becomes a
 * tombstone that keeps counting its live leases; its slot is reused only
 * once they reach zero, with the generation bumped, so a stale lease can
 * never touch the new occupant. An id that comes back is a new occupant
 * (slot-allocation.ts): its state starts afresh. Order of publication: slot words and tags, then the spec blob,
 * then the membership epoch — a router that sees the new epoch sees both.
 */
import { EventEmitter } from 'node:events';
import type { Worker } from 'node:worker_threads';
import { PoiseError, describe, invalidConfig, checkOptionKeys } from '../core/errors.js';
import {
  resolveBackendSpecs,
  type BackendSpec,
  type MembershipOutcome,
  type MembershipSnapshot,
  type ResolvedBackendSpec,
} from '../core/spec.js';
import type { HealthStats } from '../health/stats.js';
import { HealthSupervisor, verdictSourcesOf } from '../health/supervisor.js';
import { HealthFlag, LAYOUT_VERSION, LoadTable } from '../load/load-table.js';
import { readOnlyView, type LoadTableView } from '../load/table-view.js';
import { reportedWeight } from './effective-weight.js';
import { defaultLogger, type Logger } from '../log.js';
import { clockReader, processClockBuffer, type Clock } from './clock.js';
import { Router, type RouterAttachment, type RouterOptions } from './router.js';
import { wrapMs } from '../core/time.js';
import { assignSlots, reserveSlots, type SlotInfo, type SlotMap } from './slot-allocation.js';
import { encodeBlobLines } from './spec-blob.js';
import { awaitingVerdicts, healthTargetsOf } from './live-slots.js';
import { readMembershipInput } from './membership-input.js';
import { writeSlots } from './slot-writes.js';
import type { ResolvedConnectionBudget } from './connection-budget-options.js';
import { blocksInForce, type ControlBlocks } from './control-blocks.js';
import type { BalancerOptions, ReclaimEvent } from './balancer-options.js';
import { waitForVerdicts, type ReadyOptions } from './ready.js';

export type { BalancerOptions, ReclaimEvent } from './balancer-options.js';
export type { ReadyOptions } from './ready.js';

/**
 * The owner of the shared load table.
 *
 * @example
 * const balancer = new Balancer({ capacity: 256 });
 * balancer.update([
 *   { id: 'db-1', address: '127.0.0.1:5432', weight: 2 },
 *   { id: 'db-2', address: '127.0.0.1:5433' },
 * ]);
 * const router = balancer.router();           // this thread
 * const attachment = balancer.attachment();   // for a worker: Router.attach(attachment)
 * balancer.on('reclaim', (e) => console.log(e.leases, 'leases reclaimed'));
 */
export class Balancer extends EventEmitter {
  /** The shared table, read-only: counts, estimates and slot stats (writes belong to the Balancer and its routers). */
  readonly table: LoadTableView;
  /** The owner side of the shared table, the one handle that writes. @internal */
  readonly ownerTable: LoadTable;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly customClock: boolean;
  private readonly clockBuffer: SharedArrayBuffer;
  private readonly slots: (SlotInfo | undefined)[];
  private readonly byId = new Map<string, number>();
  /** The two above, as slot allocation reads them. */
  private readonly slotMap: SlotMap;
  private readonly watched = new WeakSet<Worker>();
  /** Routers made by {@link router} in this thread, whose batched statistics a scrape or sweep flushes first. */
  private readonly localRouters = new Set<Router>();
  private ver = 0;
  /** The lineage of the membership in force: the last one a snapshot carried (see {@link Balancer.apply}). */
  private line: string | undefined;
  /** The cluster the last snapshot that named one named. */
  private clusterName: string | undefined;
  /** Whether any membership has been applied (a first snapshot may carry version 0). */
  private applied = false;
  private closed = false;
  /** The health workers (checker, agent, outlier detection, ORCA) and their targets: this owner never starts one itself. */
  private readonly supervisor: HealthSupervisor;
  /** The control blocks in force (control-blocks.ts: the option, or the last snapshot's block). */
  private blocks: ControlBlocks;
  /** Wall-clock ms (Date.now()) of the last membership applied; undefined before the first. */
  private changedAt: number | undefined;
  private reclaimEvents = 0;
  private reclaimedLeases = 0;

  /** Throws `InvalidConfig` naming a bad option. */
  constructor(opts: BalancerOptions = {}) {
    super();
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, [
      'capacity',
      'maxThreads',
      'specBytes',
      'tauMs',
      'initialMs',
      'logger',
      'clock',
      'layout',
      'health',
      'retryBudget',
      'slowStart',
      'connectionBudget',
    ]);
    this.blocks = blocksInForce(undefined, 'options', opts).blocks;
    // LoadTable.create throws InvalidConfig naming options.<field> itself.
    this.ownerTable = LoadTable.create({
      capacity: opts.capacity,
      maxThreads: opts.maxThreads,
      specBytes: opts.specBytes,
      tauMs: opts.tauMs,
      initialMs: opts.initialMs,
      layout: opts.layout,
    });
    this.table = readOnlyView(this.ownerTable, () => this.clock(), reportedWeight);
    if (opts.clock !== undefined && typeof opts.clock !== 'function')
      invalidConfig('options.clock', 'must be a function returning milliseconds', opts.clock);
    this.customClock = opts.clock !== undefined;
    this.clockBuffer = processClockBuffer();
    this.clock = opts.clock ?? clockReader(this.clockBuffer);
    this.log = opts.logger ?? defaultLogger();
    this.slots = new Array<SlotInfo | undefined>(this.table.capacity).fill(undefined);
    this.slotMap = { slots: this.slots, byId: this.byId };
    this.supervisor = new HealthSupervisor(this.ownerTable, this.log, {
      clock: this.clock,
      manualTime: this.customClock,
      beforeSweep: () => this.flushStats(),
    });
    this.supervisor.apply(this.blocks.health, []);
    this.ownerTable.retries.configure(this.blocks.retryBudget);
    this.ownerTable.slowStart.configure(this.blocks.slowStart);
  }

  /** The fleet connection budget's limit in force: the `connectionBudget` option or the last snapshot's block. @internal */
  get connectionBudget(): ResolvedConnectionBudget | undefined {
    return this.blocks.connectionBudget;
  }

  /** Membership version in force (0 before the first update). */
  get version(): number {
    return this.ver;
  }

  /** The lineage of the membership in force, when a snapshot carried one (the Redis control plane sets it). */
  get lineage(): string | undefined {
    return this.line;
  }

  /**
   * The cluster named by the membership in force: the last applied snapshot
   * that carried one (a membership document's `cluster`, a Redis source's
   * cluster); undefined when none did (an array, `StaticMembership` backends).
   */
  get cluster(): string | undefined {
    return this.clusterName;
  }

  /** Whether a membership has been applied (the first may be version 0, so `version` alone cannot tell). */
  get hasMembership(): boolean {
    return this.applied;
  }

  /** Wall-clock time (`Date.now()` ms) at which the membership in force was applied; undefined before the first. */
  get lastChangeAt(): number | undefined {
    return this.changedAt;
  }

  /** Exited threads reclaimed so far (`events`, one per `'reclaim'` event) and the leases they still held (`leases`). */
  reclaimStats(): { events: number; leases: number } {
    return { events: this.reclaimEvents, leases: this.reclaimedLeases };
  }

  /**
   * The process's retry budget as every thread drew on it: requests, retries
   * granted and refused since the table was made (each wraps at 2^32), the
   * retries it would grant now (undefined without a budget) and the processes
   * its floor is shared with (1 without a fleet budget).
   */
  retryBudgetStats(): { requests: number; allowed: number; refused: number; available: number | undefined; processes: number } {
    const r = this.ownerTable.retries;
    const config = r.config();
    return {
      ...r.totals(),
      available: config === undefined ? undefined : r.available(wrapMs(this.clock())),
      processes: config?.processes ?? 1,
    };
  }

  /**
   * Every slot the owner has used and not yet reused: live backends and
   * tombstones (`removed`), with the spec in force. A fresh array per call,
   * for the metrics collector (off the routing path). @internal
   */
  slotEntries(): { slot: number; id: string; removed: boolean; spec: ResolvedBackendSpec }[] {
    const out: { slot: number; id: string; removed: boolean; spec: ResolvedBackendSpec }[] = [];
    for (const [id, slot] of this.byId) {
      const info = this.slots[slot]!;
      out.push({ slot, id, removed: info.removed, spec: info.spec });
    }
    return out;
  }

  /**
   * Applies a membership; returns the version in force afterwards. Same
   * rules as {@link Balancer.apply}, which also tells whether it applied.
   */
  update(input: MembershipSnapshot | readonly BackendSpec[]): number {
    return this.apply(input).version;
  }

  /**
   * Applies a membership and says what happened. Versions:
   *
   * - An array gets version = previous + 1.
   * - A `{ version, backends }` snapshot is applied when its version is
   *   newer than the one in force; the very first membership is applied
   *   whatever its version (0 included).
   * - A snapshot whose `lineage` differs from the lineage in force (or that
   *   brings one when none is in force) is applied whatever its version:
   *   it comes from a new version line (Redis lost its data and was written
   *   again), and its versions are not comparable with the old line's.
   * - Otherwise it is ignored: `{ applied: false, reason: 'not-newer' }`.
   *
   * Every caller shares this one version space: a direct `update()` beside
   * a bound source moves the version the source's next snapshot must beat.
   *
   * Throws `PoiseError` (`InvalidConfig`, `InvalidWeight`,
   * `DuplicateIdentity`, `InconsistentTopology`) on bad input,
   * `CapacityExhausted` when the table has too few free slots, and `Closed`
   * after {@link Balancer.close}; the last good membership stays in force.
   */
  apply(input: MembershipSnapshot | readonly BackendSpec[]): MembershipOutcome {
    if (this.closed) throw new PoiseError('Closed', 'balancer: is closed; membership refused');
    const read = readMembershipInput(input, { version: this.ver, lineage: this.line, cluster: this.clusterName, applied: this.applied });
    if ('outcome' in read) {
      this.log.debug({ offered: read.outcome.offered, version: this.ver }, 'poise: membership ignored (not newer)');
      return read.outcome;
    }
    const { version, backends, lineage, cluster } = read;
    const specs = resolveBackendSpecs(backends, 'backends');
    // The blocks the snapshot carries replace those in force (control-blocks.ts), validated before anything is written.
    const { blocks, carried } = blocksInForce(this.blocks, 'membership', input);
    const keep = new Set(specs.map((s) => s.id));
    const t = this.ownerTable;
    // Plan and assign before writing anything, so a refusal leaves the table as it was.
    const reservation = reserveSlots(t, this.slotMap, specs);
    const assignment = assignSlots(this.slotMap, specs, reservation);
    const blob = encodeBlobLines(version, assignment.lines);
    if (blob.length > t.specs.capacityBytes) {
      reservation.rollback();
      throw new PoiseError(
        'CapacityExhausted',
        `backends: the membership's strings take ${blob.length} bytes, more than options.specBytes (${t.specs.capacityBytes})`,
        { field: 'backends' },
      );
    }

    // Apply: slot words and tags first (writeSlots), then the blob, then the epoch that announces both.
    // A new occupant awaits the first verdicts of the sources in force after this update (its health block, if any).
    const sources = carried.has('health') ? verdictSourcesOf(blocks.health) : this.supervisor.verdictSources();
    writeSlots(t, { slots: this.slots, byId: this.byId }, { specs, keep, reservation, assignment, sources }, this.clock());
    t.specs.publish(blob);
    const previous = this.ver;
    this.ver = version;
    this.line = lineage;
    this.clusterName = cluster;
    this.applied = true;
    this.changedAt = Date.now();
    const epoch = t.epochs.bumpMembership();
    this.log.info(
      { version, previous, backends: specs.length, epoch, ...(lineage === undefined ? {} : { lineage }) },
      'poise: membership applied',
    );
    this.blocks = blocks;
    // Health goes to the supervisor (which replaces its workers only when the block differs); the other blocks to the table.
    if (carried.has('health') || this.supervisor.running)
      this.supervisor.apply(carried.has('health') ? blocks.health : undefined, healthTargetsOf(this.slotMap));
    if (carried.has('retryBudget')) t.retries.configure(blocks.retryBudget);
    if (carried.has('slowStart')) t.slowStart.configure(blocks.slowStart);
    // For owner-side followers of the membership (the fleet connection budget leases shares for new backends).
    this.emit('membership', { version, previous });
    return { applied: true, version, previous };
  }

  /**
   * What another thread needs to attach a Router: plain structured-clonable
   * data for `workerData` or `postMessage`. Nothing needs a transfer list —
   * the table and the clock are SharedArrayBuffers, shared, not moved.
   */
  attachment(): RouterAttachment {
    return { buffer: this.ownerTable.buffer, layoutVersion: LAYOUT_VERSION, clock: this.clockBuffer };
  }

  /** A Router in this (owner) thread; it uses the Balancer's clock unless `opts.clock` is given. */
  router(opts: RouterOptions = {}): Router {
    const r = Router.attach(this.attachment(), {
      logger: this.log,
      ...(this.customClock ? { clock: this.clock } : {}),
      ...opts,
    });
    this.localRouters.add(r);
    return r;
  }

  /**
   * Adds the batched statistics (picks, released outcomes) of the routers
   * this Balancer made in its own thread to the table's counters, so a
   * scrape or an outlier sweep sees every pick and outcome made here up to
   * now. Routers in other threads flush at least once a second. @internal
   */
  flushStats(): void {
    for (const r of this.localRouters) {
      r.flushPicks();
      // A closed router with nothing open adds nothing more: forget it.
      if (r.closed && r.openLeases === 0) this.localRouters.delete(r);
    }
  }

  /**
   * Reclaims a worker's outstanding leases when it exits (crash,
   * `terminate()`, uncaught exception): on its `'exit'` event the owner
   * subtracts what the worker's attribution row still holds, so the counters
   * are exact again, and emits `'reclaim'`. Call it right after creating the
   * worker. `workerIndex` is only reported in the event.
   */
  watchWorker(worker: Worker, workerIndex?: number): void {
    if (this.watched.has(worker)) return;
    this.watched.add(worker);
    // threadId reads -1 once the thread is gone: capture it now.
    const tid = worker.threadId;
    if (typeof tid !== 'number' || tid < 0) invalidConfig('watchWorker(worker)', 'must be a running Worker', describe(worker));
    worker.once('exit', () => this.reclaim(tid, workerIndex));
  }

  /** Reclaims the leases of thread `threadId`, which must have exited. Returns the leases reclaimed. */
  reclaim(threadId: number, workerIndex?: number): number {
    const t0 = performance.now();
    const { leases, pending, uncertain } = this.ownerTable.reclaimRow(threadId);
    const event: ReclaimEvent = { threadId, workerIndex, leases, settled: pending, uncertain, ms: performance.now() - t0 };
    this.reclaimEvents++;
    this.reclaimedLeases += leases;
    if (leases > 0) this.log.warn(event, 'poise: reclaimed leases of an exited worker');
    if (uncertain > 0)
      this.log.error(event, 'poise: a dead worker left lease counters that could not be settled exactly (a slot kept moving)');
    this.emit('reclaim', event);
    return leases;
  }

  /** Refuses further updates and stops health checks and outlier sweeps. Routers keep working on the last membership. */
  close(): void {
    this.closed = true;
    this.supervisor.close();
    // A ready() in progress looks again (and rejects with Closed).
    this.ownerTable.epochs.wake();
  }

  /**
   * Health counters (checks, transitions, ejections) and each live
   * backend's health as this owner sees it: a fresh snapshot per call.
   */
  healthStats(): HealthStats {
    const now = this.clock();
    const backends: HealthStats['backends'] = [];
    for (const [id, slot] of this.byId) {
      const info = this.slots[slot]!;
      if (info.removed) continue;
      const state = this.supervisor.checkStateOf(id);
      backends.push({
        id,
        check: state?.check ?? 'unchecked',
        degraded: (this.ownerTable.health.health(slot) & (HealthFlag.CheckDegraded | HealthFlag.MemberDegraded)) !== 0,
        ejectedForMs: this.ownerTable.ejectedForMs(slot, now),
        outlierEjections: this.supervisor.ejectionsOf(id),
      });
    }
    return { counters: { ...this.supervisor.counters }, backends };
  }

  /**
   * One outlier-detection sweep now (the timer runs them every
   * `outlier.intervalMs`); returns the ids it ejected. For tests and tools
   * that drive time by hand; throws `InvalidConfig` when outlier detection is off.
   */
  sweepOutliers(): string[] {
    if (!this.supervisor.sweeps) invalidConfig('options.health.outlier', 'is not configured; nothing to sweep');
    return this.supervisor.sweepOutliers();
  }

  /**
   * Resolves once a membership is in force and every backend in it has its
   * first verdict from each health source configured: the active check (with
   * `roles: true`, its first result also sets the database role), the agent,
   * ORCA load polls (`source: 'endpoint'`; an injected clock polls only on
   * {@link pollLoadReports}). A first result counts whatever it says (a
   * failed check is a verdict: the role is then unknown). Without health
   * configuration it resolves as soon as a membership is applied.
   *
   * Membership changes: the backends that count are those of the membership
   * in force when it looks (at every change); a backend added later awaits
   * its own first verdict — a `ready()` called after the change waits for
   * it, one in progress takes it in, and a removed one stops counting. Routers
   * meanwhile route as before (a backend is up until a check says
   * otherwise); only `router.acquireAsync({ intent })` waits, when it would
   * fail for want of a role (docs/health.md, "Waiting for the first verdicts").
   *
   * Rejects with `NotReady` after `timeoutMs` (default 10 000), naming each
   * backend still waiting and for what, or with `Closed` when the Balancer closes.
   *
   * @example
   * balancer.update(backends);
   * await balancer.ready({ timeoutMs: 5000 }); // every backend checked once: the first write finds its primary
   */
  ready(opts: ReadyOptions = {}): Promise<void> {
    return waitForVerdicts(opts, {
      epochs: this.ownerTable.epochs,
      closed: () => this.closed,
      missing: () => (this.applied ? awaitingVerdicts(this.slotMap, this.ownerTable) : ['a membership (none applied yet)']),
    });
  }

  /**
   * Polls every backend's load endpoint once and applies the weights in
   * force (`health.orca`); with the shared clock this runs every
   * `intervalMs` on its own, with an injected clock only when called.
   * Resolves when the round is written.
   */
  async pollLoadReports(): Promise<void> {
    await this.supervisor.poll();
  }
}
