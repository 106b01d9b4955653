/**
 * The owner side of `TcpProxy({ workers: N })`: N worker threads
 * (proxy-worker.ts), each listening on the same address with `reusePort`
 * and each routing with its own Router over the one Balancer's LoadTable.
 * The first worker binds (port 0 picks a free port); the others bind the
 * port it got. When the owner's thread accepts too (`TcpProxy`'s
 * `thisThreadAccepts`), it is thread 0 and has bound first: the workers are
 * threads 1..N-1 and join its port. Each worker is watched by the Balancer, so a worker that dies
 * has its leases reclaimed; then the owner takes back its connection-limit
 * slots and its open connections' counters, and starts a new worker on the
 * same index (same rows) after a backoff, while the other workers keep the
 * port served. The messages are in proxy-messages.ts.
 * @internal
 */
import type net from 'node:net';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../log.js';
import type { AdmissionStats } from '../admission/admission.js';
import type { Balancer } from '../runtime/balancer.js';
import type { RouterOptions } from '../runtime/router.js';
import type { ConnectionLimit } from './connection-limit.js';
import type { ConnectionOptions } from './options.js';
import type { ProxyCounters } from './counters.js';
import {
  errorFromData,
  type OwnerMessage,
  type ProxyEventName,
  type ProxyWorkerData,
  type WorkerAdmission,
  type WorkerMessage,
} from './messages.js';

/** Node >= 22.12 on Linux: `server.listen({ reusePort: true })` exists (SO_REUSEPORT), so worker threads can each accept. */
export function reusePortSupported(version: string = process.versions.node, platform: string = process.platform): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return platform === 'linux' && (major > 22 || (major === 22 && minor >= 12));
}

const ENTRY = fileURLToPath(new URL('./worker-main.js', import.meta.url));

/** Restart backoff of a dead worker: `initialMs` doubling per quick death up to `maxMs`; a worker that lived `stableMs` resets it. @internal */
export interface RestartBackoff {
  initialMs: number;
  maxMs: number;
  stableMs: number;
}

/** The default restart backoff: 100 ms doubling to 10 s, reset after 30 s alive. @internal */
export const RESTART_BACKOFF: RestartBackoff = { initialMs: 100, maxMs: 10_000, stableMs: 30_000 };

/** @internal */
export interface ProxyWorkersOptions {
  balancer: Balancer;
  policy: RouterOptions['policy'];
  connection: ConnectionOptions;
  host: string;
  port: number;
  /** Accepting threads in all, the owner's included when it accepts (`from` 1). */
  threads: number;
  /** The first worker's thread index: 0, or 1 when the owner's thread is thread 0 (it accepts, and has bound `bound`). */
  from?: number;
  /** With `from` 1: the address the owner's thread bound; every worker joins its port. */
  bound?: net.AddressInfo;
  reusePort: boolean;
  youngGenerationMb: number;
  limit: ConnectionLimit;
  counters: ProxyCounters;
  /** Worker i counts into counter row `counterRow + i`. */
  counterRow: number;
  admission: WorkerAdmission | undefined;
  log: Logger;
  /** Receives the workers' forwarded events (while {@link ProxyWorkers.forwardEvents} is on). */
  emit: (event: ProxyEventName, arg: unknown) => void;
  /** Whether events are forwarded from the start. */
  events: boolean;
  restart?: RestartBackoff | undefined;
}

/** @internal */
export class ProxyWorkers {
  /** Worker of each index; undefined while a dead one waits for its restart. */
  private readonly slots: (Worker | undefined)[];
  private readonly o: ProxyWorkersOptions;
  private readonly backoff: RestartBackoff;
  private readonly startedAt: number[];
  private readonly quickDeaths: number[];
  private readonly timers: (NodeJS.Timeout | undefined)[];
  /** Whether the worker of each index has reported its listening socket and not died since. */
  private readonly listeningAt: boolean[];
  private bound: net.AddressInfo | undefined;
  /** The first worker's thread index (the slots below it are the owner's thread: never a Worker). */
  private readonly from: number;
  private nextId = 0;
  private stopping = false;
  private events: boolean;
  /** Workers started again after a death, all indices. */
  restarts = 0;

