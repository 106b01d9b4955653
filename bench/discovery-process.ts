/**
 * One process of bench/discovery.ts (compiled to dist/bench/discovery-process.js),
 * forked with IPC. Its membership comes from Kubernetes (`k8s:`) or DNS
 * (`dns:`, asking the bench's dnsmasq), two ways:
 * - `fleet`: a FleetWatcher (the discovery source runs only in the process
 *   holding the Redis watcher lease, which publishes into Redis) and a
 *   RedisMembership that every process reads, the watcher too;
 * - `direct`: its own discovery source, straight into its Balancer.
 * With `threads` > 0 a worker pool of that many routers
 * (bench/membership-worker.js) runs beside it, and the process reports when
 * every worker routes by a new membership.
 *
 * Messages to the parent (times are performance.timeOrigin + performance.now(),
 * one clock for every process on the machine):
 *   { kind: 'ready' }                      bound, a first membership in force
 *   { kind: 'routed', marker, t }          every worker routes with the membership whose marker backend is `marker`
 */
import { performance } from 'node:perf_hooks';
import { FleetWatcher } from '../src/discovery/fleet-watcher.js';
import { kubernetesSource } from '../src/discovery/kubernetes.js';
import { discoverySource as schemeSource } from '../src/discovery/schemes.js';
import { RedisMembership } from '../src/redis.js';
import { Balancer, bindMembership, createLogger, createWorkerPool } from '../src/runtime.js';
import type { MembershipSource } from '../src/membership/source.js';
import { workersAt } from './membership-worker.js';

interface Config {
  mode: 'fleet' | 'direct';
  url: string;
  cluster: string;
  /** `k8s`: `target` is NAMESPACE/SERVICE:PORT, read through `kubeconfig`; `dns`: `target` is a `dns:` spec asked of `dnsServer`. */
  kind: 'k8s' | 'dns';
  kubeconfig: string;
  dnsServer: string;
  target: string;
  threads: number;
  /** The address prefix of the one backend whose id marks an event. */
  markerPrefix: string;
}

const now = (): number => performance.timeOrigin + performance.now();
const send = (m: Record<string, unknown>): void => void process.send!(m);

/** The discovery source of a benchmark process: the Kubernetes watch, or `dns:` through the scheme registry. */
function discoverySource(cfg: Config, logger: ReturnType<typeof createLogger>): MembershipSource {
  if (cfg.kind === 'dns') return schemeSource(cfg.target, { servers: [cfg.dnsServer], logger, initial: 'wait' });
  return kubernetesSource(cfg.target, { kubeconfig: cfg.kubeconfig, cluster: cfg.cluster, logger, stallTimeoutMs: 600_000 });
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2]!) as Config;
  const logger = createLogger({ level: 'error' });
  // cells: [0] stop, [1] next worker index, [2] doorbell, [3 + i] worker i's version (the layout of membership-worker.ts)
  const view = new Int32Array(new SharedArrayBuffer(4 * (3 + cfg.threads)));
  const balancer = new Balancer({ capacity: 256, logger });
  const allAt = (version: number): Promise<void> => workersAt(view, cfg.threads, version);
  let started = false;
  const target = {
    update(snapshot: Parameters<Balancer['update']>[0]): number {
      const v = balancer.update(snapshot);
      const backends = 'backends' in snapshot ? snapshot.backends : (snapshot as readonly { id: string }[]);
      const marker = backends.find((b) => b.id.startsWith(cfg.markerPrefix))?.id;
      // Atomics.store + notify: workers sleep on the doorbell with Atomics.waitAsync.
      Atomics.store(view, 2, v);
      Atomics.notify(view, 2);
      if (started) void allAt(v).then(() => send({ kind: 'routed', marker, t: now() }));
      return v;
    },
  };
  let watcher: FleetWatcher | undefined;
  let source: MembershipSource;
  if (cfg.mode === 'fleet') {
    watcher = new FleetWatcher({ url: cfg.url, cluster: cfg.cluster, source: () => discoverySource(cfg, logger), leaseMs: 3000, logger });
    await watcher.start();
    source = new RedisMembership({ url: cfg.url, cluster: cfg.cluster, logger });
  } else source = discoverySource(cfg, logger);
  const binding = await bindMembership(source, target, { logger });
  const pool =
    cfg.threads > 0
      ? createWorkerPool({
          balancer,
          filename: new URL('./membership-worker.js', import.meta.url),
          threads: cfg.threads,
          workerData: { cells: view.buffer },
        })
      : undefined;
  const tasks = Array.from({ length: cfg.threads }, () => pool!.run({}));
  await allAt(balancer.version);
  started = true;
  send({ kind: 'ready' });

  process.on('message', async (m: { kind: string }) => {
    if (m.kind !== 'stop') return;
    Atomics.store(view, 0, 1);
    Atomics.notify(view, 2);
    await Promise.all(tasks);
    await pool?.close();
    await binding.close();
    await watcher?.close();
    balancer.close();
    process.exit(0);
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
