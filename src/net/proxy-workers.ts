/**
 * The owner side of `TcpProxy({ workers: N })`: N worker threads
 * (proxy-worker.ts), each listening on the same address with `reusePort`
 * and each routing with its own Router over the one Balancer's LoadTable.
 * The first worker binds (port 0 picks a free port); the others bind the
 * port it got. Each worker is watched by the Balancer, so a worker that dies
 * has its leases reclaimed.
 * @internal
 */
import type { ProxyCounters } from './proxy-counters.js';
import type net from 'node:net';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../log.js';
import type { Balancer } from '../runtime/balancer.js';
import type { RouterAttachment, RouterOptions } from '../runtime/router.js';
import type { ConnectionGate } from './connection-gate.js';
import type { ConnectionOptions } from './proxy-connection.js';
import type { TcpProxyStats } from './proxy-listener.js';

/** Node >= 22.12 on Linux: `server.listen({ reusePort: true })` exists (SO_REUSEPORT), so worker threads can each accept. */
export function reusePortSupported(version: string = process.versions.node, platform: string = process.platform): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return platform === 'linux' && (major > 22 || (major === 22 && minor >= 12));
}

/** What a proxy worker finds in `workerData.poiseProxy`. @internal */
export interface ProxyWorkerData {
  index: number;
  attachment: RouterAttachment;
  router: Pick<RouterOptions, 'policy'>;
  connection: ConnectionOptions;
  host: string;
  port: number;
  reusePort: boolean;
  gate: SharedArrayBuffer;
  maxConnections: number;
  /** The proxy's ProxyCounters buffer; this worker counts into row `index`. */
  counters: SharedArrayBuffer;
  logName: string;
  logLevel: string;
}

/** Owner → worker. @internal */
export type OwnerMessage = { type: 'stats'; id: number } | { type: 'stop' } | { type: 'close'; drain: boolean; graceMs?: number };
/** Worker → owner. @internal */
export type WorkerMessage =
  | { type: 'listening'; address: net.AddressInfo }
  | { type: 'error'; message: string; code: string | undefined }
  | { type: 'stats'; id: number; stats: TcpProxyStats }
  | { type: 'stopped' }
  | { type: 'closed'; cut: number };

const ENTRY = fileURLToPath(new URL('./proxy-worker.js', import.meta.url));

/** @internal */
export interface ProxyWorkersOptions {
  balancer: Balancer;
  policy: RouterOptions['policy'];
  connection: ConnectionOptions;
  host: string;
  port: number;
  threads: number;
  reusePort: boolean;
  youngGenerationMb: number;
  gate: ConnectionGate;
  counters: ProxyCounters;
  log: Logger;
}

/** @internal */
export class ProxyWorkers {
  private readonly workers: Worker[] = [];
  private readonly log: Logger;
  private bound: net.AddressInfo | undefined;
  private nextId = 0;
  private stopping = false;

  private constructor(log: Logger) {
    this.log = log;
  }

  /** Starts the workers; resolves once every one listens, rejects (all stopped) when one cannot. */
  static async start(o: ProxyWorkersOptions): Promise<ProxyWorkers> {
    const pw = new ProxyWorkers(o.log);
    const name = (o.log.bindings() as { name?: unknown }).name;
    const data = (index: number, port: number): ProxyWorkerData => ({
      index,
      attachment: o.balancer.attachment(),
      router: o.policy === undefined ? {} : { policy: o.policy },
      connection: o.connection,
      host: o.host,
      port,
      reusePort: o.reusePort,
      gate: o.gate.buffer,
      maxConnections: o.gate.max,
      counters: o.counters.buffer,
      logName: typeof name === 'string' ? name : 'poise',
      logLevel: o.log.level,
    });
    try {
      const limits = { maxYoungGenerationSizeMb: o.youngGenerationMb };
      const first = await pw.spawn(o.balancer, data(0, o.port), limits);
      pw.bound = first;
      await Promise.all(Array.from({ length: o.threads - 1 }, (_, i) => pw.spawn(o.balancer, data(i + 1, first.port), limits)));
    } catch (err) {
      await pw.close({ drain: false });
      throw err;
    }
    return pw;
  }

