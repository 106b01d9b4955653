/**
 * The proxy's one dialer: a connection's connect across backends, driven by
 * socket events, for every client — with or without an admission band (a
 * band only decides how the first lease is taken: `acquireAsync` through
 * the gate, then this dialer, as `connect()` does). The retry rule is the
 * run's (outbound/retry-run.ts), as for `connect()`, `routedStream()` and
 * the HTTP dispatcher; what the dialer saves per connection is connect()'s
 * async function, its per-attempt promise and their closures (one timer
 * callback per connection remains, and two shared socket listeners).
 *
 * A connect that does not complete within `connectTimeoutMs` fails with a
 * `ConnectTimeout` PoiseError; a local resource error (EMFILE, ...) ends
 * the run blaming no backend. When the run ends without a backend, the
 * connection hears {@link DialHost.dialFailed} with the run's error and its
 * reason as a code (termination.ts classifies by it).
 */
import type net from 'node:net';
import type { PoiseErrorCode } from '../core/errors.js';
import type { ResolvedConnectOptions } from '../outbound/connect.js';
import { dialExtras } from '../outbound/dial.js';
import { connectTimeout, type RetryRun } from '../outbound/retry-run.js';
import type { Lease } from '../runtime/lease.js';

/** What the dialer tells the connection it dials for. @internal */
export interface DialHost {
  /** Whether a backend is still wanted (the client has not left, the connection has not crashed). */
  wantsBackend(): boolean;
  /** A backend accepted: `socket` is connected, `lease` counts it (released by the host), after `attempts` tries. */
  dialled(socket: net.Socket, lease: Lease, connectMs: number, attempts: number): void;
  /** The run ended without a backend: its error, and why as a code. */
  dialFailed(err: Error, reason: PoiseErrorCode | undefined): void;
  /** An error thrown on the dial path: closes the connection alone. */
  crash(err: unknown): void;
}

const kDialer = Symbol('poise.dialer');
type Dialled = net.Socket & { [kDialer]?: Dialer };

/** One connection's dial (see the module comment). @internal */
export class Dialer {
  readonly run: RetryRun;
  private socket: Dialled | undefined;
  private lease: Lease | undefined;
  private started = 0;
  private timer: unknown;
  /** The connect timeout's callback (made once per connection, not per attempt). */
  private readonly timedOut: () => void;
  private readonly host: DialHost;
  private readonly r: ResolvedConnectOptions;
  /** How a dialled socket reads (the connection's read buffers). */
  private readonly reads: net.OnReadOpts;

  constructor(host: DialHost, r: ResolvedConnectOptions, run: RetryRun, reads: net.OnReadOpts) {
    this.host = host;
    this.r = r;
    this.run = run;
    this.reads = reads;
    this.timedOut = () => this.expire();
  }

  /**
   * Starts the next attempt: `next` is the run's next lease (or the first,
   * from the run or from admission), or the error that ends the run.
   */
  dial(next: Lease | Error): void {
    const r = this.r;
    for (;;) {
      if (next instanceof Error) {
        this.host.dialFailed(next, this.run.reason);
        return;
      }
      const lease = next;
      if (!this.host.wantsBackend()) {
        // The client left (or the connection crashed) before a backend answered: try no other.
        lease.release('cancelled');
        return;
      }
      this.run.started();
      this.started = r.clock();
      let up: Dialled;
      try {
        const extras = dialExtras(lease.spec);
        const at = { host: lease.host, port: lease.port, allowHalfOpen: r.allowHalfOpen, noDelay: r.noDelay, onread: this.reads };
        up = r.create(extras === undefined ? at : { ...at, ...extras }) as Dialled;
      } catch (err) {
        next = this.run.failed(lease, err);
        continue;
      }
      this.lease = lease;
      this.socket = up;
      up[kDialer] = this;
      up.on('connect', onConnect);
      up.on('error', onConnectError);
      this.timer = r.timers.setTimeout(this.timedOut, r.timeout);
      return;
    }
  }

  /** The attempt's socket connected: its connect time is a sample, and the connection takes the socket. */
  connected(): void {
    const up = this.socket!;
    const lease = this.lease!;
    this.stop();
    this.socket = undefined;
    this.lease = undefined;
    up[kDialer] = undefined;
    const connectMs = Math.max(0, this.r.clock() - this.started);
    lease.connected(connectMs);
    this.host.dialled(up, lease, connectMs, this.run.tries);
  }

  /** The attempt's connect failed or timed out: its backend is blamed (the run's rule), and the next one is tried. */
  failed(err: unknown): void {
    const up = this.socket;
    if (up === undefined) return;
    const lease = this.lease!;
    this.stop();
    up.destroy();
    this.socket = undefined;
    this.lease = undefined;
    if (!this.host.wantsBackend()) {
      // The client left (or the connection crashed) while connecting: no backend blamed, no retry spent.
      lease.release('cancelled');
      return;
    }
    this.dial(this.run.failed(lease, err));
  }

  /** Drops a connect in progress with its lease (the client left, or the connection crashed): no backend blamed, no retry. */
  cancel(): void {
    this.stop();
    this.socket?.destroy();
    this.socket = undefined;
    this.lease?.release('cancelled');
    this.lease = undefined;
  }

  /** Stops listening for the attempt's connect and clears its timer. */
  private stop(): void {
    const up = this.socket;
    if (up !== undefined) {
      up.off('connect', onConnect);
      up.off('error', onConnectError);
    }
    if (this.timer !== undefined) {
      this.r.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private expire(): void {
    this.timer = undefined;
    const lease = this.lease;
    if (lease === undefined) return;
    try {
      this.failed(connectTimeout(lease.host, lease.port, this.r.timeout));
    } catch (err) {
      this.host.crash(err);
    }
  }

  /** @internal */
  crash(err: unknown): void {
    this.host.crash(err);
  }
}

// Shared listeners: `this` is the socket; its dialer hangs off it. Each
// catches what its handler throws and closes that connection alone.
function onConnect(this: net.Socket): void {
  const d = (this as Dialled)[kDialer]!;
  try {
    d.connected();
  } catch (err) {
    d.crash(err);
  }
}
function onConnectError(this: net.Socket, e: NodeJS.ErrnoException): void {
  const d = (this as Dialled)[kDialer];
  if (d === undefined) return;
  try {
    d.failed(e);
  } catch (err) {
    d.crash(err);
  }
}
