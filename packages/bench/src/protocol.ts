/**
 * The client side of the bench's line protocol (see backends.ts): one
 * request in flight per connection, `<id>\n` → `OK <id>\n` | `ERR <id>\n`.
 */
import net from 'node:net';

/** A reply: true for `OK`, false for `ERR`. */
export type Reply = boolean;

/** One client connection to one backend. */
export class LineConnection {
  private buffered = '';
  private waiting: { resolve: (ok: Reply) => void; reject: (err: Error) => void } | null = null;
  private broken: Error | null = null;
  private seq = 0;

  private constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('connection closed')));
  }

  /** Connects to `host:port`. */
  static open(host: string, port: number): Promise<LineConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port });
      const onError = (err: Error): void => reject(err);
      socket.once('error', onError);
      socket.once('connect', () => {
        socket.off('error', onError);
        resolve(new LineConnection(socket));
      });
    });
  }

  /** False once the connection failed or closed. */
  get usable(): boolean {
    return this.broken === null;
  }

  /** Sends one request and resolves with its reply; rejects when the connection breaks. */
  request(): Promise<Reply> {
    if (this.broken !== null) return Promise.reject(this.broken);
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(`${++this.seq}\n`);
    });
  }

  /** Closes the socket. */
  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: string): void {
    this.buffered += chunk;
    const nl = this.buffered.indexOf('\n');
    if (nl < 0) return;
    const line = this.buffered.slice(0, nl);
    this.buffered = this.buffered.slice(nl + 1);
    const w = this.waiting;
    this.waiting = null;
    w?.resolve(line.startsWith('OK '));
  }

  private fail(err: Error): void {
    if (this.broken === null) this.broken = err;
    const w = this.waiting;
    this.waiting = null;
    w?.reject(err);
  }
}
