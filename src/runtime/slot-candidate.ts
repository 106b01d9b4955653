/**
 * SlotCandidate: how a Router shows one LoadTable slot to a policy.
 *
 * Identity, weight, priority and locality come from the spec blob; the
 * eligibility flags are fixed when the view is built (an epoch moved), so
 * prepared policies see a stable slice; `load()` reads the shared lease
 * counters and PeakEWMA for the router's metric, at the router's `now`.
 *
 * Weight and load follow slow start through `weight` and `loadScale`, set
 * at each view build by effective-weight.ts.
 *
 * `load()` reads the counters with plain loads of the table's words: one
 * word per count (its low 20 bits; a sequence sits above them), whatever the
 * number of threads, tear-free and possibly a few nanoseconds stale — which a
 * comparison between backends tolerates (load/leases.ts argues it; nothing
 * that must never be exceeded reads it).
 */
import type { LocalityCandidate, Status } from '../core/candidate.js';
import type { ResolvedBackendSpec } from '../core/spec.js';
import { EwmaSeries, type EwmaRegion } from '../load/ewma-region.js';
import { S_LEASES } from '../load/layout.js';
import { COUNT_MASK, LeaseKind, type PoolTotal } from '../load/leases.js';
import type { LoadTable } from '../load/load-table.js';
import type { ProbeAnswer, ProbedCandidate } from '../policy/probe.js';

/** Load metrics a router can compare. */
export const Metric = {
  /** connections + in-flight requests (p2c, least-loaded) */
  Outstanding: 0,
  /** active connections (p2c:connections) */
  Connections: 1,
  /** in-flight requests (p2c:requests) */
  Requests: 2,
  /** PeakEWMA connect time (µs) × (connections + 1) (p2c:connectionTime) */
  ConnectTime: 3,
  /** PeakEWMA request latency (µs) × (requests + 1) (p2c:latency), and the probe answers (probe) */
  Latency: 4,
  /** `probe`: the probe pool's answers (load/probe-region.ts), `Latency` when it falls back */
  Probe: 5,
} as const;
/** A metric code. */
export type MetricCode = (typeof Metric)[keyof typeof Metric];

/** What every candidate of one router shares: the table, the metric, the pick's instant. */
export class LoadEnv {
  /** The shared table. */
  readonly table: LoadTable;
  /** The table's words (the plain loads of `load()`). */
  readonly words: Int32Array;
  /** The table's PeakEWMA region. */
  readonly ewma: EwmaRegion;
  /** The metric `load()` reports. */
  readonly metric: MetricCode;
  /** Shared-clock ms (mod 2^30) of the acquire in progress (set once per acquire). */
  now = 0;
  /** The router's view of the pool-wide outstanding count (set once the router has its row). */
  pool: PoolTotal | undefined;

  constructor(table: LoadTable, metric: MetricCode) {
    this.table = table;
    this.words = table.words;
    this.ewma = table.ewma;
    this.metric = metric;
  }
}

/** One slot as a policy candidate. */
export class SlotCandidate implements LocalityCandidate {
  readonly id: string;
  /** The effective weight policies prepare with: the spec weight, ramped by slow start (effective-weight.ts). */
  weight: number;
  /** The slow-start factor of the last build, in (0, 1] (1 = not ramping). */
  ramp = 1;
  /** Its weight in the process's aperture slice as of the last build, in ring units (1 = no aperture; candidate-view.ts). */
  apertureWeight = 1;
  /** `load()` is multiplied by this while the slot ramps under a keyed policy (a small integer, 1 otherwise; effective-weight.ts). */
  loadScale = 1;
  /** An agent check or ORCA report holds it out (`drain`, `maint`): not eligible, not even in panic. */
  held = false;
  readonly priority: number;
  readonly locality: string;
  readonly localityWeight: number;
  readonly spec: Readonly<ResolvedBackendSpec>;
  readonly host: string;
  readonly port: number;
  /** LoadTable slot index. */
  readonly slot: number;
  /** Slot generation this spec belongs to. */
  readonly generation: number;
  /** Cap on this lease kind's counter, 0 = none. */
  readonly maxInflight: number;
  /** Status when the view was built. */
  status: Status = 'ready';
  /** Ready and not ejected when the view was built. */
  eligible = false;
  /** Temporarily excluded during one acquire (exclude list, or at its cap). */
  blocked = false;
  /** Picks not yet added to the table's pick counter (flushed every 64, and at least once a second). */
  unflushedPicks = 0;
  /** Released successes and failures not yet added to the outlier detector's interval counters (flushed as the picks). */
  unflushedOk = 0;
  unflushedFail = 0;
  /**
   * Replaced in its router's view by a newer membership: its batched
   * statistics were flushed then, so a lease still open on it counts its
   * outcome directly.
   */
  retired = false;
  protected readonly env: LoadEnv;
  /** Word of this slot's request counter; the connection counter is the next (`S_LEASES + kind`). */
  protected readonly counts: number;

  constructor(env: LoadEnv, slot: number, generation: number, spec: ResolvedBackendSpec, host: string, port: number) {
    this.env = env;
    this.slot = slot;
    this.generation = generation;
    this.spec = spec;
    this.id = spec.id;
    this.weight = spec.weight;
    this.priority = spec.priority;
    this.locality = spec.locality;
    this.localityWeight = spec.localityWeight;
    this.maxInflight = spec.maxInflight;
    this.host = host;
    this.port = port;
    this.counts = env.table.layout.slot(slot) + S_LEASES;
  }

  /** Eligible when the view was built, and not excluded from this acquire. */
  isEligible(): boolean {
    return this.eligible && !this.blocked;
  }

  /** Counts in its priority's capacity unless draining. */
  isMember(): boolean {
    return this.status !== 'draining';
  }