  private constructor(o: ProxyWorkersOptions) {
    this.o = o;
    this.backoff = o.restart ?? RESTART_BACKOFF;
    this.events = o.events;
    this.from = o.from ?? 0;
    this.bound = o.bound;
    this.slots = new Array<Worker | undefined>(o.threads).fill(undefined);
    this.startedAt = new Array<number>(o.threads).fill(0);
    this.quickDeaths = new Array<number>(o.threads).fill(0);
    this.timers = new Array<NodeJS.Timeout | undefined>(o.threads).fill(undefined);
    this.listeningAt = new Array<boolean>(o.threads).fill(false);
  }

  /** Starts the workers; resolves once every one listens, rejects (all stopped) when one cannot. */
  static async start(o: ProxyWorkersOptions): Promise<ProxyWorkers> {
    const pw = new ProxyWorkers(o);
    try {
      let next = pw.from;
      if (pw.bound === undefined) pw.bound = await pw.spawn(next++, o.port);
      const port = pw.bound.port;
      await Promise.all(Array.from({ length: o.threads - next }, (_, i) => pw.spawn(next + i, port)));
    } catch (err) {
      await pw.close({ drain: false });
      throw err;
    }
    return pw;
  }

  /** Accepting threads, the owner's included when it accepts (a dead worker waiting for its restart included). */
  get threads(): number {
    return this.slots.length;
  }

  /**
   * Whether every worker thread accepts now: each has reported its listening
   * socket, none is dead and waiting for its restart, and none was told to
   * stop accepting.
   */
  get allAccepting(): boolean {
    return !this.stopping && this.listeningAt.every((on, i) => on || i < this.from);
  }

  /** The shared bound address. */
  address(): net.AddressInfo {
    return this.bound!;
  }

  /** The worker thread of `index` now (undefined while it waits for a restart). @internal (tests) */
  worker(index: number): Worker | undefined {
    return this.slots[index];
  }

  /** Forward the workers' `'spliced'` / `'closed'` / `'failed'` events (on while the owner's proxy has listeners). */
  forwardEvents(on: boolean): void {
    if (on === this.events) return;
    this.events = on;
    for (const w of this.slots) w?.postMessage({ type: 'events', on } satisfies OwnerMessage);
  }

  /**
   * Every worker's admission-gate figures, in worker order from thread
   * `from` (undefined for a worker without bands or waiting for its restart). One message round
   * trip per worker: a message posted before it has been handled when it
   * resolves.
   */
  admissionStats(): Promise<(AdmissionStats | undefined)[]> {
    return Promise.all(this.slots.slice(this.from).map((w) => (w === undefined ? Promise.resolve(undefined) : this.admissionOf(w))));
  }

  private admissionOf(w: Worker): Promise<AdmissionStats | undefined> {
    return new Promise<AdmissionStats | undefined>((resolve) => {
      const id = this.nextId++;
      const done = (stats: AdmissionStats | undefined): void => {
        w.off('message', on);
        w.off('exit', gone);
        resolve(stats);
      };
      const on = (m: WorkerMessage): void => {
        if (m.type === 'admission' && m.id === id) done(m.admission);
      };
      // A worker that dies before it answers has nothing to report any more.
      const gone = (): void => done(undefined);
      w.on('message', on);
      w.once('exit', gone);
      w.postMessage({ type: 'admission', id } satisfies OwnerMessage);
    });
  }

