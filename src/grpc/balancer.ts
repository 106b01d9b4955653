/**
 * The `poise` load-balancing policy of grpc-js: one instance per channel.
 *
 * It keeps one grpc-js leaf balancer (pick-first over one address) per
 * endpoint the resolver gave, and one Router over the cluster's shared
 * table. Each call's pick takes a request lease from the router — any
 * poise policy, over every thread's in-flight calls and latencies; through
 * the cluster's admission gate when it has one (admission.ts) — and hands
 * grpc-js the chosen backend's subchannel, with `onCallStarted` /
 * `onCallEnded` hooks that release the lease once with the call's outcome
 * (its status, config.ts), the latency to its first response message
 * (call.ts) and the backend's ORCA trailer (orca.ts). A stream holds its
 * one lease for its whole life.
 *
 * A backend whose subchannel is not READY in this channel is excluded from
 * its picks (the router's `exclude`); when no member is READY the pick
 * queues while a subchannel connects (grpc-js's "panic": a call cannot go
 * out on a subchannel that is not connected) and fails with UNAVAILABLE
 * when all of them failed. A pick grpc-js abandons before the call starts
 * (its subchannel went away meanwhile, the call was cancelled) gives its
 * lease back as `cancelled`: at the next turn when the subchannel is no
 * longer READY, else after `startGraceMs`.
 * @internal
 */
import type { ChannelOptions, experimental, Metadata } from '@grpc/grpc-js';
import * as grpc from '@grpc/grpc-js';
import { PoiseError } from '../core/errors.js';
import { parseAddress } from '../core/spec.js';
import type { LoadTable } from '../load/load-table.js';
import type { Lease, ReleaseOptions } from '../runtime/lease.js';
import { RatioRetryBudget, type RetryBudget } from '../runtime/retry-budget.js';
import { type AcquireOptions, Router } from '../runtime/router.js';
import { decodeBlob } from '../runtime/spec-blob.js';
import { AdmissionGate, type AdmissionStats } from '../admission/admission.js';
import { CallAdmission } from './admission.js';
import { type CallOwner, PoiseCall, readOrcaTrailer } from './call.js';
import type { ResolvedLbConfig } from './config.js';
import { PoiseLoadBalancingConfig } from './lb-config.js';
import { newOrcaFigures } from './orca.js';
import { firstString, QUEUE, QUEUE_PICKER, statusResult } from './picks.js';
import { type ChannelCounts, type ChannelView, type Cluster, findCluster } from './registry.js';
import { CLUSTER_ATTRIBUTE, POISE } from './resolver.js';

const { ConnectivityState } = { ConnectivityState: grpc.connectivityState };
type State = grpc.connectivityState;
const READY = ConnectivityState.READY;
const PickResultType = grpc.experimental.PickResultType;

/** The metadata grpc-js's retry policy adds to a retry. */
const PREVIOUS_ATTEMPTS = 'grpc-previous-rpc-attempts';
/** Draws of one pick whose backend turned out not to be usable in this channel (then it queues). */
const MAX_DRAWS = 4;

/** One endpoint of the channel: its leaf balancer and the state it last reported. */
interface Leaf {
  readonly key: string;
  readonly lb: experimental.LeafLoadBalancer;
  state: State;
  picker: experimental.Picker;
  /** The backend ids (of the view in force) at this address. */
  ids: string[];
}

/** The picker of a channel in READY or CONNECTING: it reads the balancer's live state. */
class PoisePicker implements experimental.Picker {
  private readonly lb: PoiseLoadBalancer;
  constructor(lb: PoiseLoadBalancer) {
    this.lb = lb;
  }
  pick(args: experimental.PickArgs): experimental.PickResult {
    return this.lb.pick(args);
  }
}

/** An address's key: host and port, as the resolver and the specs spell them. */
function addressKey(host: string, port: number): string {
  return `${host}:${port}`;
}

