/**
 * Fleet fan-out: one membership change reaching a fleet of balancer
 * processes through Redis pub/sub, 1,000 backends by default.
 *
 *   node dist/bench/fleet.js [--quick] [--readers N] [--processes P] [--backends N] [--changes N] [--warmup N] [--policy NAME]
 *                            [--notices full,delta]
 *
 * Two scenarios per notice form (default both, side by side: whole-snapshot
 * notices as publishers before delta notices sent them, and delta notices),
 * in one run against one private redis-server:
 * - one reader: 1 process (a RedisMembership bound to a Balancer with 2
 *   worker routers), 1 subscriber connection;
 * - the fleet: P processes (default 4), each a RedisMembership + Balancer +
 *   2 worker routers, and together N subscriber connections (default 200):
 *   the P readers' own plus N − P raw SUBSCRIBE sockets spread over the
 *   processes. The raw ones stand in for the readers of the other fleet
 *   members (one per machine in a real fleet, whose decode cost runs on
 *   their own cores, not on this machine's two): Redis writes each of them
 *   the same notice bytes, so the Redis side of the fan-out is the real one;
 *   they only frame the reply and read its version.
 *
 * One sample = one `setWeight` (read-modify-write through the write script):
 * from before the publisher call until both workers of every process route
 * with the new version AND every subscriber connection received its notice.
 * Redis CPU per change is INFO cpu (used_cpu_sys + used_cpu_user) over the
 * measured changes, divided by their number (it includes the publisher's
 * GET and script, the same in both scenarios).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { Rng } from '../src/core/rng.js';
import { MembershipPublisher } from '../src/redis.js';
import { createLogger } from '../src/runtime.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';
import { ownRedis, redisCpuSeconds, summary } from './lib/redis.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const quick = process.argv.includes('--quick');
const READERS = Number(arg('readers') ?? 200);
const PROCESSES = Number(arg('processes') ?? 4);
const BACKENDS = Number(arg('backends') ?? 1000);
const CHANGES = Number(arg('changes') ?? (quick ? 30 : 150));
/**
 * Changes before the measured ones: at least --warmup (default 40), and
 * then more until every thread of every process has run its first full
 * garbage collection (at most MAX_WARMUP). That collection is a start-up
 * transient: each thread's start-up heap reaches V8's first limit once,
 * somewhere in its first ~30–130 changes (`node --trace-gc` shows exactly
 * one Mark-Compact per worker thread in a whole run, 5–25 ms pauses on 2
 * shared cores), and a fixed warm-up let it land in the measured window in
 * some runs and not others. The figures are the steady state after it; the
 * warm-up changes are reported beside them ('warm-up changes', 'warm-up max
 * ms', `warmupSamples`).
 */
const WARMUP = Number(arg('warmup') ?? 40);
const MAX_WARMUP = 400;
const THREADS = 2;
/** The workers' policy: the pool default (PeakEWMA power of two choices) unless --policy names another (maglev rebuilds a 65,537-entry table per change). */
const POLICY = arg('policy') ?? 'p2c:latency';
const NOTICES = (arg('notices') ?? 'full,delta').split(',') as ('full' | 'delta')[];
if (NOTICES.some((n) => n !== 'full' && n !== 'delta')) throw new Error(`--notices: a list of full, delta; got ${arg('notices')}`);
const CLUSTER = 'fleet';
const PREFIX = `poise-fleet-${process.pid}`;
const TARGET_P99_MS = 50;
const now = (): number => performance.timeOrigin + performance.now();

interface Report {
  kind: 'ready' | 'workers' | 'subs';
  version: number;
  t?: number;
  /** With 'workers': the fewest full garbage collections any thread of that process has run. */
  majorGcs?: number;
}

/** The processes of one scenario and what they reported, by version. */
class Fleet {
  readonly children: ChildProcess[] = [];
  readonly #expect: number;
  readonly #seen = new Map<number, { count: number; last: number; workers: number; subs: number }>();
  readonly #waiters = new Map<number, () => void>();
  /** Per process: the fewest full GCs any of its threads had run, as of its last 'workers' report. */
  readonly #gcs: number[] = [];

  /** Whether every thread of every process has run its first full garbage collection (the start-up transient). */
  collected(): boolean {
    return this.#gcs.length === this.children.length && this.#gcs.every((n) => n > 0);
  }

