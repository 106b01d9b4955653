/**
 * One balancer process of bench/fleet.ts (compiled to dist/bench/fleet-process.js),
 * forked with IPC. It runs what a fleet member runs: a RedisMembership bound
 * to a Balancer whose pool has 2 worker routers (bench/membership-worker.js),
 * plus `subscribers` extra plain SUBSCRIBE connections to the same channel
 * that stand in for the other fleet members' readers (they receive the same
 * notice bytes from Redis and note its version).
 *
 * Messages to the parent (times are performance.timeOrigin + performance.now(),
 * one clock for every process on the machine):
 *   { kind: 'ready', version }          bound, every worker at `version`, every subscriber subscribed
 *   { kind: 'workers', version, t }     both workers route with `version`
 *   { kind: 'subs', version, t }        every extra subscriber received the notice of `version`
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { RedisMembership } from '../src/redis.js';
import { Balancer, bindMembership, createLogger, createWorkerPool } from '../src/runtime.js';

type WaitAsync = (ta: Int32Array, index: number, value: number, timeoutMs: number) => { async: boolean; value: Promise<string> | string };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

interface Config {
  url: string;
  cluster: string;
  prefix: string;
  channel: string;
  subscribers: number;
  threads: number;
  capacity: number;
}

const now = (): number => performance.timeOrigin + performance.now();
const send = (m: Record<string, unknown>): void => void process.send!(m);

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2]!) as Config;
  const logger = createLogger({ level: 'warn' });
  // cells: [0] stop, [1] next worker index, [2] doorbell, [3 + i] worker i's version (the layout of membership-worker.ts)
  const view = new Int32Array(new SharedArrayBuffer(4 * (3 + cfg.threads)));
  const balancer = new Balancer({ capacity: cfg.capacity, logger });
  const allAt = async (version: number): Promise<void> => {
    for (let i = 0; i < cfg.threads; i++) {
      // Atomics.load pairs with the worker's Atomics.store; waitAsync wakes on its notify.
      for (let seen = Atomics.load(view, 3 + i); seen < version; seen = Atomics.load(view, 3 + i)) {
        const w = waitAsync(view, 3 + i, seen, 1000);
        if (w.async) await w.value;
      }
    }
  };
  let started = false;
  const target = {
    update(snapshot: Parameters<Balancer['update']>[0]): number {
      const v = balancer.update(snapshot);
      // Atomics.store + notify: workers sleep on the doorbell with Atomics.waitAsync.
      Atomics.store(view, 2, v);
      Atomics.notify(view, 2);
      if (started) void allAt(v).then(() => send({ kind: 'workers', version: v, t: now() }));
      return v;
    },
  };
  const source = new RedisMembership({ url: cfg.url, cluster: cfg.cluster, prefix: cfg.prefix, logger });
  const binding = await bindMembership(source, target, { logger });
  const pool = createWorkerPool({
    balancer,
    filename: new URL('./membership-worker.js', import.meta.url),
    threads: cfg.threads,
    policy: 'maglev',
    workerData: { cells: view.buffer },
  });
  const tasks = Array.from({ length: cfg.threads }, () => pool.run({}));
  await allAt(balancer.version);

  // The other fleet members' readers: plain subscribers; only the version prefix is read.
  const latest = new Map<number, number>(); // version → subscribers that have it
  const subs: Redis[] = [];
  for (let i = 0; i < cfg.subscribers; i++) {
    const sub = new Redis(cfg.url, { lazyConnect: true });
    sub.on('message', (_channel: string, message: string) => {
      const version = Number(/^\{"version":(\d+),/.exec(message)?.[1] ?? Number.NaN);
      const count = (latest.get(version) ?? 0) + 1;
      latest.set(version, count);
      if (count === cfg.subscribers) {
        latest.delete(version);
        send({ kind: 'subs', version, t: now() });
      }
    });
    await sub.connect();
    await sub.subscribe(cfg.channel);
    subs.push(sub);
  }
  started = true;
  send({ kind: 'ready', version: balancer.version });

  process.on('message', async (m: { kind: string }) => {
    if (m.kind !== 'stop') return;
    for (const s of subs) s.disconnect();
    Atomics.store(view, 0, 1);
    Atomics.notify(view, 2);
    await Promise.all(tasks);
    await pool.close();
    await binding.close();
    balancer.close();
    process.exit(0);
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
