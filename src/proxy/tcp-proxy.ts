/**
 * TcpProxy: inbound routing — `poise proxy`. Accepts TCP connections on a
 * listening address and splices each onto a backend chosen by a Router
 * (through {@link connect}, so connect failures retry on another backend and
 * feed passive health, and every spliced connection holds a connection lease
 * until either side closes).
 *
 * Threads: with `workers: N` and a `balancer`, on Node >= 22.12 on Linux, N
 * worker threads each listen on the same port with `reusePort` and each
 * route with its own Router over the Balancer's LoadTable (Sōzu's shape:
 * the kernel spreads connections, no thread computes a global minimum). On
 * older Node one worker thread accepts, and the proxy says so in one log
 * line. `workers: 0` (the default) accepts in this thread. With
 * `thisThreadAccepts`, this thread is one of the N (thread 0) beside N - 1
 * worker threads: one isolate less (`poise proxy --workers N`).
 * `maxConnections` is one counter shared by every thread.
 */
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { AdmissionGate, sumAdmissionStats, type AdmissionStats } from '../admission/admission.js';
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';
import { defaultLogger, type Logger } from '../log.js';
import type { Balancer } from '../runtime/balancer.js';
import { POLICY_NAMES, type PolicyName } from '../runtime/policies.js';
import type { Router } from '../runtime/router.js';
import { directClock } from '../runtime/clock.js';
import { ConnectionLimit, MAX_CONNECTIONS_LIMIT } from './connection-limit.js';
import { CONNECTION_OPTION_KEYS, resolveConnectionOptions, type ConnectionOptions } from './options.js';
import { ProxyListener } from './listener.js';
import type { AdmissionGateData } from './messages.js';
import { ProxyWorkers, RESTART_BACKOFF, reusePortSupported, type ProxyWorkersOptions, type RestartBackoff } from './workers.js';
import { ProxyCounters, type TcpProxyStats } from './counters.js';
import type { ProxyBandSelector } from './admission.js';

export type { TcpProxyStats } from './counters.js';
export { reusePortSupported } from './workers.js';
export type { AdmissionGateData } from './messages.js';

/** Options of {@link TcpProxy}: give `router` (this thread) or `balancer` (any number of threads). */
export interface TcpProxyOptions extends ConnectionOptions {
  /** Route with this Router, in this thread (then `workers` must be 1). */
  router?: Router;
  /** Route with routers attached to this Balancer's table: one in this thread, or one per worker. */
  balancer?: Balancer;
  /** With `balancer`: every router's policy; default `'p2c:latency'`. */
  policy?: PolicyName;
  /**
   * Accepting worker threads, 0..(table threads - 1); default 0: this thread
   * accepts (the only choice with `router`). N >= 1 needs `balancer`: N
   * worker threads each listen on the same port with `reusePort` and route
   * with their own Router — on Node >= 22.12 on Linux. Elsewhere one worker
   * thread accepts, and (for N > 1) one warn line says so. With workers,
   * `key` must be a string form, `accessLog` `'stdout'` and `timers` absent
   * (functions, loggers and timer sources cannot cross threads).
   */
  workers?: number;
  /**
   * With `workers: N`: this thread is one of the N accepting threads —
   * thread 0, counting into row `worker`, with its own Router (and, with
   * bands, its own AdmissionGate from `admissionGate`) over the balancer's
   * table — and N - 1 worker threads are started: one V8 isolate (some
   * 10 MB of RSS) less than N workers. Where reusePort is missing this
   * thread alone accepts. This thread's event loop then carries traffic.
   * Default false.
   */
  thisThreadAccepts?: boolean;
  /**
   * Connections served at once, all threads together (HAProxy `maxconn`);
   * 0 = no limit (default). A client over the limit is accepted and held
   * unread — no backend connect — until a slot frees, then served in order;
   * none is reset.
   */
  maxConnections?: number;
  /**
   * Each worker's V8 young generation, MB (`resourceLimits.maxYoungGenerationSizeMb`);
   * default 4. V8 grows the young generation of a busy thread to tens of MB,
   * which is most of a Node proxy's resident memory per connection; a small
   * one costs more frequent (cheap) scavenges.
   */
  youngGenerationMb?: number;
  /**
   * Shared counters to count into (metrics read them from any thread);
   * default a fresh {@link ProxyCounters} with a row per accepting thread.
   * In this thread the proxy counts into row `worker`; with `workers: N`
   * worker i counts into row i, so `counters.workers` must be at least N.
   */
  counters?: ProxyCounters;
  /** This thread's row in `counters`; with `workers: N` the first of N rows (worker i counts into row `worker + i`); default 0. */
  worker?: number;
  /**
   * With `workers`: how a dead worker thread is restarted — after
   * `initialMs` (default 100), doubling for each death within `stableMs`
   * (default 30 000) of its start, at most `maxMs` (default 10 000).
   */
  workerRestart?: { initialMs?: number; maxMs?: number; stableMs?: number };
  /**
   * With `workers` and `admission`: the options of the AdmissionGate that
   * each worker thread attaches to its own Router (saturation is the pool's,
   * read from the shared table; the queues are per worker).
   */
  admissionGate?: AdmissionGateData;
  /**
   * Admission band of each client (`fixedBand(rank)`, `new CidrBands(...)`).
   * With `workers: 0` it needs an `AdmissionGate` on the router; with
   * workers, give `admissionGate` too and each worker builds its own gate
   * (and its own copy of the selector). Default: none.
   */
  admission?: ProxyBandSelector;
  /** Listen address; default host 127.0.0.1, port 0 (any free port). */
  host?: string;
  port?: number;
  logger?: Logger;
}

