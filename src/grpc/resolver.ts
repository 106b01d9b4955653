/**
 * The `poise:` resolver scheme: `poise:///orders` (or `poise:orders`) resolves
 * to the members of the cluster registered as `orders` in this thread — the
 * spec blob of its shared table — and follows the table: every membership
 * change the owner publishes (a file, Redis, DNS, Kubernetes source bound
 * to its Balancer) wakes the resolver at once (`Atomics.waitAsync` on the
 * table's change epoch), instead of grpc-js's re-resolution when a
 * connection goes idle.
 *
 * The service config: without a `grpc.service_config` channel option the
 * resolver hands grpc-js `{ loadBalancingConfig: [{ poise: {} }] }`, so the
 * channel balances with poise with no other wiring; with one, a `poise`
 * block in it that is not valid fails the resolution with UNAVAILABLE and
 * the `PoiseError` message naming the field.
 * @internal
 */
import type { ChannelOptions, experimental } from '@grpc/grpc-js';
import * as grpc from '@grpc/grpc-js';
import type { PoiseError } from '../core/errors.js';
import { parseAddress } from '../core/spec.js';
import { decodeBlob } from '../runtime/spec-blob.js';
import { lbConfigProblem } from './config.js';
import { type Cluster, findCluster } from './registry.js';

/** The attribute the resolver hands the `poise` balancer: the cluster's name. @internal */
export const CLUSTER_ATTRIBUTE = 'poise.cluster';

/** The LB policy's name in service configs, and the resolver's scheme. */
export const POISE = 'poise';

/** The wait of the watch loop; it re-arms after each (a pending wait holds no handle). */
const WATCH_MS = 60_000;

/** The cluster name of a `poise:` target: its path without the leading slashes. @internal */
export function clusterOf(target: experimental.GrpcUri): string {
  return target.path.replace(/^\/+/, '');
}

type ServiceConfig = { loadBalancingConfig: object[]; methodConfig: object[] };

/** The default service config of a `poise:` channel without one of its own. */
const DEFAULT_SERVICE_CONFIG: ServiceConfig = { loadBalancingConfig: [{ [POISE]: {} }], methodConfig: [] };

/** The problem of the channel's own service config's `poise` blocks, if any (grpc-js validated the rest). */
function serviceConfigProblem(options: ChannelOptions): PoiseError | undefined {
  const text = options['grpc.service_config'];
  if (typeof text !== 'string') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // grpc-js itself refused it at the channel's construction.
    return undefined;
  }
  const list = (parsed as { loadBalancingConfig?: unknown }).loadBalancingConfig;
  if (!Array.isArray(list)) return undefined;
  for (const entry of list) {
    if (typeof entry === 'object' && entry !== null && POISE in entry) {
      const problem = lbConfigProblem((entry as Record<string, unknown>)[POISE]);
      if (problem !== undefined) return problem;
    }
  }
  return undefined;
}

function unavailable(details: string): grpc.StatusObject {
  return { code: grpc.status.UNAVAILABLE, details, metadata: new grpc.Metadata() };
}

/** The resolver of one `poise:` channel. @internal */
export class PoiseResolver implements experimental.Resolver {
  private readonly name: string;
  private readonly listener: experimental.ResolverListener;
  private readonly problem: PoiseError | undefined;
  private readonly ownServiceConfig: boolean;
  private watching: Cluster | undefined;
  private stopped = false;
  /** The membership epoch last handed to grpc-js (-1: none yet). */
  private sentEpoch = -1;
  private sentKey = '';

  constructor(target: experimental.GrpcUri, listener: experimental.ResolverListener, options: ChannelOptions) {
    this.name = clusterOf(target);
    this.listener = listener;
    this.ownServiceConfig = typeof options['grpc.service_config'] === 'string';
    this.problem = serviceConfigProblem(options);
  }

  static getDefaultAuthority(target: experimental.GrpcUri): string {
    return clusterOf(target);
  }

  /**
   * The first call hands grpc-js the members; later ones (a leaf balancer
   * asks on every lost connection) only when they changed: the table is
   * followed anyway, and answering each with the same list would restart
   * the leaves' connection attempts, which ask again.
   */
  updateResolution(): void {
    this.stopped = false;
    // Never synchronously with the caller (the Resolver contract).
    process.nextTick(() => this.resolve(this.sentEpoch === -1));
  }

  destroy(): void {
    this.stopped = true;
    this.watching = undefined;
    this.sentEpoch = -1;
  }

  /** Hands grpc-js the cluster's members (when they changed, or `force`), then watches the table. */
  private resolve(force: boolean): void {
    if (this.stopped) return;
    if (this.problem !== undefined) {
      this.listener(
        grpc.experimental.statusOrFromValue([]),
        {},
        grpc.experimental.statusOrFromError(unavailable(`poise: ${this.problem.message}`)),
        this.problem.message,
      );
      return;
    }
    const cluster = findCluster(this.name);
    if (cluster === undefined) {
      // Unregistered meanwhile: the watch loop ends (grpc-js asks again, with its backoff).
      this.watching = undefined;
      const why = `poise: no cluster "${this.name}" is registered in this thread (registerPoiseCluster)`;
      this.listener(grpc.experimental.statusOrFromError(unavailable(why)), {}, null, why);
      return;
    }
    const epoch = cluster.table.epochs.membership();
    if (force || epoch !== this.sentEpoch) {
      const endpoints: experimental.Endpoint[] = [];
      const keys: string[] = [];
      for (const e of decodeBlob(cluster.table.specs.read()).entries) {
        const a = parseAddress(e.spec.address);
        if (a === undefined) continue;
        endpoints.push({ addresses: [{ host: a.host, port: a.port }] });
        keys.push(`${a.host}:${a.port}`);
      }
      const key = keys.join(',');
      this.sentEpoch = epoch;
      // A health change moves the epochs too: grpc-js hears only of a new address list.
      if (force || key !== this.sentKey) {
        this.sentKey = key;
        this.listener(
          grpc.experimental.statusOrFromValue(endpoints),
          { [CLUSTER_ATTRIBUTE]: this.name },
          this.ownServiceConfig ? null : grpc.experimental.statusOrFromValue(DEFAULT_SERVICE_CONFIG as never),
          '',
        );
      }
    }
    if (this.watching !== cluster) {
      this.watching = cluster;
      void this.watch(cluster);
    }
  }

  /** Waits for the table's change epoch to move, then resolves again; until destroyed or the cluster is re-registered. */
  private async watch(cluster: Cluster): Promise<void> {
    const epochs = cluster.table.epochs;
    while (!this.stopped && this.watching === cluster) {
      const seen = epochs.change();
      if (cluster.table.epochs.membership() !== this.sentEpoch) this.resolve(false);
      else await epochs.changedAsync(seen, WATCH_MS);
    }
  }
}
