/**
 * K real TCP backends on 127.0.0.1 inside the bench process.
 *
 * Protocol (one line each way): the client sends `<id>\n`; the backend waits
 * for a delay drawn from its log-normal distribution and answers `OK <id>\n`,
 * or `ERR <id>\n` with its failure probability. Several requests may be in
 * flight on one connection (the id pairs replies with requests). Each backend
 * counts its own in-flight requests — the server-side truth the report plots,
 * independent of the balancer's counters.
 */
import net from 'node:net';
import { Rng, type Seed } from './kit.js';
import type { BackendModel } from './scenarios.js';

/** One running backend. */
export interface RunningBackend {
  readonly model: BackendModel;
  readonly host: string;
  readonly port: number;
  /** `127.0.0.1:port`. */
  readonly address: string;
  /** Requests received and not yet answered. */
  readonly inFlight: number;
  /** Requests answered since start. */
  readonly answered: number;
  /** Error replies since start. */
  readonly failed: number;
  /** Changes the failure probability from now on. */
  setFailureRate(rate: number): void;
  /**
   * `false`: stops listening and resets every open connection (a host that
   * went away: connects are refused, so active TCP checks fail); `true`:
   * listens again on the same port.
   */
  setAccepting(accepting: boolean): Promise<void>;
}

class Server implements RunningBackend {
  readonly model: BackendModel;
  readonly host = '127.0.0.1';
  port = 0;
  inFlight = 0;
  answered = 0;
  failed = 0;
  private failureRate: number;
  private readonly rng: Rng;
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(model: BackendModel, rng: Rng) {
    this.model = model;
    this.failureRate = model.failureRate;
    this.rng = rng;
    this.server = net.createServer((socket) => this.serve(socket));
  }

  get address(): string {
    return `${this.host}:${this.port}`;
  }

  setFailureRate(rate: number): void {
    this.failureRate = rate;
  }

  async setAccepting(accepting: boolean): Promise<void> {
    if (accepting === this.server.listening) return;
    if (accepting) return this.listen(this.port);
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.resetAndDestroy();
    await closed;
  }

  async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host: this.host, port }, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  /** A delay drawn from the log-normal distribution (Box–Muller on two uniforms). */
  delayMs(): number {
    const { medianMs, sigma } = this.model;
    if (sigma === 0) return medianMs;
    const u = 1 - this.rng.float();
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.rng.float());
    return medianMs * Math.exp(sigma * z);
  }

  private serve(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.setNoDelay(true);
    socket.setEncoding('latin1');
    let buffered = '';
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      let nl = buffered.indexOf('\n');
      while (nl >= 0) {
        const id = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        this.request(socket, id);
        nl = buffered.indexOf('\n');
      }
      if (buffered.length > 256) socket.destroy(); // not our protocol
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.sockets.delete(socket));
  }

  private request(socket: net.Socket, id: string): void {
    this.inFlight++;
    const fail = this.failureRate > 0 && this.rng.float() < this.failureRate;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.inFlight--;
      this.answered++;
      if (fail) this.failed++;
      if (!socket.destroyed) socket.write(`${fail ? 'ERR' : 'OK'} ${id}\n`);
    }, this.delayMs());
    this.timers.add(timer);
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.inFlight = 0;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * The set of backends of one run.
 *
 * @example
 * const farm = await BackendFarm.start(scenarioPlan('slow-backend', 8).backends, { seed: 1 });
 * farm.get('b0').address; // "127.0.0.1:40123"
 * await farm.close();
 */
export class BackendFarm {
  private readonly byId = new Map<string, Server>();

  /** An empty farm; `seed` makes every backend's delays replay exactly. */
  constructor(private readonly seed?: Seed) {}

  /** Starts one listening server per model; each draws delays from its own stream (derived from `seed` when given). */
  static async start(models: readonly BackendModel[], opts: { seed?: Seed } = {}): Promise<BackendFarm> {
    const farm = new BackendFarm(opts.seed);
    try {
      for (const m of models) await farm.add(m);
    } catch (err) {
      await farm.close();
      throw err;
    }
    return farm;
  }

  /** Starts one more backend on 127.0.0.1 (`port` 0 = any free port). */
  async add(model: BackendModel, port = 0): Promise<RunningBackend> {
    if (this.byId.has(model.id)) throw new Error(`backend ${JSON.stringify(model.id)} already runs`);
    const i = this.byId.size;
    const rng = this.seed === undefined ? new Rng() : new Rng(BigInt(this.seed) * 1_000_003n + BigInt(i));
    const server = new Server(model, rng);
    await server.listen(port);
    this.byId.set(model.id, server);
    return server;
  }

  /** True when a backend with this id runs. */
  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Every backend, in model order. */
  all(): RunningBackend[] {
    return [...this.byId.values()];
  }

  /** The backend with this id; throws when unknown. */
  get(id: string): RunningBackend {
    const s = this.byId.get(id);
    if (s === undefined) throw new Error(`no backend ${JSON.stringify(id)}`);
    return s;
  }

  /** Stops every server and drops pending replies. */
  async close(): Promise<void> {
    await Promise.all([...this.byId.values()].map((s) => s.close()));
  }
}
