/**
 * The clusters a thread's `poise:` channels route over: a name → the shared
 * table (a Balancer's attachment). One registry per thread (module state):
 * the owner registers its Balancer, each worker the attachment it was
 * given, under the same name, and every channel of every thread then routes
 * over the one table.
 * @internal
 */
import { AdmissionGate, type AdmissionGateOptions, type AdmissionStats } from '../admission/admission.js';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { LoadTable } from '../load/load-table.js';
import { Router, type RouterAttachment } from '../runtime/router.js';
import { GrpcCounters } from './counters.js';

/** What a cluster is registered from: a Balancer (owner thread), or its `attachment()` (any thread). */
export type ClusterTarget = { attachment(): RouterAttachment } | RouterAttachment;

/** Options of `registerPoiseCluster`. */
export interface ClusterOptions {
  /**
   * Admission bands for the cluster's calls: the options of the
   * `AdmissionGate` each channel builds over its router (docs/admission.md);
   * a call's band is the value of the `poise` block's `bandMetadata` key.
   */
  admission?: AdmissionGateOptions;
  /** Shared per-backend call counters (`GrpcCounters.create`) for `/metrics` (`collectMetrics({ grpc })`). */
  counters?: GrpcCounters;
}

/** A registered cluster. @internal */
export interface Cluster {
  readonly name: string;
  readonly attachment: RouterAttachment;
  /** The table read side: the spec blob (addresses) and the epochs (changes). */
  readonly table: LoadTable;
  /** The admission gate options of each channel's router, if any. */
  readonly admission: AdmissionGateOptions | undefined;
  /** The shared call counters, if any. */
  readonly counters: GrpcCounters | undefined;
  /** The channels of this thread balancing over the cluster now (their balancers; tests and metrics read them). */
  readonly channels: Set<ChannelView>;
}

/** Counts of one channel's balancer (its thread). @internal */
export interface ChannelCounts {
  /** Calls picked. */
  picks: number;
  /** Picks grpc-js abandoned before the call started (lease given back). */
  abandoned: number;
  /** ORCA trailers recorded, ignored as malformed, or not recorded because another thread was recording. */
  reports: number;
  malformedReports: number;
  /** Retries of grpc-js's retry policy the retry budget let through. */
  retries: number;
  /** Retries refused by the retry budget (dropped with UNAVAILABLE). */
  retriesRefused: number;
}

/** What a channel's balancer shows of itself. @internal */
export interface ChannelView {
  readonly counts: ChannelCounts;
  /** Its admission gate's figures, when the cluster has admission bands. */
  admissionStats(): AdmissionStats | undefined;
}

const clusters = new Map<string, Cluster>();

/** Registers `name` in this thread (replacing an earlier registration of it). @internal */
export function putCluster(name: unknown, target: ClusterTarget, options?: ClusterOptions): Cluster {
  if (typeof name !== 'string' || !/^[A-Za-z0-9._~-]+$/.test(name))
    invalidConfig('registerPoiseCluster(name)', 'must be a non-empty name of letters, digits, ".", "_", "~" or "-"', name);
  if (typeof target !== 'object' || target === null)
    invalidConfig('registerPoiseCluster(target)', 'must be a Balancer or its attachment()', target);
  const attachment =
    typeof (target as { attachment?: unknown }).attachment === 'function'
      ? (target as { attachment(): RouterAttachment }).attachment()
      : (target as RouterAttachment);
  if (!(attachment.buffer instanceof SharedArrayBuffer))
    invalidConfig('registerPoiseCluster(target)', 'must be a Balancer or its attachment() (a SharedArrayBuffer table)', attachment.buffer);
  if (options !== undefined && (typeof options !== 'object' || options === null))
    invalidConfig('registerPoiseCluster(options)', 'must be an object', options);
  if (options !== undefined) checkOptionKeys(options, ['admission', 'counters'], 'registerPoiseCluster(options)');
  const admission = checkAdmission(attachment, options?.admission);
  const counters = options?.counters;
  if (counters !== undefined && !(counters instanceof GrpcCounters))
    invalidConfig('registerPoiseCluster(options).counters', 'must be a GrpcCounters (GrpcCounters.create or .attach)', counters);
  const table = LoadTable.attach(attachment.buffer);
  if (counters !== undefined && counters.capacity < table.capacity)
    invalidConfig(
      'registerPoiseCluster(options).counters',
      `has ${counters.capacity} rows, fewer than the table's ${table.capacity} slots`,
    );
  const cluster: Cluster = { name, attachment, table, admission, counters, channels: new Set() };
  clusters.set(name, cluster);
  return cluster;
}

/** Forgets `name` in this thread; true when it was registered. Channels already open keep routing. @internal */
export function dropCluster(name: string): boolean {
  return clusters.delete(name);
}

/** The cluster registered under `name` in this thread. @internal */
export function findCluster(name: string): Cluster | undefined {
  return clusters.get(name);
}

/** Validates the admission options now (a gate built on a router of its own, closed at once): `InvalidConfig` naming the field. */
function checkAdmission(attachment: RouterAttachment, admission: AdmissionGateOptions | undefined): AdmissionGateOptions | undefined {
  if (admission === undefined) return undefined;
  const router = Router.attach(attachment);
  try {
    new AdmissionGate(router, admission).close();
  } finally {
    router.close();
  }
  return admission;
}