/** Options of {@link TcpProxy.close}. */
export interface TcpProxyCloseOptions {
  /** Let open connections finish (default false: close them at once). */
  drain?: boolean;
  /** With `drain`: after this many ms close whatever is still open; default no limit. */
  graceMs?: number;
}

/**
 * @example
 * const balancer = new Balancer();
 * balancer.update([{ id: 'a', address: '127.0.0.1:7001' }, { id: 'b', address: '127.0.0.1:7002' }]);
 * const proxy = new TcpProxy({ router: balancer.router({ policy: 'p2c:connections' }), port: 6000 });
 * await proxy.listen();
 * // Several accepting threads (Node >= 22.12, Linux), at most 10,000 connections in all:
 * const wide = new TcpProxy({ balancer, workers: 4, maxConnections: 10_000, port: 6001 });
 * await wide.listen();
 */
export class TcpProxy extends EventEmitter {
  /** The shared counters this proxy counts into (metrics read them from any thread). */
  readonly counters: ProxyCounters;
  /** This thread's row in {@link TcpProxy.counters} (worker i uses row `worker + i`). */
  readonly worker: number;
  private bound = false;
  /** Accepting threads in use (after `listen`): worker threads (and this thread with `thisThreadAccepts`), or 1 when this thread accepts alone. */
  threads = 1;
  private readonly opts: TcpProxyOptions;
  private readonly log: Logger;
  private readonly limit: ConnectionLimit;
  private readonly requested: number;
  private readonly youngMb: number;
  private readonly restart: RestartBackoff;
  private listener: ProxyListener | undefined;
  private pool: ProxyWorkers | undefined;
  private readonly ownRouter: Router | undefined;
  /** With `thisThreadAccepts` and bands: this thread's own gate over its own router. */
  private readonly ownGate: AdmissionGate | undefined;

