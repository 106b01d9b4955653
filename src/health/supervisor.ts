/**
 * The health supervisor: the owner thread's health workers — the active
 * checker, the agent beside it, outlier detection and ORCA weights — and
 * the targets they watch. The Balancer owns membership and hands this
 * supervisor two things: the health configuration in force and the live
 * backends as targets; it never starts a worker itself. Workers and
 * routers meet only in the table (Envoy's split: health checkers, outlier
 * detection and load balancing meet only through the host's health flags):
 * the workers write a slot's health, agent, ORCA and verdict words, and
 * every router reads them at its next view build.
 *
 * A configuration or a target list replaces what runs only when it differs
 * structurally ({@link sameHealthConfig}, {@link sameTargets}): a document
 * re-applied with the same `health` block keeps every worker and its
 * schedule. Values of the configuration that are code or connections (a
 * custom check's function, a query client) are compared by identity.
 */
import type { Logger } from '../log.js';
import { VerdictSource } from '../load/verdicts.js';
import type { LoadTable } from '../load/load-table.js';
import { ActiveChecker } from './active.js';
import type { ResolvedHealthCheck, ResolvedOutlier } from './config.js';
import { OrcaWeights, type ResolvedOrca } from './orca.js';
import { OutlierDetector } from './outlier.js';
import { ProbePool, type ResolvedProbe } from './probe-pool.js';
import { newCounters, type HealthCounters } from './stats.js';
import type { HealthTarget } from './targets.js';

/** A health configuration, resolved (health/config.ts's `resolveHealthConfig`): each block present or not. */
export interface ResolvedHealth {
  check?: ResolvedHealthCheck;
  outlier?: ResolvedOutlier;
  orca?: ResolvedOrca;
  agent?: ResolvedHealthCheck;
  /** The probe pool of the `probe` policy (health/probe-pool.ts). */
  probe?: ResolvedProbe;
}

/** Options of {@link HealthSupervisor}. */
export interface SupervisorOptions {
  /** The owner's clock, ms. */
  clock: () => number;
  /** Time is the caller's (an injected clock): sweeps and ORCA polls run only when asked ({@link HealthSupervisor.sweepOutliers}, {@link HealthSupervisor.poll}). */
  manualTime: boolean;
  /** Called first in every outlier sweep: flushes the owner thread's batched outcome counts into the table. */
  beforeSweep: () => void;
}

/** Two configuration values alike: the same primitive, arrays alike element by element (`expectedStatus`), anything else the same object (functions, clients). */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'number' && typeof b === 'number') return Number.isNaN(a) && Number.isNaN(b);
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  for (let k = 0; k < a.length; k++) if (!sameValue(a[k], b[k])) return false;
  return true;
}

