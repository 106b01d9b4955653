/**
 * A loopback TCP backend that fails on the dials a test names: refused (no
 * listener for that dial: ECONNREFUSED) or reset (accepted, then an RST in
 * answer to the first bytes: the connection was made, its first request
 * fails); any other dial is accepted and echoed as `name:data`. (An RST sent
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
}

/** What dial `index` of a backend scripted by `script` meets. */
export function dialOutcome(script: DialScript, index: number): 'refused' | 'reset' | 'accepted' {
  if (script.refuse?.includes(index) === true) return 'refused';
  if (script.reset?.includes(index) === true) return 'reset';
  return 'accepted';
}

export class ScriptedBackend {
  /** Connections the server accepted (reset or echoed). */
  accepted = 0;
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();
  private resetNext = false;

  private constructor(
    readonly name: string,
    readonly port: number,
  ) {}

  /** A backend listening on a port of the kernel's choice, which it keeps across refusals. */
  static async start(name: string): Promise<ScriptedBackend> {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const backend = new ScriptedBackend(name, port);
    await backend.listen();
    return backend;
  }

  /** Makes the next dial meet `outcome`: no listener for a refusal, an RST for a reset, an echo otherwise. */
  async prepare(outcome: 'refused' | 'reset' | 'accepted'): Promise<void> {
    this.resetNext = outcome === 'reset';
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
      const reset = this.resetNext;
      this.resetNext = false;
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => s.destroy());
      s.on('data', (d) => (reset ? s.resetAndDestroy() : s.write(`${this.name}:${d.toString()}`)));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', resolve);
    });
    this.server = server;
  }

  private unlisten(): void {
    // The listening socket closes at once; connections it accepted before stay until they end.
    this.server?.close();
    this.server = undefined;
  }
}