/** The `poise` balancer of one channel (see the file comment). @internal */
export class PoiseLoadBalancer implements experimental.LoadBalancer, CallOwner, ChannelView {
  readonly counts: ChannelCounts = { picks: 0, abandoned: 0, reports: 0, malformedReports: 0, retries: 0, retriesRefused: 0 };
  /** The clock of latency samples and grace periods, ms. */
  readonly now = (): number => performance.now();
  private readonly helper: experimental.ChannelControlHelper;
  private readonly picker = new PoisePicker(this);
  private readonly leaves = new Map<string, Leaf>();
  private readonly byId = new Map<string, Leaf>();
  /** Ids this channel may not pick now: its subchannel is not READY, or the channel has no endpoint for it. */
  private readonly exclude = new Set<string>();
  private readonly acquireOpts: {
    kind: 'request';
    key: string | undefined;
    priority: number | undefined;
    exclude: Set<string> | undefined;
  } = { kind: 'request', key: undefined, priority: undefined, exclude: undefined };
  private readonly orca = newOrcaFigures();
  /** The release options object, reused (releases are synchronous, one thread). */
  private readonly releaseOpts: ReleaseOptions = { latencyMs: 0 };
  private config: ResolvedLbConfig | undefined;
  private cluster: Cluster | undefined;
  private table: LoadTable | undefined;
  private router: Router | undefined;
  /** The admission of this channel's calls, when the cluster has admission bands. */
  private admission: CallAdmission | undefined;
  private budget: RetryBudget | undefined;
  /** The blob version the id maps were built from. */
  private seenVersion = -1;
  private state: State = ConnectivityState.IDLE;
  private lastError = '';
  private pending: PoiseCall[] = [];
  private spare: PoiseCall[] = [];
  private sweepArmed = false;
  private destroyed = false;
  private updating = false;

  constructor(helper: experimental.ChannelControlHelper) {
    this.helper = helper;
  }

  getTypeName(): string {
    return POISE;
  }

  /** The channel's router (tests and the benchmark read its lease count). @internal */
  get routerOrUndefined(): Router | undefined {
    return this.router;
  }

  updateAddressList(
    endpoints: experimental.StatusOr<experimental.Endpoint[]>,
    lbConfig: experimental.TypedLoadBalancingConfig,
    options: ChannelOptions,
    _note: string,
  ): boolean {
    if (!(lbConfig instanceof PoiseLoadBalancingConfig)) return false;
    if (lbConfig.problem !== undefined || lbConfig.config === undefined) {
      this.fail(`poise: ${lbConfig.problem?.message ?? 'no config'}`);
      return true;
    }
    const config = lbConfig.config;
    const name = config.cluster ?? (options as Record<string, unknown>)[CLUSTER_ATTRIBUTE];
    const cluster = typeof name === 'string' ? findCluster(name) : undefined;
    if (cluster === undefined) {
      this.fail(
        typeof name === 'string'
          ? `poise: no cluster "${name}" is registered in this thread (registerPoiseCluster)`
          : 'poise: loadBalancingConfig.poise.cluster: must name a registered cluster when the target is not poise:///<cluster>',
      );
      return true;
    }
    // The admission fields mean something only beside a gate: without one they would be ignored in silence.
    if (cluster.admission === undefined) {
      const field =
        config.bandMetadata !== undefined ? 'bandMetadata' : config.admissionTimeoutMs !== undefined ? 'admissionTimeoutMs' : undefined;
      if (field !== undefined) {
        this.fail(
          `poise: loadBalancingConfig.poise.${field}: applies only to a cluster registered with { admission } (registerPoiseCluster)`,
        );
        return true;
      }
    }
    if (
      this.router === undefined ||
      this.cluster !== cluster ||
      this.config?.policy !== config.policy ||
      this.config.latencyRatio !== config.latencyRatio
    ) {
      this.admission?.close();
      this.router?.close();
      this.cluster?.channels.delete(this);
      cluster.channels.add(this);
      this.router = Router.attach(cluster.attachment, {
        policy: config.policy,
        ...(config.latencyRatio === undefined ? {} : { latencyRatio: config.latencyRatio }),
      });
      this.admission =
        cluster.admission === undefined
          ? undefined
          : new CallAdmission(new AdmissionGate(this.router, cluster.admission), this.repick, this.now, this.graceMs);
      this.cluster = cluster;
      this.table = cluster.table;
      this.seenVersion = -1;
    }
    const router = this.router;
    if (config.retryBudget !== undefined) {
      if (this.budget === undefined || this.config?.raw !== config.raw) this.budget = new RatioRetryBudget(config.retryBudget);
    } else this.budget = router.retryBudget.enabled ? router.retryBudget : (this.budget ?? new RatioRetryBudget());
    this.config = config;
    if (!endpoints.ok) {
      if (this.leaves.size === 0) this.fail(endpoints.error.details);
      return true;
    }
    this.updating = true;
    const keep = new Set<string>();
    for (const endpoint of endpoints.value) {
      const a = endpoint.addresses[0];
      if (a === undefined || !('port' in a)) continue;
      const key = addressKey(a.host, a.port);
      keep.add(key);
      // A leaf the channel has keeps its connection as it is.
      if (this.leaves.has(key)) continue;
      const leaf: Leaf = {
        key,
        lb: undefined as unknown as experimental.LeafLoadBalancer,
        state: ConnectivityState.IDLE,
        picker: QUEUE_PICKER,
        ids: [],
      };
      const helper = grpc.experimental.createChildChannelControlHelper(this.helper, {
        updateState: (state: State, picker: experimental.Picker, error: string | null) => this.onLeafState(leaf, state, picker, error),
      });
      (leaf as { lb: experimental.LeafLoadBalancer }).lb = new grpc.experimental.LeafLoadBalancer(endpoint, helper, options, _note);
      this.leaves.set(key, leaf);
      leaf.lb.startConnecting();
    }
    for (const [key, leaf] of this.leaves) {
      if (keep.has(key)) continue;
      this.leaves.delete(key);
      leaf.lb.destroy();
    }
    this.updating = false;
    this.remap();
    this.publish();
    return true;
  }

