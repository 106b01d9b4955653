/**
 * collectMetrics: Prometheus metrics read from the LoadTable at scrape time.
 *
 * Nothing is counted twice and nothing is sent between threads: every
 * per-backend figure is a word (or a sum of per-thread cells) of the shared
 * table, so a scrape in the owner thread covers the routers of every worker.
 * A scrape only loads shared words with `Atomics.load` — it never takes a
 * lock a router waits on and never writes — so it cannot slow or block a
 * pick; it allocates its snapshot in the scraping thread, off the routing
 * path. One snapshot is read per scrape (the first metric's `get` reads
 * it, the rest of that synchronous pass reuse it).
 *
 * The metrics are declared as tables of families (./family.ts), one per
 * room: per backend, membership and balancer, discovery, proxy, HTTP,
 * admission (./families/). This file checks the options, takes the
 * snapshot, and registers the tables in order — their order is the
 * exposition's.
 */
import { Registry, collectDefaultMetrics, register as defaultRegistry } from 'prom-client';
import { invalidConfig, checkOptionKeys } from '../core/errors.js';
import type { MembershipSource } from '../membership/source.js';
import { discoveryStatusOf } from '../discovery/status.js';
import type { ProxyCounters } from '../proxy/counters.js';
import { PriorityWeightedRandom } from '../policy/priority/policy.js';
import type { Balancer } from '../runtime/balancer.js';
import type { AdmissionStatsSource } from '../admission/admission-stats.js';
import type { GrpcBackendFigures, GrpcCounters } from '../grpc/counters.js';
import type { HttpBackendFigures, HttpCounters } from '../http/counters.js';
import { registerTable, type Family } from './family.js';
import { ADMISSION_FAMILIES } from './families/admission.js';
import { BACKEND_FAMILIES } from './families/backend.js';
import { BALANCER_FAMILIES, MEMBERSHIP_FAMILIES, SOURCE_FAMILIES, type BalancerView } from './families/balancer.js';
import { DISCOVERY_FAMILIES, type DiscoveryView } from './families/discovery.js';
import { GRPC_FAMILIES } from './families/grpc.js';
import { HTTP_FAMILIES } from './families/http.js';
import { PROXY_FAMILIES } from './families/proxy.js';
import { takeSnapshot, type BackendRow } from './snapshot.js';

export { BACKEND_STATES, DB_ROLES, type BackendState } from './snapshot.js';

/** Options of {@link collectMetrics}. */
export interface CollectMetricsOptions {
  /** Where to register; default prom-client's global `register`. */
  registry?: Registry;
  /** Metric name prefix; default `'poise_'`. Must match `[a-zA-Z_:][a-zA-Z0-9_:]*` (or be empty). */
  prefix?: string;
  /**
   * The `cluster` label value. Default: the cluster the membership in force
   * names (`balancer.cluster`: a document's `"cluster"`, a Redis source's
   * cluster), read at each scrape, else `'default'`.
   */
  cluster?: string;
  /**
   * Also register prom-client's default process and Node.js metrics
   * (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
   * `nodejs_eventloop_lag_seconds`, `nodejs_heap_size_used_bytes`, GC
   * durations, ...; unprefixed, their standard names) on the same registry,
   * unless it holds them already. Default false: an application that
   * registers them itself (prom-client refuses a second registration)
   * keeps doing so. `poise proxy --metrics` turns it on.
   */
  processMetrics?: boolean;
  /** The membership source bound to the balancer: adds its kind and connection state. */
  source?: MembershipSource;
  /** A proxy's shared counters (every worker's row): adds the `proxy_*` metrics. */
  proxy?: ProxyCounters;
  /** An admission controller: adds the `admission_*` metrics. */
  admission?: AdmissionStatsSource;
  /** The HTTP dispatchers' shared counters (`HttpCounters`, `poise-lb/http`): adds the per-backend `http_*` metrics. */
  http?: HttpCounters;
  /** The `poise` gRPC channels' shared counters (`GrpcCounters`, `poise-lb/grpc`): adds the per-backend `grpc_*` metrics. */
  grpc?: GrpcCounters;
  /** Options of the priority plan shown by `priority_*` (default Envoy's: overprovisioning 140 %, panic threshold 50 %). */
  plan?: { overprovisioningFactorPercent?: number; panicThresholdPercent?: number };
}