  constructor(url: string, channel: string, processes: number, readers: number) {
    const extra = readers - processes;
    let subsProcs = 0;
    for (let p = 0; p < processes; p++) {
      // Extra subscribers spread evenly; the first (extra % processes) get one more.
      const subscribers = Math.floor(extra / processes) + (p < extra % processes ? 1 : 0);
      if (subscribers > 0) subsProcs++;
      const cfg = { url, cluster: CLUSTER, prefix: PREFIX, channel, subscribers, threads: THREADS, capacity: BACKENDS * 2, policy: POLICY };
      const child = fork(new URL('./fleet-process.js', import.meta.url), [JSON.stringify(cfg)], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      process.on('exit', () => child.kill('SIGKILL'));
      child.on('message', (m: Report) => {
        if (m.kind === 'workers') this.#gcs[p] = m.majorGcs ?? 0;
        this.#onReport(m);
      });
      this.children.push(child);
    }
    // Every process reports 'workers'; processes with extra subscribers also report 'subs'.
    this.#expect = processes + subsProcs;
  }

  #ready = 0;
  #readyWaiter: (() => void) | undefined;
  #onReport(m: Report): void {
    if (m.kind === 'ready') {
      if (++this.#ready === this.children.length) this.#readyWaiter?.();
      return;
    }
    const e = this.#seen.get(m.version) ?? { count: 0, last: 0, workers: 0, subs: 0 };
    e.count++;
    e.last = Math.max(e.last, m.t!);
    if (m.kind === 'workers') e.workers = Math.max(e.workers, m.t!);
    else e.subs = Math.max(e.subs, m.t!);
    this.#seen.set(m.version, e);
    if (e.count === this.#expect) this.#waiters.get(m.version)?.();
  }

  ready(): Promise<void> {
    return new Promise((resolve) => {
      this.#readyWaiter = resolve;
      if (this.#ready === this.children.length) resolve();
    });
  }

  /** Resolves with the times at which everything reported `version` (or rejects after 10 s). */
  async reached(version: number): Promise<{ last: number; workers: number; subs: number }> {
    const e = this.#seen.get(version);
    if (e === undefined || e.count < this.#expect) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`version ${version}: not every process reported within 10 s`)), 10_000);
        this.#waiters.set(version, () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    this.#waiters.delete(version);
    const done = this.#seen.get(version)!;
    this.#seen.delete(version);
    return done;
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolve) => {
            c.once('exit', () => resolve());
            c.send({ kind: 'stop' });
          }),
      ),
    );
  }
}