  /** Throws `InvalidConfig` naming a bad option. */
  constructor(opts: TcpProxyOptions) {
    super();
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, [
      'router',
      'balancer',
      'policy',
      'workers',
      'maxConnections',
      'youngGenerationMb',
      'admission',
      'host',
      'port',
      'logger',
      'counters',
      'worker',
      'workerRestart',
      'admissionGate',
      'thisThreadAccepts',
      ...CONNECTION_OPTION_KEYS,
    ]);
    checkRouting(opts);
    const balancer = opts.balancer;
    this.requested = integerIn(opts.workers ?? 0, 'options.workers', 0, balancer === undefined ? 0 : balancer.table.maxThreads - 1);
    this.restart = restartOptions(opts.workerRestart);
    this.youngMb = integerIn(opts.youngGenerationMb ?? 4, 'options.youngGenerationMb', 1, 1024);
    this.counters = counterRows(opts, this.requested);
    this.worker = this.counters.checkWorker(opts.worker ?? 0, 'options.worker');
    if (opts.thisThreadAccepts !== undefined && typeof opts.thisThreadAccepts !== 'boolean')
      invalidConfig('options.thisThreadAccepts', 'must be a boolean', opts.thisThreadAccepts);
    if (opts.thisThreadAccepts === true && this.requested === 0)
      invalidConfig('options.thisThreadAccepts', 'only with options.workers >= 1 (with workers 0 this thread accepts alone)', true);
    if (this.requested > 0) checkWorkerMode(opts);
    else checkLocalMode(opts);
    if (opts.host !== undefined && (typeof opts.host !== 'string' || opts.host.length === 0)) {
      invalidConfig('options.host', 'must be a non-empty string', opts.host);
    }
    integerIn(opts.port ?? 0, 'options.port', 0, 65535);
    const max = integerIn(opts.maxConnections ?? 0, 'options.maxConnections', 0, MAX_CONNECTIONS_LIMIT);
    // Validated here in either mode (a worker resolves its own copy from the same data).
    const settings = resolveConnectionOptions(opts);
    this.opts = opts;
    this.log = opts.logger ?? defaultLogger();
    // Workers post their events only while someone listens here (an unlistened proxy pays nothing per connection).
    this.on('newListener', (event: string | symbol) => {
      if (isProxyEvent(event)) this.pool?.forwardEvents(true);
    });
    this.on('removeListener', (event: string | symbol) => {
      if (isProxyEvent(event)) this.pool?.forwardEvents(this.listensForEvents());
    });
    this.limit = new ConnectionLimit(max, undefined, 0, Math.max(1, this.requested));
    // Worker mode: the workers are started by listen(); with thisThreadAccepts this thread is thread 0 of them.
    if (this.requested > 0 && opts.thisThreadAccepts !== true) return;
    this.ownRouter =
      opts.router === undefined
        ? balancer!.router({
            logger: this.log,
            // Reads per connection: the time read directly, no ticker kept awake (clock.ts, directClock).
            clock: directClock(balancer!.attachment().clock),
            ...(opts.policy === undefined ? {} : { policy: opts.policy }),
          })
        : undefined;
    // The gate attaches itself to the router: the listener's band selector admits through it.
    this.ownGate = opts.admissionGate === undefined ? undefined : new AdmissionGate(this.ownRouter!, opts.admissionGate);
    this.listener = new ProxyListener(
      settings,
      opts.router ?? this.ownRouter!,
      this.log,
      this.limit,
      (event, arg) => this.emit(event, arg),
      opts.admission,
      this.counters,
      this.worker,
    );
  }

  /**
   * The proxy's counters, every accepting thread together (read from
   * {@link TcpProxy.counters}: the same figures in any thread, no message).
   */
  get stats(): TcpProxyStats {
    return this.counters.stats(this.worker, this.threads);
  }

  /** Starts listening (every worker, in worker mode); resolves with the bound address. */
  async listen(): Promise<net.AddressInfo> {
    const host = this.opts.host ?? '127.0.0.1';
    const port = this.opts.port ?? 0;
    const reusePort = this.requested > 0 && reusePortSupported();
    if (this.requested > 1 && !reusePort) {
      this.log.warn(
        {
          workers: this.requested,
          node: process.version,
          platform: process.platform,
          requires: 'Node >= 22.12 on Linux (server.listen reusePort)',
        },
        `proxy: one thread accepts: workers ${this.requested} needs Node >= 22.12 on Linux (reusePort); this is Node ${process.version} on ${process.platform}`,
      );
    }
    const threads = reusePort ? this.requested : 1;
    // This thread first (thread 0, port 0 picks the port), then the workers join its port.
    const here = await this.listener?.listen({ host, port, reusePort: threads > 1 });
    if (this.requested > 0 && (here === undefined || threads > 1)) {
      try {
        this.pool = await ProxyWorkers.start(this.workersOptions(host, port, threads, reusePort, here));
      } catch (err) {
        await this.listener?.close();
        throw err;
      }
    }
    const address = this.pool?.address() ?? here!;
    this.threads = threads;
    this.bound = true;
    this.log.info(
      { address: `${address.address}:${address.port}`, threads: this.threads, maxConnections: this.limit.max },
      'proxy listening',
    );
    return address;
  }

  /** What ProxyWorkers starts: `threads` accepting threads, from thread 1 when this thread has bound `bound` as thread 0. */
  private workersOptions(
    host: string,
    port: number,
    threads: number,
    reusePort: boolean,
    bound: net.AddressInfo | undefined,
  ): ProxyWorkersOptions {
    return {
      balancer: this.opts.balancer!,
      policy: this.opts.policy,
      connection: connectionData(this.opts),
      host,
      port,
      threads,
      ...(bound === undefined ? {} : { from: 1, bound }),
      reusePort,
      youngGenerationMb: this.youngMb,
      limit: this.limit,
      counters: this.counters,
      counterRow: this.worker,
      admission:
        this.opts.admission === undefined ? undefined : { selector: this.opts.admission.portable!(), gate: this.opts.admissionGate! },
      log: this.log,
      emit: (event, arg) => this.emit(event, arg),
      events: this.listensForEvents(),
      restart: this.restart,
    };
  }

  private listensForEvents(): boolean {
    return this.listenerCount('spliced') + this.listenerCount('closed') + this.listenerCount('failed') > 0;
  }

  /** Worker threads started again after one died (with `workers`). */
  get restarts(): number {
    return this.pool?.restarts ?? 0;
  }

  /**
   * Whether the proxy accepts in every one of its threads now: after
   * `listen` resolved (every worker thread listening), before `stopAccepting`
   * / `close`, and — with workers — not while a dead worker waits for its
   * restart. What `/healthz` reports for the listener.
   */
  get listening(): boolean {
    return this.bound && (this.pool === undefined || this.pool.allAccepting);
  }

  /** The bound address (after `listen`). */
  address(): net.AddressInfo {
    return this.listener?.address() ?? this.pool!.address();
  }

  /**
   * Connections admitted now, all threads: the `maxConnections` count, or
   * without a limit the connections open now (accepted, not yet refused or
   * closed) in the shared counters.
   */
  get connections(): number {
    if (this.limit.max > 0) return this.limit.count;
    let n = 0;
    for (let i = 0; i < this.threads; i++) n += this.counters.open(this.worker + i);
    return n;
  }

  /**
   * Counters summed over every accepting thread, and each thread's
   * (`threads[i]` is worker i's row, cumulative over its restarts), read
   * from the shared counters. With workers and admission bands, `admission`
   * is every worker's gate summed (`sumAdmissionStats`) and
   * `admissionThreads[i]` worker i's: those are the only figures asked of
   * the workers (one message each).
   */
  async collectStats(): Promise<{
    total: TcpProxyStats;
    threads: TcpProxyStats[];
    admission?: AdmissionStats;
    admissionThreads?: (AdmissionStats | undefined)[];
  }> {
    const threads = Array.from({ length: this.threads }, (_, i) => this.counters.stats(this.worker + i, 1));
    const total = this.counters.stats(this.worker, this.threads);
    if (this.opts.admissionGate === undefined) return { total, threads };
    const workers = this.pool === undefined ? [] : await this.pool.admissionStats();
    const admissionThreads = this.listener === undefined ? workers : [this.ownGate?.admissionStats(), ...workers];
    return { total, threads, admission: sumAdmissionStats(admissionThreads), admissionThreads };
  }

  /**
   * Closes the listening socket of every thread; resolves once none accepts
   * (new clients are refused, not accepted and reset). Open connections are
   * untouched: follow with {@link close}.
   */
  async stopAccepting(): Promise<void> {
    this.bound = false;
    void this.listener?.stopAccepting();
    if (this.pool !== undefined) await this.pool.stopAccepting();
  }

  /**
   * Stops accepting in every thread. Without `drain` (default) closes every
   * connection at once; with `drain`, open and held connections finish on
   * their own for up to `graceMs`, then the rest are closed. Resolves when
   * all are closed, with how many the end of the grace cut.
   */
  async close(opts: TcpProxyCloseOptions = {}): Promise<{ cut: number }> {
    this.bound = false;
    const [workers, here] = await Promise.all([this.pool?.close(opts), this.listener?.close(opts)]);
    this.ownGate?.close();
    this.ownRouter?.close();
    return { cut: (workers?.cut ?? 0) + (here?.cut ?? 0) };
  }
}