  exitIdle(): void {
    for (const leaf of this.leaves.values()) if (leaf.state === ConnectivityState.IDLE) leaf.lb.exitIdle();
  }

  resetBackoff(): void {
    // The leaves' subchannels keep their own backoff.
  }

  destroy(): void {
    this.destroyed = true;
    for (const leaf of this.leaves.values()) leaf.lb.destroy();
    this.leaves.clear();
    this.byId.clear();
    for (const c of this.pending) if (c.startedAt < 0) c.abandon();
    this.pending = [];
    this.admission?.close();
    this.router?.close();
    this.cluster?.channels.delete(this);
  }

  admissionStats(): AdmissionStats | undefined {
    return this.admission?.stats();
  }

  /** A leaf's subchannel moved: its ids enter or leave the exclusion set, and the channel's state follows. */
  private onLeafState(leaf: Leaf, state: State, picker: experimental.Picker, error: string | null): void {
    leaf.state = state;
    leaf.picker = picker;
    if (error) this.lastError = error;
    for (const id of leaf.ids) {
      if (state === READY) this.exclude.delete(id);
      else this.exclude.add(id);
    }
    // Keep every endpoint connected (as round_robin does): a pick needs a READY subchannel.
    if (state === ConnectivityState.IDLE && !this.destroyed) leaf.lb.exitIdle();
    if (!this.updating && !this.destroyed) this.publish();
  }

  /**
   * Maps the router's backend ids to this channel's leaves, from the spec
   * blob (off the pick path: when the membership version moved). A member
   * without an endpoint here, or whose subchannel is not READY, is excluded.
   */
  private remap(): void {
    const table = this.table;
    if (table === undefined) return;
    const blob = decodeBlob(table.specs.read());
    this.byId.clear();
    this.exclude.clear();
    for (const leaf of this.leaves.values()) leaf.ids = [];
    for (const e of blob.entries) {
      const a = parseAddress(e.spec.address);
      const leaf = a === undefined ? undefined : this.leaves.get(addressKey(a.host, a.port));
      if (leaf === undefined) {
        this.exclude.add(e.spec.id);
        continue;
      }
      leaf.ids.push(e.spec.id);
      this.byId.set(e.spec.id, leaf);
      if (leaf.state !== READY) this.exclude.add(e.spec.id);
    }
    this.seenVersion = blob.version;
  }