async function main(): Promise<void> {
  const startLoad = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  const own = await ownRedis();
  const logger = createLogger({ level: 'warn' });
  const admin = new Redis(own.url);
  const rng = new Rng(42);
  const backends = Array.from({ length: BACKENDS }, (_, i) => ({
    id: `b${i}`,
    address: `127.0.0.1:${10_000 + (i % 50_000)}`,
    weight: 1 + rng.below(100),
  }));
  const publishers = {
    full: new MembershipPublisher({ url: own.url, cluster: CLUSTER, prefix: PREFIX, logger, notices: 'full' }),
    delta: new MembershipPublisher({ url: own.url, cluster: CLUSTER, prefix: PREFIX, logger, notices: 'delta' }),
  };
  await publishers.full.apply({ cluster: CLUSTER, backends });
  const channel = publishers.full.keys.channel;

  const scenarios = NOTICES.flatMap((notices) => [
    { name: `${notices} notices, one reader`, notices, processes: 1, readers: 1 },
    { name: `${notices} notices, ${READERS} readers`, notices, processes: PROCESSES, readers: READERS },
  ]);
  const rows: Record<string, unknown>[] = [];
  const results: Record<string, unknown> = {};
  for (const sc of scenarios) {
    progress(`${sc.name}: starting ${sc.processes} process(es), ${sc.readers} subscriber connection(s)`);
    const fleet = new Fleet(own.url, channel, sc.processes, sc.readers);
    await fleet.ready();
    const [, subscribed] = (await admin.call('PUBSUB', 'NUMSUB', channel)) as [string, number];
    if (Number(subscribed) !== sc.readers)
      throw new Error(`${sc.name}: Redis counts ${subscribed} subscribers of ${channel}, expected ${sc.readers}`);
    const total: number[] = [];
    const workers: number[] = [];
    const subs: number[] = [];
    const publish: number[] = [];
    const warm: number[] = [];
    let cpu0 = 0;
    const change = async (): Promise<{ t0: number; tPub: number; r: { last: number; workers: number; subs: number } }> => {
      const t0 = now();
      const v = await publishers[sc.notices].setWeight(`b${rng.below(BACKENDS)}`, 1 + rng.below(100));
      const tPub = now();
      return { t0, tPub, r: await fleet.reached(v) };
    };
    while (warm.length < WARMUP || (!fleet.collected() && warm.length < MAX_WARMUP)) {
      const { t0, r } = await change();
      warm.push(r.last - t0);
    }
    const collected = fleet.collected();
    if (!collected) progress(`${sc.name}: a thread had not run a full GC after ${MAX_WARMUP} warm-up changes; measuring anyway`);
    for (let i = 0; i < CHANGES; i++) {
      if (i === 0) cpu0 = await redisCpuSeconds(admin);
      const { t0, tPub, r } = await change();
      total.push(r.last - t0);
      workers.push(r.workers - t0);
      if (sc.readers > sc.processes) subs.push(r.subs - t0);
      publish.push(tPub - t0);
      if ((i + 1) % 10 === 0 || i + 1 === CHANGES) progress(`${sc.name}: ${i + 1}/${CHANGES} changes, last ${(r.last - t0).toFixed(2)} ms`);
    }
    const cpuMsPerChange = (((await redisCpuSeconds(admin)) - cpu0) * 1000) / CHANGES;
    progressDone();
    await fleet.stop();
    const t = summary(total);
    const w = summary(workers);
    const s = subs.length > 0 ? summary(subs) : undefined;
    rows.push({
      scenario: sc.name,
      notices: sc.notices,
      processes: sc.processes,
      'subscriber conns': sc.readers,
      'publisher p50 ms': summary(publish).p50,
      'all workers p50 ms': w.p50,
      'all subscribers p50 ms': s?.p50,
      'everything p50 ms': t.p50,
      'everything p99 ms': t.p99,
      'max ms': t.max,
      'Redis CPU ms/change': cpuMsPerChange,
      'warm-up changes': warm.length,
      'warm-up max ms': warm.length > 0 ? summary(warm).max : undefined,
    });
    results[sc.name] = {
      notices: sc.notices,
      processes: sc.processes,
      workersPerProcess: THREADS,
      subscriberConnections: sc.readers,
      everything: t,
      allWorkers: w,
      allSubscribers: s,
      publisherCall: summary(publish),
      redisCpuMsPerChange: cpuMsPerChange,
      samples: total,
      warmupChanges: warm.length,
      firstFullGcInWarmup: collected,
      warmupSamples: warm,
    };
  }
  await publishers.full.close();
  await publishers.delta.close();
  admin.disconnect();
  own.child.kill('SIGKILL');

  console.log(
    `\nfleet fan-out: ${BACKENDS} backends, ${CHANGES} setWeight changes per scenario after a warm-up of at least ${WARMUP} and until every thread's first full GC, ${THREADS} worker routers per process (${POLICY}), loopback Redis`,
  );
  console.log(formatTable(rows));
  for (const notices of NOTICES) {
    const fleetRow = results[`${notices} notices, ${READERS} readers`] as { everything: { p99: number } };
    console.log(`p99 at ${READERS} readers, ${notices} notices: ${fleetRow.everything.p99.toFixed(2)} ms (target <= ${TARGET_P99_MS} ms)`);
  }
  console.log(
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} on ${cpus().length} cpus (at the end of the run; at the start: ${startLoad})`,
  );
  const file = writeResults('fleet', {
    backends: BACKENDS,
    changes: CHANGES,
    warmupChanges: { min: WARMUP, max: MAX_WARMUP, until: "every thread's first full garbage collection" },
    readers: READERS,
    processes: PROCESSES,
    policy: POLICY,
    method:
      'performance.timeOrigin + performance.now() (one clock for all processes) from before publisher.setWeight until both worker routers of every process routed a pick with the new version and every subscriber connection received its notice',
    notices: NOTICES,
    targetP99Ms: TARGET_P99_MS,
    loadAverageAtStart: startLoad,
    loadAverage: loadavg(),
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