/** `router` xor `balancer`, and `policy` only with a balancer; throws `InvalidConfig` naming the option. */
function checkRouting(opts: TcpProxyOptions): void {
  const { router, balancer } = opts;
  if (router !== undefined && (typeof router !== 'object' || router === null || typeof router.acquire !== 'function')) {
    invalidConfig('options.router', 'must be a Router', router);
  }
  if (balancer !== undefined && (typeof balancer !== 'object' || balancer === null || typeof balancer.attachment !== 'function')) {
    invalidConfig('options.balancer', 'must be a Balancer', balancer);
  }
  if (router === undefined && balancer === undefined)
    invalidConfig('options.router', 'must be a Router (or give options.balancer)', router);
  if (router !== undefined && balancer !== undefined)
    invalidConfig('options.balancer', 'give options.router or options.balancer, not both', 'both');
  if (opts.policy !== undefined) {
    if (balancer === undefined) invalidConfig('options.policy', 'only with options.balancer (a Router has its policy)', opts.policy);
    if (!(POLICY_NAMES as readonly string[]).includes(opts.policy))
      invalidConfig('options.policy', `must be one of ${POLICY_NAMES.join(', ')}`, opts.policy);
  }
}

/** `options.counters` (or fresh ones, a row per accepting thread), checked to have a row for each of `workers` from `options.worker`. */
function counterRows(opts: TcpProxyOptions, workers: number): ProxyCounters {
  if (opts.counters !== undefined && !(opts.counters instanceof ProxyCounters))
    invalidConfig('options.counters', 'must be a ProxyCounters', opts.counters);
  const counters = opts.counters ?? ProxyCounters.create({ workers: Math.max(1, workers) });
  const first = counters.checkWorker(opts.worker ?? 0, 'options.worker');
  if (workers > 0 && counters.workers < first + workers) {
    invalidConfig(
      'options.counters',
      `must have a row per worker (options.workers ${workers} from row options.worker ${first}), has ${counters.workers}`,
      counters.workers,
    );
  }
  return counters;
}