  /** The channel's state from its leaves' (on a change only: O(endpoints)). */
  private publish(): void {
    let ready = false;
    let connecting = false;
    let failed = false;
    for (const leaf of this.leaves.values()) {
      if (leaf.state === READY) ready = true;
      else if (leaf.state === ConnectivityState.CONNECTING || leaf.state === ConnectivityState.IDLE) connecting = true;
      else if (leaf.state === ConnectivityState.TRANSIENT_FAILURE) failed = true;
    }
    if (ready) this.setState(READY, this.picker, null);
    else if (connecting) this.setState(ConnectivityState.CONNECTING, this.picker, null);
    else if (failed || this.leaves.size === 0) {
      const why =
        this.leaves.size === 0 ? 'poise: the cluster has no members' : `poise: no backend is reachable; last error: ${this.lastError}`;
      this.setState(ConnectivityState.TRANSIENT_FAILURE, new grpc.experimental.UnavailablePicker({ details: why }), why);
    } else this.setState(ConnectivityState.IDLE, new grpc.experimental.QueuePicker(this), null);
  }

  /** A call's admission ticket settled: the picker again, so that grpc-js re-picks its queued calls. */
  private readonly repick = (): void => {
    if (this.state === READY && !this.destroyed) this.setState(READY, this.picker, null);
  };

  private readonly graceMs = (): number => this.config?.startGraceMs ?? 1000;

  /** grpc-js started a call (PoiseCall's onCallStarted). @internal */
  started(call: PoiseCall): void {
    this.cluster?.counters?.started(call.lease.slot, call.lease.generation);
  }

  /** A picked call never started (PoiseCall.abandon). @internal */
  abandoned(): void {
    this.counts.abandoned++;
  }

  private setState(state: State, picker: experimental.Picker, error: string | null): void {
    this.state = state;
    this.helper.updateState(state, picker, error);
  }

  private fail(details: string): void {
    this.lastError = details;
    this.setState(ConnectivityState.TRANSIENT_FAILURE, new grpc.experimental.UnavailablePicker({ details }), details);
  }

  /** One call's pick (see the file comment). @internal */
  pick(args: experimental.PickArgs): experimental.PickResult {
    const router = this.router;
    const config = this.config;
    if (router === undefined || config === undefined || this.state !== READY) return QUEUE;
    const md = args.metadata;
    const opts = this.acquireOpts;
    opts.key = config.keyMetadata === undefined ? undefined : firstString(md, config.keyMetadata);
    if (config.priorityMetadata !== undefined) {
      const p = firstString(md, config.priorityMetadata);
      const n = p === undefined ? Number.NaN : Number(p);
      opts.priority = Number.isInteger(n) && n >= 0 ? n : undefined;
    } else opts.priority = undefined;
    opts.exclude = this.exclude.size === 0 ? undefined : this.exclude;
    let admitted: Lease | undefined;
    // The first attempt goes through the gate; a retry of grpc-js's retry policy does not (as HTTP's retries).
    if (this.admission !== undefined && md.get(PREVIOUS_ATTEMPTS).length === 0) {
      const key = config.bandMetadata;
      const band = key === undefined ? undefined : firstString(md, key);
      try {
        admitted = this.admission.admit(md, band === undefined ? undefined : Number(band), opts, config.admissionTimeoutMs);
      } catch (err) {
        return this.admissionRefused(err);
      }
      if (admitted === undefined) return QUEUE;
    }
    for (let draw = 0; draw < MAX_DRAWS; draw++) {
      opts.exclude = this.exclude.size === 0 ? undefined : this.exclude;
      let lease: Lease;
      if (admitted !== undefined) {
        lease = admitted;
        admitted = undefined;
      } else {
        try {
          lease = router.acquire(opts as AcquireOptions);
        } catch (err) {
          return this.refused(err);
        }
      }
      if (router.version !== this.seenVersion) this.remap();
      const leaf = this.byId.get(lease.id);
      if (leaf === undefined || leaf.state !== READY) {
        // Not usable in this channel (yet): given back uncounted, and excluded until its subchannel is READY.
        lease.release('cancelled');
        this.exclude.add(lease.id);
        continue;
      }
      return this.complete(args, leaf, lease);
    }
    return QUEUE;
  }

