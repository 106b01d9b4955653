/**
 * A loopback TCP backend that fails on the dials a test names: refused (no
 * listener for that dial: ECONNREFUSED) or reset (accepted, then an RST in
 * answer to the first bytes: the connection was made, its first request
 * fails); any other dial is accepted and echoed as `name:data`. In HTTP mode
 * (`start(name, { http: true })`) an accepted dial answers its request
 * `200 name` with `connection: close` (so every request dials anew), and two
 * more outcomes exist: `status503` (a whole `503 name` response) and
 * `resetAfterAnswer` (the response headers and the first body bytes, then an
 * RST). In TCP mode `resetAfterAnswer` echoes, then resets. (An RST sent
 * at accept would race the client's connect callback on loopback: sometimes
 * a failed connect, sometimes a reset connection.) Dials are
 * counted by the caller, which knows every pick (a refused dial never reaches
 * the server); before each operation it calls {@link ScriptedBackend.prepare}
 * with the index of the backend's next dial. One operation dials a backend at
 * most once (connect() and the proxy never retry the same backend), so one
 * preparation covers it.
 */
import net from 'node:net';

/** Which dials of one backend fail, by the backend's own dial index (0 = its first). */
export interface DialScript {
  refuse?: readonly number[];
  reset?: readonly number[];
  /** HTTP mode: a 503 response. */
  status503?: readonly number[];
  /** An answer (the echo; HTTP: headers and the first body bytes), then an RST. */
  resetAfterAnswer?: readonly number[];
}

/** What one dial meets. */
export type DialOutcome = 'refused' | 'reset' | '503' | 'answer-reset' | 'accepted';

/** What dial `index` of a backend scripted by `script` meets. */
export function dialOutcome(script: DialScript, index: number): DialOutcome {
  if (script.refuse?.includes(index) === true) return 'refused';
  if (script.reset?.includes(index) === true) return 'reset';
  if (script.status503?.includes(index) === true) return '503';
  if (script.resetAfterAnswer?.includes(index) === true) return 'answer-reset';
  return 'accepted';
}

export class ScriptedBackend {
  /** Connections the server accepted (reset or echoed). */
  accepted = 0;
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private next: DialOutcome = 'accepted';

  private constructor(
    readonly name: string,
    readonly port: number,
    readonly http: boolean,
  ) {}

  /** A backend listening on a port of the kernel's choice, which it keeps across refusals. */
  static async start(name: string, opts: { http?: boolean } = {}): Promise<ScriptedBackend> {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const backend = new ScriptedBackend(name, port, opts.http === true);
    await backend.listen();
    return backend;
  }

  /** Makes the next dial meet `outcome`: no listener for a refusal, an RST for a reset, an echo otherwise. */
  async prepare(outcome: DialOutcome): Promise<void> {
    this.next = outcome;
    if (outcome === 'refused') this.unlisten();
    else if (this.server === undefined) await this.listen();
  }

  /** Destroys every connection and stops listening. */
  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server !== undefined) await new Promise<void>((r) => server.close(() => r()));
  }

  private async listen(): Promise<void> {
    const server = net.createServer((s) => {
      this.accepted++;
      const outcome = this.next;
      this.next = 'accepted';
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => s.destroy());
      s.once('data', (d) => this.answer(s, outcome, d));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', resolve);
    });
    this.server = server;
  }

  /** Answers the first bytes of a connection as `outcome` says. */
  private answer(s: net.Socket, outcome: DialOutcome, data: Buffer): void {
    if (outcome === 'reset') {
      s.resetAndDestroy();
      return;
    }
    if (!this.http) {
      s.write(`${this.name}:${data.toString()}`);
      if (outcome === 'answer-reset') setImmediate(() => s.resetAndDestroy());
      else s.on('data', (d) => s.write(`${this.name}:${d.toString()}`));
      return;
    }
    const status = outcome === '503' ? '503 Service Unavailable' : '200 OK';
    if (outcome === 'answer-reset') {
      // Headers promising more body than is sent, then the RST.
      s.write(`HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\n${this.name}`, () =>
        setImmediate(() => s.resetAndDestroy()),
      );
      return;
    }
    s.end(`HTTP/1.1 ${status}\r\ncontent-length: ${this.name.length}\r\nconnection: close\r\n\r\n${this.name}`);
  }

  private unlisten(): void {
    // The listening socket closes at once; connections it accepted before stay until they end.
    this.server?.close();
    this.server = undefined;
  }
}