/** What {@link collectMetrics} registered. */
export interface MetricsCollection {
  /** The registry the metrics are in. */
  readonly registry: Registry;
  /** The full names registered. */
  readonly names: readonly string[];
  /** Removes them from the registry. */
  remove(): void;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/** The options after their checks. */
interface Checked {
  registry: Registry;
  prefix: string;
  fixedCluster: string | undefined;
  processMetrics: boolean;
}

/** Checks the balancer and the options; throws `InvalidConfig` naming the first bad one. */
function checkOptions(balancer: Balancer, opts: CollectMetricsOptions): Checked {
  if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
  checkOptionKeys(opts, ['registry', 'prefix', 'cluster', 'processMetrics', 'source', 'proxy', 'admission', 'http', 'grpc', 'plan']);
  if (typeof balancer !== 'object' || balancer === null || typeof balancer.slotEntries !== 'function')
    invalidConfig('balancer', 'must be a Balancer', balancer);
  const registry = opts.registry ?? defaultRegistry;
  if (!(registry instanceof Registry)) invalidConfig('options.registry', 'must be a prom-client Registry', registry);
  const prefix = opts.prefix ?? 'poise_';
  if (typeof prefix !== 'string' || (prefix !== '' && !NAME.test(prefix)))
    invalidConfig('options.prefix', 'must match [a-zA-Z_:][a-zA-Z0-9_:]* or be empty', prefix);
  const fixedCluster = opts.cluster;
  if (fixedCluster !== undefined && (typeof fixedCluster !== 'string' || fixedCluster.length === 0))
    invalidConfig('options.cluster', 'must be a non-empty string', fixedCluster);
  const processMetrics = opts.processMetrics ?? false;
  if (typeof processMetrics !== 'boolean') invalidConfig('options.processMetrics', 'must be a boolean', processMetrics);
  const { http, admission } = opts;
  if (http !== undefined && (typeof http !== 'object' || http === null || typeof http.figures !== 'function'))
    invalidConfig('options.http', 'must be an HttpCounters (poise-lb/http)', http);
  const grpc = opts.grpc;
  if (grpc !== undefined && (typeof grpc !== 'object' || grpc === null || typeof grpc.figures !== 'function'))
    invalidConfig('options.grpc', 'must be a GrpcCounters (poise-lb/grpc)', grpc);
  if (admission !== undefined && typeof admission?.admissionStats !== 'function')
    invalidConfig('options.admission', 'must have admissionStats()', admission);
  return { registry, prefix, fixedCluster, processMetrics };
}

/**
 * A value kept for one synchronous scrape pass (every family's `get` of one
 * `registry.metrics()` call), then dropped: `make` runs at the first read
 * of a pass.
 */
function perScrape<T>(make: () => T): () => T {
  let kept: T | undefined;
  return () => {
    if (kept !== undefined) return kept;
    const made = make();
    kept = made;
    queueMicrotask(() => {
      kept = undefined;
    });
    return made;
  };
}

/**
 * Registers the balancer's metrics (per backend, per balancer, and the
 * proxy's and admission's when given) on a prom-client registry. Every
 * value is read when the registry is scraped. Throws `InvalidConfig` naming
 * a bad option; prom-client throws when a name is already registered.
 *
 * @example
 * import { Registry } from 'prom-client';
 * const registry = new Registry();
 * collectMetrics(balancer, { registry, cluster: 'api' });
 * const text = await registry.metrics(); // poise_backend_connections{cluster="api",backend="a",...} 3
 */
export function collectMetrics(balancer: Balancer, opts: CollectMetricsOptions = {}): MetricsCollection {
  const { registry, prefix, fixedCluster, processMetrics } = checkOptions(balancer, opts);
  const planner = new PriorityWeightedRandom({ seed: 1, ...opts.plan });
  const { source, proxy, admission, http, grpc } = opts;
  const read = perScrape(() => takeSnapshot(balancer, fixedCluster ?? balancer.cluster ?? 'default', planner, admission));
  const names: string[] = [];
  const table = <T>(families: readonly Family<T>[], from: () => T): void => registerTable(registry, prefix, names, families, from);

  table(BACKEND_FAMILIES, read);
  // The views read the scrape's snapshot through a getter: the first family of a pass takes it, the rest reuse it.
  const view: BalancerView = {
    get s() {
      return read();
    },
    balancer,
    source,
  };
  table(MEMBERSHIP_FAMILIES, () => view);
  if (source !== undefined) table(SOURCE_FAMILIES, () => view);
  const status = discoveryStatusOf(source);
  if (status !== undefined) {
    const d: DiscoveryView = {
      get s() {
        return read();
      },
      status,
    };
    table(DISCOVERY_FAMILIES, () => d);
  }
  table(BALANCER_FAMILIES, () => view);
  if (proxy !== undefined)
    table(PROXY_FAMILIES, () => {
      // The scrape's snapshot is taken (and the owner's routers flushed) whichever family is read first.
      read();
      return proxy;
    });
  if (http !== undefined) {
    // One read of the shared rows per backend and scrape, shared by the five families of that pass.
    const figures = perScrape(() => {
      const m = new Map<BackendRow, HttpBackendFigures>();
      for (const r of read().rows) m.set(r, http.figures(r.slot, r.stats.generation));
      return m;
    });
    table(HTTP_FAMILIES, figures);
  }
  if (grpc !== undefined) {
    const figures = perScrape(() => {
      const m = new Map<BackendRow, GrpcBackendFigures>();
      for (const r of read().rows) m.set(r, grpc.figures(r.slot, r.stats.generation));
      return m;
    });
    table(GRPC_FAMILIES, figures);
  }
  if (admission !== undefined) table(ADMISSION_FAMILIES, read);

  // prom-client's defaults, under their standard names; left alone when the
  // registry has them already (the application registered them).
  if (processMetrics && registry.getSingleMetric('process_cpu_user_seconds_total') === undefined) {
    const before = new Set(registry.getMetricsAsArray().map((m) => m.name));
    collectDefaultMetrics({ register: registry });
    for (const m of registry.getMetricsAsArray()) if (!before.has(m.name)) names.push(m.name);
  }

  return {
    registry,
    names,
    remove: () => {
      for (const n of names) registry.removeSingleMetric(n);
    },
  };
}