  /**
   * The pick's last step: the leaf's subchannel, then the retry budget
   * (asked once per attempt that goes out: a retry of grpc-js's retry
   * policy is dropped with UNAVAILABLE when the budget is spent), then the
   * call's hooks.
   */
  private complete(args: experimental.PickArgs, leaf: Leaf, lease: Lease): experimental.PickResult {
    const r = leaf.picker.pick(args);
    if (r.pickResultType !== PickResultType.COMPLETE || r.subchannel === null) {
      lease.release('cancelled');
      return r;
    }
    const budget = this.budget!;
    if (args.metadata.get(PREVIOUS_ATTEMPTS).length > 0) {
      if (!budget.tryRetry()) {
        this.cluster?.counters?.retry(lease.slot, lease.generation, true);
        lease.release('cancelled');
        this.counts.retriesRefused++;
        return statusResult(PickResultType.DROP, grpc.status.UNAVAILABLE, 'poise: the retry budget is spent');
      }
      this.counts.retries++;
      this.cluster?.counters?.retry(lease.slot, lease.generation, false);
    } else budget.onRequest();
    const call = new PoiseCall(this, lease, r.subchannel);
    this.counts.picks++;
    this.pending.push(call);
    if (!this.sweepArmed) {
      this.sweepArmed = true;
      setImmediate(this.sweep);
    }
    return call.result;
  }

  /** The router refused: queue while a subchannel connects, else UNAVAILABLE naming why. */
  private refused(err: unknown): experimental.PickResult {
    if (err instanceof PoiseError && (err.code === 'NoEligibleCandidates' || err.code === 'Empty')) {
      for (const leaf of this.leaves.values()) if (leaf.state !== READY && leaf.state !== ConnectivityState.TRANSIENT_FAILURE) return QUEUE;
    }
    const message = err instanceof Error ? err.message : String(err);
    return statusResult(PickResultType.TRANSIENT_FAILURE, grpc.status.UNAVAILABLE, `poise: ${message}`);
  }

  /**
   * The admission gate refused the call: RESOURCE_EXHAUSTED for a full
   * queue, a wait past its timeout or a closed gate (as `acquireAsync`
   * rejects an HTTP request), INTERNAL for a band the gate has not (grpc-js
   * turns INVALID_ARGUMENT from a balancer into INTERNAL anyway: gRFC A54);
   * dropped, so grpc-js's retry policy does not retry it. A refusal of the
   * acquire itself is the router's (above).
   */
  private admissionRefused(err: unknown): experimental.PickResult {
    if (!(err instanceof PoiseError) || err.code === 'NoEligibleCandidates' || err.code === 'Empty') return this.refused(err);
    const code = err.code === 'InvalidConfig' ? grpc.status.INTERNAL : grpc.status.RESOURCE_EXHAUSTED;
    const where = err.code === 'InvalidConfig' ? ` (metadata ${this.config?.bandMetadata ?? ''})` : '';
    return statusResult(PickResultType.DROP, code, `poise: ${err.message}${where}`);
  }

  /**
   * Gives back the leases of picks grpc-js abandoned before starting the
   * call: at the turn after the pick (a call starts within the pick's own
   * turn unless its call credentials are asynchronous) when its subchannel
   * is no longer READY, else after `startGraceMs`.
   */
  private readonly sweep = (): void => {
    const now = this.now();
    const grace = this.graceMs();
    const keep = this.spare;
    for (const c of this.pending) {
      if (c.done || c.startedAt >= 0) continue;
      if (c.subchannel.getConnectivityState() !== READY || now - c.pickedAt >= grace || this.destroyed) c.abandon();
      else keep.push(c);
    }
    this.pending.length = 0;
    this.spare = this.pending;
    this.pending = keep;
    if (keep.length > 0) setTimeout(this.sweep, Math.min(grace, 50)).unref();
    else this.sweepArmed = false;
  };

  /** A call ended (grpc-js's onCallEnded): the backend's ORCA report, then the lease with the call's outcome. @internal */
  ended(call: PoiseCall, code: number, trailers: Metadata): void {
    if (call.done) return;
    call.done = true;
    const config = this.config!;
    const lease = call.lease;
    const outcome = config.outcomes[code] ?? 'success';
    // A cancelled call's trailers are the client's own: no report.
    const report = outcome === 'cancelled' ? 0 : readOrcaTrailer(trailers, lease, this.orca);
    if (report === 1) this.counts.reports++;
    else if (report === 2) this.counts.malformedReports++;
    this.cluster?.counters?.ended(lease.slot, lease.generation, code, report);
    const latencyMs = call.latencyMs();
    if (outcome === 'success' && latencyMs >= 0 && latencyMs <= config.maxLatencySampleMs) {
      this.releaseOpts.latencyMs = latencyMs;
      lease.release('success', this.releaseOpts);
    } else lease.release(outcome);
  }
}
