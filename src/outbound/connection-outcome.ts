/**
 * The passive-health outcome of a routed connection, one rule for
 * `connect()`, `routedStream()` and the proxy: a backend that accepts and
 * then resets (ECONNRESET, EPIPE, any socket error) before sending a byte
 * failed this connection — Envoy's outlier detection counts it a connection
 * failure — so it counts toward ejection like a refused connect. A backend
 * that answered (sent at least one byte) is alive: its first byte clears its
 * consecutive failures, and a later error is the stream's, not the
 * backend's health (neither a failure nor a success).
 */
import type net from 'node:net';
import type { Lease } from '../runtime/lease.js';

/** The outcome of a connection lease when its socket closes: `failed` after a socket error, `answered` once a byte came back. */
export function connectionOutcome(failed: boolean, answered: boolean): 'success' | 'failure' | 'cancelled' {
  return !failed ? 'success' : answered ? 'cancelled' : 'failure';
}

/**
 * Calls `lease.answered()` when the first byte of `socket` arrives, without
 * a `'data'` listener (which would start the flow before the caller reads):
 * the socket's own `push` is wrapped until then, and put back at the first
 * byte. For sockets that read through `push` (not the `onread` option).
 */
export function answerOnFirstByte(socket: net.Socket, lease: Lease): void {
  const push = socket.push;
  socket.push = function (this: net.Socket, chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk !== null && (chunk as { length?: number }).length !== 0) {
      // The prototype's push again (an own property, so the wrapper is dropped): one check per connection.
      socket.push = push;
      lease.answered();
    }
    return push.call(this, chunk, encoding);
  };
}