  /** May use-all panic pick it? */
  isPanicEligible(): boolean {
    return this.spec.panicEligible && this.status !== 'draining' && !this.blocked && !this.held;
  }

  /**
   * The router's metric for this slot, read from shared memory now (lower is
   * lighter). This base class reports connections + in-flight requests; the
   * subclasses below override it per metric, so each router's candidates
   * share one small, branch-free `load()` (it inlines into the policy's pick
   * with room left for the policy's random draws, which then never box).
   */
  load(): number {
    const w = this.env.words;
    return ((w[this.counts]! & COUNT_MASK) + (w[this.counts + 1]! & COUNT_MASK)) * this.loadScale;
  }
}

/** `p2c:connections`: active connections. */
class ConnectionsCandidate extends SlotCandidate {
  override load(): number {
    return (this.env.words[this.counts + LeaseKind.Connection]! & COUNT_MASK) * this.loadScale;
  }
}

/** `p2c:requests`: in-flight requests. */
class RequestsCandidate extends SlotCandidate {
  override load(): number {
    return (this.env.words[this.counts + LeaseKind.Request]! & COUNT_MASK) * this.loadScale;
  }
}

/** `p2c:connectionTime`: PeakEWMA connect time (µs) × (connections + 1). */
class ConnectTimeCandidate extends SlotCandidate {
  override load(): number {
    const env = this.env;
    return (
      env.ewma.estimateHintUs(this.slot, EwmaSeries.ConnectTime, env.now) *
      ((env.words[this.counts + LeaseKind.Connection]! & COUNT_MASK) + 1) *
      this.loadScale
    );
  }
}

/**
 * `p2c:latency`: PeakEWMA request latency (µs) × (requests + 1) — and for a
 * backend not yet measured (its latency mean still the prior, negated), 0
 * while it has no request in flight, else the prior undecayed × (requests +
 * 1). See {@link LatencyCandidate.load}.
 */
class LatencyCandidate extends SlotCandidate {
  /**
   * The cost. A backend with no latency sample yet is probed, not priced:
   * idle, it costs 0 and wins its pair (Finagle's PeakEWMA starts at 0 the
   * same way); once its first request is in flight it costs the initial
   * estimate (50 ms) per request, undecayed, so it is not flooded before it
   * answers. Pricing it at the prior instead starved it: a measured backend
   * answering in 1 ms costs 1 ms, the unmeasured one 50 ms decaying with τ,
   * so it was not tried for seconds (test/runtime/unmeasured-backend.test.ts;
   * docs/policies.md, "The cold start"). One more plain load, of the word
   * the tail rule reads anyway.
   */
  override load(): number {
    const env = this.env;
    const n = env.words[this.counts + LeaseKind.Request]! & COUNT_MASK;
    const mean = env.ewma.meanRecordedUs(this.slot);
    if (mean < 0) return n === 0 ? 0 : -mean * (n + 1) * this.loadScale;
    return env.ewma.estimateHintUs(this.slot, EwmaSeries.Latency, env.now) * (n + 1) * this.loadScale;
  }

  /**
   * The request latency's plain EWMA (µs, no peak rule): what PowerOfTwo's
   * tail rule (`latencyRatio`) compares. Not the PeakEWMA: a pause that every
   * backend's samples share (the caller's event loop, the machine) peaks them
   * all for τ and hides which backend is slow (docs/policies.md).
   *
   * Decayed only while the backend has no request in flight. The decay is
   * what lets a gated backend be tried again; once a try is in flight, the
   * answer is coming, and a mean decayed further would let every pick
   * until that answer lands through the gate too (at 15,000 requests/s, a
   * 10 ms backend received ~150 of them per try instead of one). −1 before
   * the slot's first sample: the initial estimate is no evidence, so the
   * rule leaves that pair to the cost.
   */
  latency(): number {
    const env = this.env;
    const recorded = env.ewma.meanRecordedUs(this.slot);
    if (recorded < 0) return -1;
    return (env.words[this.counts + LeaseKind.Request]! & COUNT_MASK) !== 0
      ? recorded
      : env.ewma.meanDecayedUs(this.slot, recorded, env.now);
  }
}

/**
 * `probe`: the latency candidate, plus the slot's probe answer
 * (load/probe-region.ts) and its passive failures word (policy/probe.ts
 * reads them on the sampled members only).
 */
class ProbeCandidate extends LatencyCandidate implements ProbedCandidate {
  readProbe(out: ProbeAnswer): boolean {
    return this.env.table.probes.read(this.slot, this.env.now, out);
  }

  useProbe(): void {
    this.env.table.probes.use(this.slot);
  }

  /** Consecutive failures now: a backend failing requests does not attract traffic by answering probes fast. */
  failing(): boolean {
    return this.env.table.health.failures(this.slot) !== 0;
  }
}

/** A candidate whose `load()` reports `env.metric`. */
export function slotCandidate(
  env: LoadEnv,
  slot: number,
  generation: number,
  spec: ResolvedBackendSpec,
  host: string,
  port: number,
): SlotCandidate {
  switch (env.metric) {
    case Metric.Connections:
      return new ConnectionsCandidate(env, slot, generation, spec, host, port);
    case Metric.Requests:
      return new RequestsCandidate(env, slot, generation, spec, host, port);
    case Metric.ConnectTime:
      return new ConnectTimeCandidate(env, slot, generation, spec, host, port);
    case Metric.Latency:
      return new LatencyCandidate(env, slot, generation, spec, host, port);
    case Metric.Probe:
      return new ProbeCandidate(env, slot, generation, spec, host, port);
    default:
      return new SlotCandidate(env, slot, generation, spec, host, port);
  }
}
