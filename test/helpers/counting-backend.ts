/** A loopback TCP backend that counts what it really received: connections, open ones, their peak, bytes. */
import net from 'node:net';

export interface CountingBackend {
  server: net.Server;
  port: number;
  /** Connections accepted. */
  accepted: number;
  /** Open now: a connection counts as gone at the peer's FIN (or a reset), before this side's own FIN back. */
  open: number;
  /** Most open at once. */
  peak: number;
  /** Bytes received. */
  bytes: number;
  close(): Promise<void>;
}

/**
 * Listens on 127.0.0.1 (any port); `onData(socket, chunk)` answers. Pass
 * `shared` to count several backends into one tally (a peak over all of them).
 */
export async function countingBackend(onData: (s: net.Socket, d: Buffer) => void, shared?: CountingBackend): Promise<CountingBackend> {
  const b: CountingBackend = {
    server: undefined as unknown as net.Server,
    port: 0,
    accepted: 0,
    open: 0,
    peak: 0,
    bytes: 0,
    close: async () => {},
  };
  const tally = shared ?? b;
  b.server = net.createServer((s) => {
    b.accepted++;
    if (shared) shared.accepted++;
    tally.peak = Math.max(tally.peak, ++tally.open);
    if (shared) b.peak = Math.max(b.peak, ++b.open);
    let counted = true;
    const gone = (): void => {
      if (!counted) return;
      counted = false;
      tally.open--;
      if (shared) b.open--;
    };
    s.on('end', gone);
    s.on('close', gone);
    s.on('error', () => {});
    s.on('data', (d: Buffer) => {
      b.bytes += d.length;
      if (shared) shared.bytes += d.length;
      onData(s, d);
    });
  });
  await new Promise<void>((r) => b.server.listen(0, '127.0.0.1', r));
  b.port = (b.server.address() as net.AddressInfo).port;
  b.close = () => new Promise<void>((r) => b.server.close(() => r()));
  return b;
}

/** A zeroed tally for {@link countingBackend}'s `shared`. */
export function tally(): CountingBackend {
  return { server: undefined as unknown as net.Server, port: 0, accepted: 0, open: 0, peak: 0, bytes: 0, close: async () => {} };
}