  /** Worker threads running. */
  get threads(): number {
    return this.workers.length;
  }

  /** The shared bound address. */
  address(): net.AddressInfo {
    return this.bound!;
  }

  /** Every worker's counters, in worker order. */
  stats(): Promise<TcpProxyStats[]> {
    return Promise.all(
      this.workers.map(
        (w) =>
          new Promise<TcpProxyStats>((resolve) => {
            const id = this.nextId++;
            const on = (m: WorkerMessage): void => {
              if (m.type !== 'stats' || m.id !== id) return;
              w.off('message', on);
              resolve(m.stats);
            };
            w.on('message', on);
            w.postMessage({ type: 'stats', id } satisfies OwnerMessage);
          }),
      ),
    );
  }

  /** Closes every worker's listening socket; resolves once none accepts (a worker that is gone counts as stopped). */
  stopAccepting(): Promise<void> {
    return Promise.all(
      this.workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.threadId < 0) {
              resolve();
              return;
            }
            const done = (): void => {
              w.off('exit', done);
              w.off('message', on);
              resolve();
            };
            const on = (m: WorkerMessage): void => {
              if (m.type === 'stopped') done();
            };
            w.once('exit', done);
            w.on('message', on);
            w.postMessage({ type: 'stop' } satisfies OwnerMessage);
          }),
      ),
    ).then(() => undefined);
  }

  /** Closes every worker's listener (see ProxyListener.close), then ends the threads; resolves with the connections cut in all. */
  async close(opts: { drain?: boolean; graceMs?: number }): Promise<{ cut: number }> {
    this.stopping = true;
    const cuts = await Promise.all(
      this.workers.map(
        (w) =>
          new Promise<number>((resolve) => {
            if (w.threadId < 0) {
              resolve(0);
              return;
            }
            const onExit = (): void => resolve(0);
            w.once('exit', onExit);
            w.on('message', (m: WorkerMessage) => {
              if (m.type !== 'closed') return;
              w.off('exit', onExit);
              void w.terminate().then(() => resolve(m.cut));
            });
            const msg: OwnerMessage = {
              type: 'close',
              drain: opts.drain === true,
              ...(opts.graceMs === undefined ? {} : { graceMs: opts.graceMs }),
            };
            w.postMessage(msg);
          }),
      ),
    );
    return { cut: cuts.reduce((a, b) => a + b, 0) };
  }

  private spawn(balancer: Balancer, data: ProxyWorkerData, resourceLimits: ResourceLimits): Promise<net.AddressInfo> {
    const w = new Worker(ENTRY, { workerData: { poiseProxy: data }, resourceLimits });
    balancer.watchWorker(w, data.index);
    this.workers.push(w);
    return new Promise((resolve, reject) => {
      const onExit = (code: number): void => reject(new Error(`proxy worker ${data.index} exited with code ${code} before listening`));
      w.once('exit', onExit);
      w.once('error', reject);
      const onMessage = (m: WorkerMessage): void => {
        if (m.type !== 'listening' && m.type !== 'error') return;
        w.off('message', onMessage);
        w.off('exit', onExit);
        w.off('error', reject);
        if (m.type === 'error') {
          reject(Object.assign(new Error(m.message), { code: m.code }));
          return;
        }
        w.on('error', (err) => this.log.error({ err: err.message, worker: data.index }, 'proxy: worker failed'));
        w.once('exit', (code) => {
          if (!this.stopping) this.log.error({ worker: data.index, code }, 'proxy: worker exited; its port share is no longer served');
        });
        resolve(m.address);
      };
      w.on('message', onMessage);
    });
  }
}