/** Worker mode: everything a worker receives must be plain data; admission needs both a portable selector and the gate's options. */
function checkWorkerMode(opts: TcpProxyOptions): void {
  if (opts.admission !== undefined && typeof opts.admission?.portable !== 'function')
    invalidConfig(
      'options.admission',
      'must be fixedBand(rank) or a CidrBands with options.workers > 0 (a custom selector cannot reach worker threads)',
      'admission',
    );
  if ((opts.admission === undefined) !== (opts.admissionGate === undefined))
    invalidConfig(
      opts.admission === undefined ? 'options.admission' : 'options.admissionGate',
      'with options.workers > 0, give options.admission and options.admissionGate together (each worker gates by band)',
      'missing',
    );
  if (typeof opts.key === 'function')
    invalidConfig(
      'options.key',
      'a function cannot reach worker threads (options.workers > 0); use "client-ip" or "client-ip:port"',
      'function',
    );
  if (opts.accessLog !== undefined && opts.accessLog !== 'stdout')
    invalidConfig('options.accessLog', 'a logger cannot reach worker threads (options.workers > 0); use "stdout"', typeof opts.accessLog);
  if (opts.timers !== undefined)
    invalidConfig('options.timers', 'a timer source cannot reach worker threads (options.workers > 0)', typeof opts.timers);
  checkBandSelector(opts);
  if (opts.admissionGate !== undefined) checkGateData(opts.balancer!, opts.admissionGate);
}

