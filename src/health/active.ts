/**
 * Active health checks, run by the Balancer's owner thread on timers —
 * never in a routing path. HAProxy's state machine: a backend starts up;
 * `fall` consecutive failures take it down, `rise` consecutive passes bring
 * it back. The next check is due after `intervalMs` while steadily up,
 * `fastIntervalMs` while in transition, `unhealthyIntervalMs` while down,
 * each stretched by up to `jitterPercent` % from an OS-seeded stream so the
 * checks of many backends (and many processes) do not line up.
 *
 * A verdict lands in the slot's health word (`HealthFlag.Unhealthy`,
 * `HealthFlag.CheckDegraded`) followed by a health-epoch bump, so every
 * router in every thread rebuilds its view at its next acquire. Every
 * transition is logged once and counted.
 */
import { Rng } from '../core/rng.js';
import { backgroundTimers, type TimerSource } from '../core/timers.js';
import { HealthFlag, type LoadTable } from '../load/load-table.js';
import { tagGeneration } from '../load/slot-tags.js';
import { ReportFlag } from '../load/backend-load.js';
import type { Logger } from '../log.js';
import type { CheckTarget, CheckVerdict, ResolvedHealthCheck } from './config.js';
import { probe, type AgentReply, type DbReport } from './probes.js';
import { DbRole, dbRoleCode } from '../load/db-state.js';
import { VerdictSource } from '../load/verdicts.js';
import type { HealthCounters } from './stats.js';
import type { HealthTarget } from './targets.js';

const CHECK_BITS = HealthFlag.Unhealthy | HealthFlag.CheckDegraded;

interface Watch {
  target: HealthTarget;
  check: CheckTarget;
  up: boolean;
  /** Whether any check has completed. */
  checked: boolean;
  degraded: boolean;
  /** Consecutive passes while down / failures while up. */
  streak: number;
  timer: unknown;
  abort: AbortController | undefined;
  stopped: boolean;
}

/** The owner's active checker for one cluster. @internal */
export class ActiveChecker {
  private readonly watches = new Map<string, Watch>();
  private readonly rng = new Rng();
  private closed = false;

  constructor(
    private readonly table: LoadTable,
    readonly config: ResolvedHealthCheck,
    private readonly log: Logger,
    private readonly counters: HealthCounters,
    private readonly clock: () => number,
    /**
     * An agent beside the active check (`health.agent`, HAProxy's
     * `agent-check` next to `check`): its replies set the weight, drain /
     * maint / ready and the `AgentDown` bit (`down` until `up`); it runs no
     * rise / fall of its own, and an agent that cannot be reached or
     * answers nothing readable changes nothing (the active check tests
     * reachability).
     */
    private readonly beside = false,
    /** The checks' schedules and deadlines (unref'd real timers unless a test injects its own). */
    private readonly timers: TimerSource = backgroundTimers,
  ) {}

  /** The health bits this checker owns. */
  private get bits(): number {
    return this.beside ? HealthFlag.AgentDown : CHECK_BITS;
  }

  /** Starts checking new targets, stops removed ones; a target whose slot generation changed starts afresh. */
  sync(targets: readonly HealthTarget[]): void {
    if (this.closed) return;
    const keep = new Set<string>();
    for (const t of targets) {
      const key = `${t.slot}:${t.generation}`;
      keep.add(key);
      const w = this.watches.get(key);
      if (w !== undefined) {
        if (w.target.address === t.address) continue;
        this.stop(key, w);
      }
      const watch: Watch = {
        target: t,
        check: { id: t.id, host: t.host, port: t.port, address: t.address },
        up: true,
        checked: false,
        degraded: false,
        streak: 0,
        timer: undefined,
        abort: undefined,
        stopped: false,
      };
      this.watches.set(key, watch);
      this.table.verdicts.expect(t.slot, this.verdictBit);
      // HAProxy spreads the first checks over the interval; a new backend is
      // probed within its first jitter window rather than a whole interval later.
      this.schedule(watch, 1 + this.rng.float() * this.config.intervalMs * (this.config.jitterPercent / 100));
    }
    for (const [key, w] of this.watches) if (!keep.has(key)) this.stop(key, w);
  }

  /** The first-verdict bit this checker settles (load/verdicts.ts). */
  private get verdictBit(): number {
    return this.beside ? VerdictSource.Agent : VerdictSource.Check;
  }

  /** The watch's first result is in (or the watch stopped): settle its bit, and announce it to waiters. */
  private settle(w: Watch): void {
    const t = this.table;
    if (tagGeneration(t.tag(w.target.slot)) === w.target.generation && t.verdicts.settle(w.target.slot, this.verdictBit))
      t.epochs.bumpHealth();
  }

  /** The check's view of a backend, by id (`unchecked` before its first result). */
  stateOf(id: string): { check: 'up' | 'down' | 'unchecked'; degraded: boolean } | undefined {
    for (const w of this.watches.values()) {
      if (w.target.id === id) return { check: !w.checked ? 'unchecked' : w.up ? 'up' : 'down', degraded: w.degraded };
    }
    return undefined;
  }

