/**
 * Membership propagation latency: from a publisher call until every pool
 * worker routes with the new version (Maglev, 1,000 backends by default).
 *
 *   node dist/bench/membership.js [--quick] [--backends N] [--changes N] [--warmup N] [--threads N] [--redis URL]
 *
 * Each scenario first makes --warmup changes (default 10) that are timed but
 * kept out of the percentiles (the first changes compile the update, refresh
 * and table-rebuild paths in every thread); they are reported separately
 * (`warmup` in the JSON and the "cold max" column).
 *
 * Without --redis it starts its own redis-server on a free loopback port.
 * Two scenarios run side by side: `setWeight` (read-modify-write through the
 * atomic script) and `apply` (a whole document). Each sample is
 * write → notice → Balancer.update → every worker's Router refreshed, the
 * Maglev table rebuilt and one pick routed with the new version. Columns
 * split the path: publisher call returned; notice received, decoded and
 * validated by the reader; Balancer.update returned; every worker routed.
 */
import { performance } from 'node:perf_hooks';
import { Rng } from '../src/core/rng.js';
import { MembershipPublisher, RedisMembership } from '../src/redis.js';
import { Balancer, bindMembership, createLogger, createWorkerPool } from '../src/runtime.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { ownRedis, summary } from './lib/redis.js';

type WaitAsync = (ta: Int32Array, index: number, value: number, timeoutMs: number) => { async: boolean; value: Promise<string> | string };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const quick = process.argv.includes('--quick');
const BACKENDS = Number(arg('backends') ?? 1000);
const CHANGES = Number(arg('changes') ?? (quick ? 20 : 100));
const WARMUP = Number(arg('warmup') ?? 10);
const THREADS = Number(arg('threads') ?? 2);
const CLUSTER = 'bench';
const PREFIX = `poise-bench-${process.pid}`;

async function main(): Promise<void> {
  const given = arg('redis');
  const own = given === undefined ? await ownRedis() : undefined;
  const url = given ?? own!.url;
  const logger = createLogger({ level: 'warn' });
  const rng = new Rng(42);
  const backends = Array.from({ length: BACKENDS }, (_, i) => ({
    id: `b${i}`,
    address: `127.0.0.1:${10_000 + (i % 50_000)}`,
    weight: 1 + rng.below(100),
  }));
  const publisher = new MembershipPublisher({ url, cluster: CLUSTER, prefix: PREFIX, logger });
  await publisher.apply({ cluster: CLUSTER, version: 1, backends }).catch(async () => publisher.apply({ cluster: CLUSTER, backends }));

  // cells: [0] stop, [1] next worker index, [2] doorbell, [3 + i] worker i's version
  const cells = new SharedArrayBuffer(4 * (3 + THREADS));
  const view = new Int32Array(cells);
  const balancer = new Balancer({ capacity: BACKENDS * 2, logger });
  let appliedAt = 0;
  let receivedAt = 0;
  const source = new RedisMembership({ url, cluster: CLUSTER, prefix: PREFIX, logger });
  const target = {
    update(snapshot: Parameters<Balancer['update']>[0]): number {
      receivedAt = performance.now(); // notice received, decoded and validated by the reader
      const v = balancer.update(snapshot);
      appliedAt = performance.now();
      // Atomics.store + notify: workers sleep on this cell with Atomics.waitAsync.
      Atomics.store(view, 2, v);
      Atomics.notify(view, 2);
      return v;
    },
  };
  const binding = await bindMembership(source, target, { logger });
  const pool = createWorkerPool({
    balancer,
    filename: new URL('./membership-worker.js', import.meta.url),
    threads: THREADS,
    policy: 'maglev',
    workerData: { cells },
  });
  const tasks = Array.from({ length: THREADS }, () => pool.run({}));

  async function allAt(version: number): Promise<void> {
    for (let i = 0; i < THREADS; i++) {
      // Atomics.load pairs with the worker's Atomics.store; waitAsync wakes on its notify.
      for (let seen = Atomics.load(view, 3 + i); seen < version; seen = Atomics.load(view, 3 + i)) {
        const w = waitAsync(view, 3 + i, seen, 1000);
        if (w.async) await w.value;
      }
    }
  }
  await allAt(balancer.version);

  const docs = [backends, backends.map((b) => ({ ...b, weight: b.weight === 100 ? 1 : b.weight + 1 }))];
  const scenarios: { name: string; write: (i: number) => Promise<number> }[] = [
    { name: 'setWeight (read-modify-write)', write: () => publisher.setWeight(`b${rng.below(BACKENDS)}`, 1 + rng.below(100)) },
    { name: 'apply (whole document)', write: (i) => publisher.apply({ cluster: CLUSTER, backends: docs[i % 2]! }) },
  ];
  const rows: Record<string, unknown>[] = [];
  const results: Record<string, unknown> = {};
  for (const sc of scenarios) {
    const total: number[] = [];
    const write: number[] = [];
    const applied: number[] = [];
    const received: number[] = [];
    const cold: number[] = [];
    for (let i = -WARMUP; i < CHANGES; i++) {
      const t0 = performance.now();
      const v = await sc.write(i + WARMUP);
      const tWrite = performance.now();
      await allAt(v);
      const tEnd = performance.now();
      if (i < 0) {
        cold.push(tEnd - t0);
        continue;
      }
      total.push(tEnd - t0);
      write.push(tWrite - t0);
      applied.push(appliedAt - t0);
      received.push(receivedAt - t0);
      if ((i + 1) % 10 === 0 || i + 1 === CHANGES) progress(`${sc.name}: ${i + 1}/${CHANGES} changes, last ${(tEnd - t0).toFixed(2)} ms`);
    }
    progressDone();
    const t = summary(total);
    const w = summary(write);
    const a = summary(applied);
    const r = summary(received);
    rows.push({
      scenario: sc.name,
      'publisher p50 ms': w.p50,
      'reader decoded p50 ms': r.p50,
      'Balancer applied p50 ms': a.p50,
      'all workers p50 ms': t.p50,
      'all workers p99 ms': t.p99,
      'max ms': t.max,
      'p99 / 20 ms target': t.p99 / 20,
      'cold max ms': cold.length > 0 ? Math.max(...cold) : 0,
    });
    results[sc.name] = { total: t, publisherCall: w, readerDecoded: r, balancerApplied: a, samples: total, warmup: cold };
  }

  Atomics.store(view, 0, 1);
  Atomics.notify(view, 2);
  await Promise.all(tasks);
  await pool.close();
  await binding.close();
  balancer.close();
  await publisher.close();
  own?.child.kill('SIGKILL');

  console.log(
    `\nmembership propagation: ${BACKENDS} backends, ${CHANGES} changes per scenario after ${WARMUP} warm-up changes, ${THREADS} pool workers, policy maglev, loopback Redis`,
  );
  console.log(formatTable(rows));
  const file = writeResults('membership', {
    backends: BACKENDS,
    changes: CHANGES,
    warmupChanges: WARMUP,
    threads: THREADS,
    policy: 'maglev',
    method: 'performance.now() from before the publisher call until every worker stored (Atomics) the version it routed a Maglev pick with',
    targetP99Ms: 20,
    results,
  });
  console.log(`results: ${file}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