/** This-thread mode: the router's own AdmissionGate admits, so `admissionGate` has nothing to configure. */
function checkLocalMode(opts: TcpProxyOptions): void {
  checkBandSelector(opts);
  if (opts.admissionGate !== undefined)
    invalidConfig(
      'options.admissionGate',
      'applies only with options.workers > 0 (in this thread, attach an AdmissionGate to options.router)',
      'admissionGate',
    );
}

function checkBandSelector(opts: TcpProxyOptions): void {
  if (opts.admission !== undefined && typeof opts.admission?.bandOf !== 'function')
    invalidConfig('options.admission', 'must have a bandOf(address) method', opts.admission);
}

/** Validates each worker's gate options here, where the error can name them: a trial gate on a throwaway router. */
function checkGateData(balancer: Balancer, o: AdmissionGateData): void {
  if (typeof o !== 'object' || o === null) invalidConfig('options.admissionGate', 'must be an object', o);
  for (const k of ['saturation', 'clock'])
    if (k in o) invalidConfig(`options.admissionGate.${k}`, 'a function cannot reach worker threads', k);
  const router = balancer.router();
  try {
    new AdmissionGate(router, o).close();
  } catch (err) {
    if (err instanceof PoiseError && err.field !== undefined)
      throw new PoiseError(err.code, err.message.replaceAll('options.', 'options.admissionGate.'), {
        field: err.field.replaceAll('options.', 'options.admissionGate.'),
      });
    throw err;
  } finally {
    router.close();
  }
}

function isProxyEvent(event: string | symbol): boolean {
  return event === 'spliced' || event === 'closed' || event === 'failed';
}

/** `options.workerRestart` → the backoff (defaults filled); throws `InvalidConfig` naming the field. */
function restartOptions(o: TcpProxyOptions['workerRestart']): RestartBackoff {
  if (o === undefined) return RESTART_BACKOFF;
  if (typeof o !== 'object' || o === null) invalidConfig('options.workerRestart', 'must be an object', o);
  checkOptionKeys(o, ['initialMs', 'maxMs', 'stableMs'], 'options.workerRestart');
  const initialMs = integerIn(o.initialMs ?? RESTART_BACKOFF.initialMs, 'options.workerRestart.initialMs', 1, 3_600_000);
  const maxMs = integerIn(o.maxMs ?? Math.max(initialMs, RESTART_BACKOFF.maxMs), 'options.workerRestart.maxMs', initialMs, 3_600_000);
  const stableMs = integerIn(o.stableMs ?? RESTART_BACKOFF.stableMs, 'options.workerRestart.stableMs', 1, 86_400_000);
  return { initialMs, maxMs, stableMs };
}

/** The connection options as structured-clonable data for the workers. */
function connectionData(o: TcpProxyOptions): ConnectionOptions {
  const out: Record<string, unknown> = {};
  for (const k of CONNECTION_OPTION_KEYS) if (o[k] !== undefined) out[k] = o[k];
  return out as ConnectionOptions;
}