  /** Stops every timer and aborts checks in flight; clears the check bits it set. */
  close(): void {
    this.closed = true;
    for (const [key, w] of this.watches) this.stop(key, w);
  }

  private stop(key: string, w: Watch): void {
    w.stopped = true;
    if (w.timer !== undefined) this.timers.clearTimeout(w.timer);
    w.abort?.abort();
    this.watches.delete(key);
    this.write(w, 0);
    this.settle(w);
    // What its agent said goes with the watch (a check of another kind reports nothing).
    if (this.config.kind === 'agent' && tagGeneration(this.table.tag(w.target.slot)) === w.target.generation) {
      const admin = this.table.reported.setAdmin(w.target.slot, 0);
      const weight = this.table.reported.setAgentWeight(w.target.slot, undefined);
      if (admin || weight) this.table.epochs.bumpHealth();
    }
    // A roles check's word returns to the spec's configured role when the check stops.
    if (this.config.roles && tagGeneration(this.table.tag(w.target.slot)) === w.target.generation) {
      if (this.table.db.setRole(w.target.slot, dbRoleCode(w.target.role))) this.table.epochs.bumpHealth();
    }
  }

  private schedule(w: Watch, ms: number): void {
    // Each watch has its own schedule: a backend whose check hangs never holds back another's.
    w.timer = this.timers.setTimeout(() => void this.run(w), ms);
  }

  private nextDelay(w: Watch): number {
    const c = this.config;
    const base = !w.up ? (w.streak > 0 ? c.fastIntervalMs : c.unhealthyIntervalMs) : w.streak > 0 ? c.fastIntervalMs : c.intervalMs;
    return base * (1 + (this.rng.float() * c.jitterPercent) / 100);
  }

