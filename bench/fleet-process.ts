/**
 * One balancer process of bench/fleet.ts (compiled to dist/bench/fleet-process.js),
 * forked with IPC. It runs what a fleet member runs: a RedisMembership bound
 * to a Balancer whose pool has 2 worker routers (bench/membership-worker.js),
 * plus `subscribers` extra SUBSCRIBE connections to the same channel that
 * stand in for the other fleet members' readers: Redis writes them the same
 * notice bytes, and they only frame the RESP reply and read the version
 * (raw sockets: decoding the document is each member's own cost, on its own
 * cores in a real fleet, and is measured by the full readers here).
 *
 * Messages to the parent (times are performance.timeOrigin + performance.now(),
 * one clock for every process on the machine):
 *   { kind: 'ready', version }          bound, every worker at `version`, every subscriber subscribed
 *   { kind: 'workers', version, t, majorGcs }  both workers route with `version`; the fewest full GCs any thread has run
 *   { kind: 'subs', version, t }        every extra subscriber received the notice of `version`
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { RedisMembership } from '../src/redis.js';
import { Balancer, bindMembership, createLogger, createWorkerPool } from '../src/runtime.js';
import { countMajorGcs, workersAt } from './membership-worker.js';

interface Config {
  url: string;
  cluster: string;
  prefix: string;
  channel: string;
  subscribers: number;
  threads: number;
  capacity: number;
  policy: string;
}

/**
 * A SUBSCRIBE connection on a raw socket: frames RESP push replies
 * (`*3 $7 message $n channel $n payload`) and calls `onMessage` with the
 * payload's version, read from its fixed `{"version":N,` prefix.
 */
function rawSubscriber(port: number, channel: string, onMessage: (version: number) => void): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf: Buffer = Buffer.alloc(0);
    let subscribed = false;
    sock.on('data', (d: Buffer) => {
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      for (;;) {
        const parts = frame(buf);
        if (parts === undefined) break;
        buf = buf.subarray(parts.end);
        if (parts.kind === 'message') onMessage(Number(/^\{"version":(\d+),/.exec(parts.head)?.[1] ?? Number.NaN));
        else if (parts.kind === 'subscribe' && !subscribed) {
          subscribed = true;
          resolve(sock);
        }
      }
    });
    sock.once('error', reject);
    sock.on('connect', () => sock.write(`*2\r\n$9\r\nSUBSCRIBE\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`));
  });
}

/** One complete RESP array of bulk strings / integers at the start of `b`, or undefined when incomplete. */
function frame(b: Buffer): { kind: string; head: string; end: number } | undefined {
  const line = (at: number): { text: string; next: number } | undefined => {
    const nl = b.indexOf('\r\n', at);
    return nl < 0 ? undefined : { text: b.toString('latin1', at, nl), next: nl + 2 };
  };
  const header = line(0);
  if (header === undefined) return undefined;
  const n = Number(header.text.slice(1));
  let at = header.next;
  const heads: string[] = [];
  for (let i = 0; i < n; i++) {
    const h = line(at);
    if (h === undefined) return undefined;
    if (h.text.startsWith(':')) {
      at = h.next;
      continue;
    }
    const len = Number(h.text.slice(1));
    if (b.length < h.next + len + 2) return undefined;
    heads.push(b.toString('latin1', h.next, h.next + Math.min(len, 40)));
    at = h.next + len + 2;
  }
  return { kind: heads[0] ?? '', head: heads[2] ?? '', end: at };
}

const now = (): number => performance.timeOrigin + performance.now();
const send = (m: Record<string, unknown>): void => void process.send!(m);

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2]!) as Config;
  const logger = createLogger({ level: 'warn' });
  // cells: [0] stop, [1] next worker index, [2] doorbell, [3 + i] worker i's version (the layout of membership-worker.ts)
  const view = new Int32Array(new SharedArrayBuffer(4 * (3 + cfg.threads)));
  // Full collections so far: [0] this thread, [1 + i] worker i.
  const mainGcs = new Int32Array(new SharedArrayBuffer(4));
  const workerGcs = new Int32Array(new SharedArrayBuffer(4 * cfg.threads));
  countMajorGcs(mainGcs, 0);
  /** The fewest full collections any thread of this process has run. */
  const fewestGcs = (): number =>
    Math.min(Atomics.load(mainGcs, 0), ...Array.from({ length: cfg.threads }, (_, i) => Atomics.load(workerGcs, i)));
  const balancer = new Balancer({ capacity: cfg.capacity, logger });
  const allAt = (version: number): Promise<void> => workersAt(view, cfg.threads, version);
  let started = false;
  const target = {
    update(snapshot: Parameters<Balancer['update']>[0]): number {
      const v = balancer.update(snapshot);
      // Atomics.store + notify: workers sleep on the doorbell with Atomics.waitAsync.
      Atomics.store(view, 2, v);
      Atomics.notify(view, 2);
      if (started) void allAt(v).then(() => send({ kind: 'workers', version: v, t: now(), majorGcs: fewestGcs() }));
      return v;
    },
  };
  const source = new RedisMembership({ url: cfg.url, cluster: cfg.cluster, prefix: cfg.prefix, logger });
  const binding = await bindMembership(source, target, { logger });
  const pool = createWorkerPool({
    balancer,
    filename: new URL('./membership-worker.js', import.meta.url),
    threads: cfg.threads,
    policy: cfg.policy as never,
    workerData: { cells: view.buffer, gc: workerGcs.buffer },
  });
  const tasks = Array.from({ length: cfg.threads }, () => pool.run({}));
  await allAt(balancer.version);

  // The other fleet members' readers: raw subscribers; only the version prefix is read.
  const latest = new Map<number, number>(); // version → subscribers that have it
  const subs: net.Socket[] = [];
  const port = Number(new URL(cfg.url).port);
  for (let i = 0; i < cfg.subscribers; i++) {
    subs.push(
      await rawSubscriber(port, cfg.channel, (version) => {
        const count = (latest.get(version) ?? 0) + 1;
        latest.set(version, count);
        if (count === cfg.subscribers) {
          latest.delete(version);
          send({ kind: 'subs', version, t: now() });
        }
      }),
    );
  }
  started = true;
  send({ kind: 'ready', version: balancer.version });

  process.on('message', async (m: { kind: string }) => {
    if (m.kind !== 'stop') return;
    for (const s of subs) s.destroy();
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
