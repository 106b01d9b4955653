/**
 * One gRPC call's lease, from its pick to its end, and the latency it
 * reports: the time from the call's start to its **first response message**
 * (or to its status when no message comes: trailers-only answers, errors).
 *
 * grpc-js gives a picker two hooks, `onCallStarted` and `onCallEnded`; it
 * has no hook for the first message. So the pick result's subchannel is the
 * call itself: a thin stand-in for the leaf's subchannel that delegates
 * every method, except that `getRealSubchannel()` returns the call, whose
 * `createCall` opens the stream on the real subchannel with the call as the
 * stream's listener — it notes the first message's time and passes every
 * event on unchanged. grpc-js calls `getRealSubchannel().createCall(...)`
 * once per attempt (load-balancing-call.ts); nothing else reaches the real
 * subchannel through a pick result. A long stream thus samples the time to
 * its first message, not its life.
 * @internal
 */
import type { experimental, Metadata } from '@grpc/grpc-js';
import * as grpc from '@grpc/grpc-js';
import type { Lease } from '../runtime/lease.js';
import { decodeOrcaReport, OrcaDecode, type OrcaFigures } from './orca.js';

const PickResultType = grpc.experimental.PickResultType;
type Sub = experimental.SubchannelInterface;

/** The trailer a backend reports its load in (ORCA, binary). */
export const ORCA_TRAILER = 'endpoint-load-metrics-bin';

/**
 * Reads a call's ORCA trailer (its last value) into the lease's backend-load
 * words: 0 when there is none, 1 when recorded, 2 when malformed (ignored).
 * `f` is the reader's reused figures object.
 */
export function readOrcaTrailer(trailers: Metadata, lease: Lease, f: OrcaFigures): 0 | 1 | 2 {
  const values = trailers.get(ORCA_TRAILER);
  const v = values.length > 0 ? values[values.length - 1] : undefined;
  if (!(v instanceof Uint8Array) || v.length === 0) return 0;
  if (decodeOrcaReport(v, f) !== OrcaDecode.Ok) return 2;
  lease.reportLoad(f.utilization, f.qps, f.eps);
  return 1;
}

/** What grpc-js's subchannel stream calls back (its `SubchannelCallInterceptingListener`). */
interface StreamListener {
  onReceiveMetadata(metadata: Metadata): void;
  onReceiveMessage(message: unknown): void;
  onReceiveStatus(status: unknown): void;
}

/** The real subchannel's `createCall` (grpc-js's `Subchannel`). */
interface RealSubchannel {
  createCall(metadata: Metadata, host: string, method: string, listener: StreamListener, callId?: number): unknown;
}

/** What a call reports to its balancer. @internal */
export interface CallOwner {
  /** grpc-js started the call (its `onCallStarted`). */
  started(call: PoiseCall): void;
  /** The call's status arrived (grpc-js's `onCallEnded`). */
  ended(call: PoiseCall, code: number, trailers: Metadata): void;
  /** The call was picked but never started: its lease was given back. */
  abandoned(): void;
  /** The clock of latency samples, ms. */
  readonly now: () => number;
}

/** One call's lease and pick result (see the file comment). @internal */
export class PoiseCall implements StreamListener, Sub {
  readonly result: experimental.PickResult;
  readonly pickedAt: number;
  /** When grpc-js started the call (its `onCallStarted`), or -1. */
  startedAt = -1;
  /** When its first response message arrived, or -1. */
  firstMessageAt = -1;
  done = false;
  readonly lease: Lease;
  /** The leaf's subchannel this call goes out on. */
  readonly subchannel: Sub;
  private readonly owner: CallOwner;
  private listener: StreamListener | undefined;

  constructor(owner: CallOwner, lease: Lease, subchannel: Sub) {
    this.owner = owner;
    this.lease = lease;
    this.subchannel = subchannel;
    this.pickedAt = owner.now();
    this.result = {
      pickResultType: PickResultType.COMPLETE,
      subchannel: this,
      status: null,
      onCallStarted: () => {
        if (this.done) return;
        this.startedAt = this.owner.now();
        owner.started(this);
      },
      onCallEnded: (code, _details, trailers) => owner.ended(this, code, trailers),
    };
  }

  /**
   * The latency sample of the call ending now: its start to its first
   * message, else to now (its status); -1 when it never started.
   */
  latencyMs(): number {
    if (this.startedAt < 0) return -1;
    return (this.firstMessageAt >= 0 ? this.firstMessageAt : this.owner.now()) - this.startedAt;
  }

  /** Gives the lease back without a sample: grpc-js never started the call. */
  abandon(): void {
    if (this.done) return;
    this.done = true;
    this.lease.release('cancelled');
    this.owner.abandoned();
  }

  /** The stream on the real subchannel, with this call as its listener. */
  createCall(metadata: Metadata, host: string, method: string, listener: StreamListener, callId?: number): unknown {
    this.listener = listener;
    return (this.subchannel.getRealSubchannel() as unknown as RealSubchannel).createCall(metadata, host, method, this, callId);
  }

  onReceiveMetadata(metadata: Metadata): void {
    this.listener!.onReceiveMetadata(metadata);
  }

  onReceiveMessage(message: unknown): void {
    if (this.firstMessageAt < 0) this.firstMessageAt = this.owner.now();
    this.listener!.onReceiveMessage(message);
  }

  onReceiveStatus(status: unknown): void {
    this.listener!.onReceiveStatus(status);
  }

  // --- the subchannel side: the leaf's subchannel, with getRealSubchannel() → this call -------------

  getConnectivityState(): grpc.connectivityState {
    return this.subchannel.getConnectivityState();
  }
  addConnectivityStateListener(l: Parameters<Sub['addConnectivityStateListener']>[0]): void {
    this.subchannel.addConnectivityStateListener(l);
  }
  removeConnectivityStateListener(l: Parameters<Sub['removeConnectivityStateListener']>[0]): void {
    this.subchannel.removeConnectivityStateListener(l);
  }
  startConnecting(): void {
    this.subchannel.startConnecting();
  }
  getAddress(): string {
    return this.subchannel.getAddress();
  }
  throttleKeepalive(t: number): void {
    this.subchannel.throttleKeepalive(t);
  }
  ref(): void {
    this.subchannel.ref();
  }
  unref(): void {
    this.subchannel.unref();
  }
  getChannelzRef(): ReturnType<Sub['getChannelzRef']> {
    return this.subchannel.getChannelzRef();
  }
  isHealthy(): boolean {
    return this.subchannel.isHealthy();
  }
  addHealthStateWatcher(l: Parameters<Sub['addHealthStateWatcher']>[0]): void {
    this.subchannel.addHealthStateWatcher(l);
  }
  removeHealthStateWatcher(l: Parameters<Sub['removeHealthStateWatcher']>[0]): void {
    this.subchannel.removeHealthStateWatcher(l);
  }
  addDataWatcher(w: Parameters<Sub['addDataWatcher']>[0]): void {
    this.subchannel.addDataWatcher(w);
  }
  getRealSubchannel(): ReturnType<Sub['getRealSubchannel']> {
    return this as unknown as ReturnType<Sub['getRealSubchannel']>;
  }
  realSubchannelEquals(other: Sub): boolean {
    return this.subchannel.realSubchannelEquals(other);
  }
  getCallCredentials(): ReturnType<Sub['getCallCredentials']> {
    return this.subchannel.getCallCredentials();
  }
  getChannel(): ReturnType<Sub['getChannel']> {
    return this.subchannel.getChannel();
  }
}