  private async run(w: Watch): Promise<void> {
    w.timer = undefined;
    if (w.stopped) return;
    const abort = new AbortController();
    w.abort = abort;
    let timedOut = false;
    // One deadline from the start of the check (connect and every byte of the reply): a reply that drips is cut off like a silent one.
    const timeout = this.timers.setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, this.config.timeoutMs);
    let verdict: CheckVerdict;
    let reason: string | undefined;
    try {
      verdict = await Promise.race([
        probe(
          this.config,
          w.check,
          abort.signal,
          (reply) => this.agentReply(w, reply),
          (report) => this.dbReport(w, report),
        ),
        new Promise<never>((_, reject) => abort.signal.addEventListener('abort', () => reject(new Error('timed out')), { once: true })),
      ]);
    } catch (e) {
      verdict = 'unhealthy';
      reason = timedOut ? `timed out after ${this.config.timeoutMs} ms` : e instanceof Error ? e.message : String(e);
    } finally {
      this.timers.clearTimeout(timeout);
      w.abort = undefined;
    }
    if (w.stopped) return;
    if (!this.beside) {
      if (verdict === 'unhealthy' && this.config.roles) this.dbFailed(w);
      this.record(w, verdict, reason, timedOut);
    } else if (reason !== undefined)
      this.log.debug({ backend: w.target.id, address: w.target.address, reason }, 'poise: agent not read (nothing changes)');
    // Its first result, whatever it said, is in the table now (role, health bits, agent words).
    this.settle(w);
    // Beside the check the watch stays "up" with no streak: the agent's own interval, jittered.
    this.schedule(w, this.nextDelay(w));
  }

  /** Applies one check result to the state machine, the table, the log and the counters. */
  private record(w: Watch, verdict: CheckVerdict, reason: string | undefined, timedOut: boolean): void {
    const c = this.counters;
    const { id, address } = w.target;
    c.checks++;
    w.checked = true;
    const ok = verdict !== 'unhealthy';
    if (ok) c.checksPassed++;
    else {
      c.checksFailed++;
      if (timedOut) c.checksTimedOut++;
    }
    if (w.up) {
      w.streak = ok ? 0 : w.streak + 1;
      if (w.streak >= this.config.fall) {
        w.up = false;
        w.streak = 0;
        c.markedDown++;
        this.log.warn(
          { backend: id, address, check: this.config.kind, fall: this.config.fall, reason },
          'poise: backend down (active check)',
        );
      }
    } else {
      w.streak = ok ? w.streak + 1 : 0;
      if (w.streak >= this.config.rise) {
        w.up = true;
        w.streak = 0;
        c.markedUp++;
        // Back from a failed check: it ramps again (slow start, when configured; the generation is checked as in write()).
        if (tagGeneration(this.table.tag(w.target.slot)) === w.target.generation)
          this.table.slowStart.markEligible(w.target.slot, this.clock());
        this.log.info({ backend: id, address, check: this.config.kind, rise: this.config.rise }, 'poise: backend up (active check)');
      }
    }
    // Degraded is a property of an up backend's passing replies; a failure keeps the last word until it decides.
    const degraded = w.up && (ok ? verdict === 'degraded' : w.degraded);
    if (degraded !== w.degraded) {
      w.degraded = degraded;
      if (degraded) c.markedDegraded++;
      else c.clearedDegraded++;
      this.log.info(
        { backend: id, address, check: this.config.kind },
        degraded ? 'poise: backend degraded (active check)' : 'poise: backend no longer degraded (active check)',
      );
    }
    this.write(w, (w.up ? 0 : HealthFlag.Unhealthy) | (w.degraded ? HealthFlag.CheckDegraded : 0));
    if (ok && w.up && this.config.unejectOnPass) this.uneject(w);
  }

  /**
   * Writes what an agent reported into the slot (load/backend-load.ts): its
   * weight percentage, and drain / maint until it says `ready` (HAProxy's
   * administrative state: kept until the agent changes it). A backend that
   * leaves drain or maint ramps again (slow start, when configured).
   */
  private agentReply(w: Watch, reply: AgentReply): void {
    const t = this.table;
    const slot = w.target.slot;
    if (w.stopped || tagGeneration(t.tag(slot)) !== w.target.generation) return;
    let changed = false;
    if (reply.weightPercent !== undefined) changed = t.reported.setAgentWeight(slot, reply.weightPercent * 10_000);
    if (this.beside && reply.state !== undefined) {
      const wasDown = (t.health.health(slot) & HealthFlag.AgentDown) !== 0;
      if (t.health.setHealth(slot, HealthFlag.AgentDown, reply.state === 'down' ? HealthFlag.AgentDown : 0)) {
        changed = true;
        // Back from the agent's down: it ramps again (slow start, when configured).
        if (wasDown) t.slowStart.markEligible(slot, this.clock());
        this.log.info(
          { backend: w.target.id, address: w.target.address, agent: reply.state, reason: reply.description },
          reply.state === 'down' ? 'poise: backend down (agent)' : 'poise: backend up (agent)',
        );
      }
    }
    if (reply.admin !== undefined) {
      const before = t.reported.flags(slot);
      const bits = reply.admin === 'drain' ? ReportFlag.Drain : reply.admin === 'maint' ? ReportFlag.Maint : 0;
      if (t.reported.setAdmin(slot, bits)) {
        changed = true;
        if (bits === 0 && (before & (ReportFlag.Drain | ReportFlag.Maint)) !== 0) t.slowStart.markEligible(slot, this.clock());
        this.log.info({ backend: w.target.id, address: w.target.address, agent: reply.admin }, 'poise: agent changed the backend state');
      }
    }
    if (changed) t.epochs.bumpHealth();
  }

  /**
   * Writes what a roles check read into the slot (load/db-state.ts): role,
   * lag, LSN. A role change (a promotion, a demotion) bumps the health epoch,
   * so every router rebuilds its role sets at its next pick; lag and LSN are
   * read on the pick itself and need no bump.
   */
  private dbReport(w: Watch, report: DbReport): void {
    const t = this.table;
    const slot = w.target.slot;
    if (w.stopped || tagGeneration(t.tag(slot)) !== w.target.generation) return;
    const role = report.role === 'primary' ? DbRole.Primary : DbRole.Replica;
    if (t.db.write(slot, role, report.lagMs, report.lsnHi, report.lsnLo)) {
      t.epochs.bumpHealth();
      this.log.info({ backend: w.target.id, address: w.target.address, role: report.role }, 'poise: backend database role changed');
    }
  }

  /** A failed roles check: the role is unknown (out of both role sets) until a check reads it again. */
  private dbFailed(w: Watch): void {
    const t = this.table;
    if (tagGeneration(t.tag(w.target.slot)) !== w.target.generation) return;
    if (t.db.setRole(w.target.slot, DbRole.Unknown)) {
      t.epochs.bumpHealth();
      this.log.warn({ backend: w.target.id, address: w.target.address }, 'poise: backend database role unknown (check failed)');
    }
  }

  /** Ends the ejection of a backend that just passed while up (Envoy's successful_active_health_check_uneject_host). */
  private uneject(w: Watch): void {
    const t = this.table;
    const slot = w.target.slot;
    // Owner thread: the generation cannot change under this check (see write()).
    if (tagGeneration(t.tag(slot)) !== w.target.generation || t.ejectedForMs(slot, this.clock()) === 0) return;
    t.health.uneject(slot);
    // Its ejection ended now: it ramps from now (the deadline word that would have said so is cleared).
    t.slowStart.markEligible(slot, this.clock());
    t.epochs.bumpHealth();
    this.counters.unejectedByCheck++;
    this.log.info(
      { backend: w.target.id, address: w.target.address, check: this.config.kind },
      'poise: backend un-ejected (active check passed)',
    );
  }

  /** Writes the check bits of the watch's slot, if the slot still holds its generation, and announces a change. */
  private write(w: Watch, bits: number): void {
    const t = this.table;
    // The owner is the only writer of tags and health words: a generation
    // that still matches cannot change between this check and the store.
    if (tagGeneration(t.tag(w.target.slot)) !== w.target.generation) return;
    if (t.health.setHealth(w.target.slot, this.bits, bits)) t.epochs.bumpHealth();
  }
}