/** Two resolved blocks alike: both absent, or the same keys with values alike (resolved blocks are flat records). */
function sameBlock(a: object | undefined, b: object | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    if (!Object.hasOwn(b, k) || !sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}

/** Whether two resolved health configurations run the same workers: each of the four blocks alike. */
export function sameHealthConfig(a: ResolvedHealth, b: ResolvedHealth): boolean {
  return (
    sameBlock(a.check, b.check) &&
    sameBlock(a.agent, b.agent) &&
    sameBlock(a.outlier, b.outlier) &&
    sameBlock(a.orca, b.orca) &&
    sameBlock(a.probe, b.probe)
  );
}

/** Whether two target lists are alike, in order, field by field. */
export function sameTargets(a: readonly HealthTarget[], b: readonly HealthTarget[]): boolean {
  if (a.length !== b.length) return false;
  for (let k = 0; k < a.length; k++) if (!sameBlock(a[k], b[k])) return false;
  return true;
}

/**
 * The first-verdict sources a health configuration runs (load/verdicts.ts):
 * what a new occupant awaits when that configuration is the one in force.
 */
export function verdictSourcesOf(conf: ResolvedHealth): number {
  return (
    (conf.check === undefined ? 0 : VerdictSource.Check) |
    (conf.agent === undefined ? 0 : VerdictSource.Agent) |
    (conf.orca === undefined || conf.orca.source !== 'endpoint' ? 0 : VerdictSource.Orca)
  );
}

/** The owner's health workers and their targets. @internal */
export class HealthSupervisor {
  /** Checks, transitions and ejections since the supervisor was made (kept across configurations). */
  readonly counters: HealthCounters = newCounters();
  /** The configuration in force; undefined before the first (which always starts, and logs, even when empty). */
  private config: ResolvedHealth | undefined;
  private targets: readonly HealthTarget[] = [];
  private checker: ActiveChecker | undefined;
  /** The agent beside the active check (`health.agent`). */
  private agent: ActiveChecker | undefined;
  private outlier: OutlierDetector | undefined;
  private orca: OrcaWeights | undefined;
  private probe: ProbePool | undefined;
  private closed = false;

  constructor(
    private readonly table: LoadTable,
    private readonly log: Logger,
    private readonly opts: SupervisorOptions,
  ) {}

  /** The first-verdict bits a new backend awaits under the configuration in force. */
  verdictSources(): number {
    return this.config === undefined ? 0 : verdictSourcesOf(this.config);
  }

  /** Whether any worker runs (without one, the Balancer need not build targets). */
  get running(): boolean {
    return (
      this.checker !== undefined ||
      this.agent !== undefined ||
      this.outlier !== undefined ||
      this.orca !== undefined ||
      this.probe !== undefined
    );
  }

  /**
   * Runs `conf` (undefined: the configuration in force stays) over
   * `targets`, the live backends. A configuration that differs from the one
   * in force stops every worker and starts those it names on `targets`;
   * otherwise targets that differ from those held are handed to the
   * workers, which start and stop their watches to match.
   */
  apply(conf: ResolvedHealth | undefined, targets: readonly HealthTarget[]): void {
    if (this.closed) return;
    const moved = !sameTargets(targets, this.targets);
    this.targets = targets;
    if (conf !== undefined && (this.config === undefined || !sameHealthConfig(conf, this.config))) this.replace(conf);
    else if (moved) this.handTargets();
  }

  private replace(conf: ResolvedHealth): void {
    this.config = conf;
    this.stopWorkers();
    const { clock, manualTime } = this.opts;
    // The agent beside the active check (health.agent): weight, drain / maint / ready, and its own down.
    this.agent = conf.agent === undefined ? undefined : new ActiveChecker(this.table, conf.agent, this.log, this.counters, clock, true);
    this.orca = conf.orca === undefined ? undefined : new OrcaWeights(this.table, conf.orca, this.log, clock);
    // With an injected clock time is the caller's: polls run through poll().
    if (!manualTime) this.orca?.start();
    // The probe pool: with an injected clock its rounds run through poll() too.
    this.probe = conf.probe === undefined ? undefined : new ProbePool(this.table, conf.probe, this.log, clock);
    if (!manualTime) this.probe?.start();
    this.checker = conf.check === undefined ? undefined : new ActiveChecker(this.table, conf.check, this.log, this.counters, clock);
    this.outlier =
      conf.outlier === undefined
        ? undefined
        : new OutlierDetector(this.table, conf.outlier, this.log, this.counters, clock, this.opts.beforeSweep);
    // With an injected clock time is the caller's: sweeps run through sweepOutliers().
    if (!manualTime) this.outlier?.start();
    this.log.info({ check: conf.check?.kind ?? null, outlier: conf.outlier !== undefined }, 'poise: health configuration applied');
    this.handTargets();
  }

  /** The active check's view of backend `id` (undefined without a check, or for a backend it does not watch). */
  checkStateOf(id: string): { check: 'up' | 'down' | 'unchecked'; degraded: boolean } | undefined {
    return this.checker?.stateOf(id);
  }

  /** Outlier detection's ejection multiplier of backend `id` (0 without outlier detection). */
  ejectionsOf(id: string): number {
    return this.outlier?.multiplierOf(id) ?? 0;
  }

  /** Whether outlier detection runs. */
  get sweeps(): boolean {
    return this.outlier !== undefined;
  }

  /** One outlier sweep now; the ids it ejected (none without outlier detection). */
  sweepOutliers(): string[] {
    return this.outlier?.sweep() ?? [];
  }

  /** One ORCA round and one probe round now (every load endpoint polled, the weights written; probes within the budget); nothing without either. */
  async poll(): Promise<void> {
    await Promise.all([this.orca?.poll(), this.probe?.round()]);
  }

  /** Stops every worker; a later apply does nothing. */
  close(): void {
    this.closed = true;
    this.stopWorkers();
  }

  private stopWorkers(): void {
    this.checker?.close();
    this.agent?.close();
    this.outlier?.close();
    this.orca?.close();
    this.probe?.close();
    this.probe = undefined;
    this.checker = undefined;
    this.agent = undefined;
    this.outlier = undefined;
    this.orca = undefined;
  }

  private handTargets(): void {
    this.checker?.sync(this.targets);
    this.agent?.sync(this.targets);
    this.outlier?.sync(this.targets);
    this.orca?.sync(this.targets);
    this.probe?.sync(this.targets);
  }
}