  /** Closes every worker's listening socket; resolves once none accepts (a worker that is gone counts as stopped). */
  stopAccepting(): Promise<void> {
    // No restart from here on: a worker that dies now stays dead.
    this.stopping = true;
    this.clearTimers();
    return Promise.all(
      this.slots.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w === undefined || w.threadId < 0) {
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
    this.clearTimers();
    const cuts = await Promise.all(
      this.slots.map(
        (w) =>
          new Promise<number>((resolve) => {
            if (w === undefined || w.threadId < 0) {
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

  private clearTimers(): void {
    for (let i = 0; i < this.timers.length; i++) {
      if (this.timers[i] !== undefined) clearTimeout(this.timers[i]);
      this.timers[i] = undefined;
    }
  }

  private data(index: number, port: number): ProxyWorkerData {
    const o = this.o;
    const name = (o.log.bindings() as { name?: unknown }).name;
    return {
      index,
      attachment: o.balancer.attachment(),
      router: o.policy === undefined ? {} : { policy: o.policy },
      connection: o.connection,
      host: o.host,
      port,
      reusePort: o.reusePort,
      limit: o.limit.buffer,
      maxConnections: o.limit.max,
      counters: o.counters.buffer,
      counterRow: o.counterRow + index,
      admission: o.admission,
      events: this.events,
      logName: typeof name === 'string' ? name : 'poise',
      logLevel: o.log.level,
    };
  }

  private onMessage(m: WorkerMessage): void {
    if (m.type !== 'event') return;
    if (m.event === 'failed') this.o.emit('failed', errorFromData(m.arg));
    else this.o.emit(m.event, m.arg);
  }

  private spawn(index: number, port: number): Promise<net.AddressInfo> {
    const data = this.data(index, port);
    const w = new Worker(ENTRY, {
      workerData: { poiseProxy: data },
      resourceLimits: { maxYoungGenerationSizeMb: this.o.youngGenerationMb },
    });
    // The Balancer's 'exit' listener comes first, so the dead thread's lease
    // row is reclaimed before ours runs (and before any new worker attaches).
    this.o.balancer.watchWorker(w, index);
    this.slots[index] = w;
    this.startedAt[index] = performance.now();
    // The forwarding state may have changed between workerData and now.
    if (this.events !== data.events) w.postMessage({ type: 'events', on: this.events } satisfies OwnerMessage);
    w.on('message', (m: WorkerMessage) => this.onMessage(m));
    return new Promise((resolve, reject) => {
      const failed = (err: Error): void => {
        w.off('message', onMessage);
        w.off('error', onError);
        w.off('exit', onExit);
        // A worker that failed to listen may still emit 'error' while it is
        // terminated: without a listener that would be the owner's uncaught
        // exception (exit 1), so its later errors are only logged.
        w.on('error', (e) => this.o.log.debug({ err: e.message, worker: index }, 'proxy: worker error after a failed start'));
        if (this.slots[index] === w) this.slots[index] = undefined;
        reject(err);
      };
      const onExit = (code: number): void => failed(new Error(`proxy worker ${index} exited with code ${code} before listening`));
      // A thread that cannot start (ERR_WORKER_INIT_FAILED: EMFILE when the process is out of descriptors) names itself.
      const onError = (err: Error & { code?: unknown }): void =>
        failed(Object.assign(new Error(`proxy worker ${index} could not start: ${err.message}`, { cause: err }), { code: err.code }));
      w.once('exit', onExit);
      w.once('error', onError);
      const onMessage = (m: WorkerMessage): void => {
        if (m.type !== 'listening' && m.type !== 'error') return;
        if (m.type === 'error') {
          void w.terminate();
          failed(Object.assign(new Error(m.message), { code: m.code }));
          return;
        }
        w.off('message', onMessage);
        w.off('exit', onExit);
        w.off('error', onError);
        w.on('error', (err) => this.o.log.error({ err: err.message, worker: index }, 'proxy: worker failed'));
        w.once('exit', (code) => this.died(index, w, code));
        this.listeningAt[index] = true;
        resolve(m.address);
      };
      w.on('message', onMessage);
    });
  }

  /** A listening worker exited: take back its connection-limit slots and open-connection counts, then restart it after the backoff. */
  private died(index: number, w: Worker, code: number): void {
    if (this.slots[index] === w) this.slots[index] = undefined;
    this.listeningAt[index] = false;
    // Its leases were reclaimed by the Balancer's own 'exit' listener (registered first).
    const slots = this.o.limit.reclaim(index);
    const lost = this.o.counters.reclaim(this.o.counterRow + index);
    if (this.stopping) return;
    const b = this.backoff;
    if (performance.now() - this.startedAt[index]! >= b.stableMs) this.quickDeaths[index] = 0;
    this.scheduleRestart(index, { code, lost, slots });
  }

  private scheduleRestart(index: number, fields: Record<string, unknown>): void {
    const b = this.backoff;
    const n = this.quickDeaths[index]!;
    this.quickDeaths[index] = n + 1;
    const delay = Math.min(b.maxMs, b.initialMs * 2 ** Math.min(n, 30));
    this.o.log.error({ worker: index, ...fields, restartInMs: delay }, 'proxy: worker exited; restarting it');
    const timer = setTimeout(() => {
      this.timers[index] = undefined;
      if (this.stopping) return;
      this.spawn(index, this.bound!.port).then(
        () => {
          this.restarts++;
        },
        (err: Error & { code?: unknown }) => {
          this.o.limit.reclaim(index);
          this.o.counters.reclaim(this.o.counterRow + index);
          if (!this.stopping) this.scheduleRestart(index, { err: err.message, code: err.code });
        },
      );
    }, delay);
    // Not unref'd: with one accepting worker (Node 20) this timer is what keeps the process up until it listens again.
    this.timers[index] = timer;
  }
}
