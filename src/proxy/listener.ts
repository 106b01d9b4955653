/**
 * One accepting thread of {@link TcpProxy}: a listening server, the sockets
 * it must close, the per-connection host, and the `--max-connections` limit's
 * queue of held clients. The owner thread runs one when the proxy accepts in
 * one thread; every proxy worker (proxy-worker.ts) runs one on the same port
 * with `reusePort`.
 * @internal
 */
import type { ProxyCounters } from './counters.js';
import net from 'node:net';
import type { Logger } from '../log.js';
import type { Router } from '../runtime/router.js';
import type { ConnectionLimit } from './connection-limit.js';
import type { ProxyBandSelector } from './admission.js';
import { serveConnection } from './connection.js';
import { kCut } from './connection-events.js';
import { connectionHost, type ConnectionHost } from './connection-host.js';
import type { ConnectionSettings } from './options.js';

/** How long a thread holding clients sleeps at most before it looks at the shared count again (ms). */
const HELD_RECHECK_MS = 1000;

const kListener = Symbol('poise.listener');
const kClient = Symbol('poise.client');
const kHeld = Symbol('poise.held');
const kPrev = Symbol('poise.prev');
const kNext = Symbol('poise.next');
/**
 * A socket that knows its listener while held (so the listeners are shared
 * functions, not per-socket closures); `kHeld` while it counts in the held
 * gauge; `kPrev`/`kNext` its links in the listener's list of open sockets
 * (an intrusive list: tracking costs two field stores, no hashing, no table
 * to grow; `kPrev` is null for the head and undefined once untracked).
 */
type Tracked = net.Socket & {
  [kListener]?: ProxyListener;
  [kClient]?: boolean;
  [kCut]?: boolean;
  [kHeld]?: boolean;
  [kPrev]?: Tracked | null | undefined;
  [kNext]?: Tracked | null | undefined;
};

function onHeldClose(this: Tracked): void {
  this[kListener]!.heldClosed(this);
}

function onHeldError(this: net.Socket): void {
  this.destroy();
}

/** @internal */
export class ProxyListener {
  private readonly server: net.Server;
  /** Open sockets of this thread (clients and upstreams): the head of the intrusive list, and its length. */
  private head: Tracked | null = null;
  private open = 0;
  private readonly host: ConnectionHost;
  private readonly limit: ConnectionLimit;
  /** Held clients, FIFO: `held[heldHead..]`. */
  private held: net.Socket[] = [];
  private heldHead = 0;
  private waiting = false;

  private readonly counters: ProxyCounters;
  private readonly worker: number;

  constructor(
    settings: ConnectionSettings,
    router: Router,
    log: Logger,
    limit: ConnectionLimit,
    emit: ConnectionHost['emit'],
    admission: ProxyBandSelector | undefined,
    counters: ProxyCounters,
    worker: number,
  ) {
    this.limit = limit;
    this.counters = counters;
    this.worker = worker;
    this.host = connectionHost(settings, {
      router,
      admission,
      log,
      counters,
      worker,
      track: (socket) => this.track(socket),
      untrack: (socket) => this.untrack(socket),
      emit,
      finished: () => this.finished(),
    });
    // noDelay: TCP_NODELAY set as the socket is created, not by a setNoDelay call per connection.
    this.server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true, noDelay: true }, (client) => this.accept(client));
  }

  /** Starts listening; with `reusePort` (Node >= 22.12, Linux) several threads may bind the same port. */
  listen(at: { host: string; port: number; reusePort: boolean }): Promise<net.AddressInfo> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      const opts: net.ListenOptions & { reusePort?: boolean } = { host: at.host, port: at.port };
      if (at.reusePort) opts.reusePort = true;
      this.server.listen(opts, () => {
        this.server.off('error', reject);
        // An accept error (EMFILE, ...) reaches here instead of crashing the thread.
        this.server.on('error', (err: NodeJS.ErrnoException) =>
          this.host.warn.warn(`accept\u0000${err.code}`, { err: err.message }, 'proxy: accept failed'),
        );
        resolve(this.server.address() as net.AddressInfo);
      });
    });
  }

  /** The bound address. */
  address(): net.AddressInfo {
    return this.server.address() as net.AddressInfo;
  }

  /** Open connections of this thread (client sockets and upstream sockets). */
  get openSockets(): number {
    return this.open;
  }

  /**
   * Stops accepting. Without `drain`, closes every socket at once. With
   * `drain`, open connections (held ones included) finish on their own for
   * up to `graceMs` (default: no limit), then the rest are closed. Resolves
   * when every socket of this thread is closed; `cut` is how many client
   * connections were closed by the proxy rather than by their ends.
   */
  close(opts: { drain?: boolean; graceMs?: number } = {}): Promise<{ cut: number }> {
    const closed = this.stopAccepting();
    let cut = 0;
    const cutAll = (): void => {
      // A snapshot first: destroying one socket may untrack others at once (its pair), which
      // would cut a walk along the links short. Close is rare; this array is its only cost.
      const all: Tracked[] = [];
      for (let s = this.head; s !== null; s = s[kNext] ?? null) all.push(s);
      for (const s of all) {
        if (s[kPrev] === undefined) continue; // untracked meanwhile by another's destroy
        if (s[kClient] === true) cut++;
        // Marked first: a connection that ends unspliced now counts as `shutdown`, not as the client's abort.
        s[kCut] = true;
        s.destroy();
      }
    };
    if (opts.drain !== true) cutAll();
    let timer: NodeJS.Timeout | undefined;
    if (opts.drain === true && opts.graceMs !== undefined) {
      timer = setTimeout(cutAll, opts.graceMs);
      timer.unref();
    }
    const idle = new Promise<void>((resolve) => {
      const check = (): void => {
        if (this.open === 0) resolve();
        else this.onEmpty = check;
      };
      check();
    });
    return Promise.all([closed, idle]).then(() => {
      if (timer !== undefined) clearTimeout(timer);
      this.onEmpty = undefined;
      this.host.warn.flush();
      return { cut };
    });
  }

  private onEmpty: (() => void) | undefined;
  private serverClosed: Promise<void> | undefined;

  /** Closes the listening socket now (new clients are refused); resolves when the server has closed. */
  stopAccepting(): Promise<void> {
    this.serverClosed ??= new Promise<void>((resolve) => this.server.close(() => resolve()));
    return this.serverClosed;
  }

  private track(socket: net.Socket): void {
    const s = socket as Tracked;
    if (s[kPrev] !== undefined) return; // tracked already
    s[kPrev] = null;
    s[kNext] = this.head;
    if (this.head !== null) this.head[kPrev] = s;
    this.head = s;
    this.open++;
  }

  /** Takes `socket` off the list of open sockets; a socket not on it (untracked already) is left alone. @internal */
  untrack(socket: net.Socket): void {
    const s = socket as Tracked;
    const prev = s[kPrev];
    if (prev === undefined) return;
    const next = s[kNext] ?? null;
    if (prev === null) this.head = next;
    else prev[kNext] = next;
    if (next !== null) next[kPrev] = prev;
    s[kPrev] = undefined;
    s[kNext] = undefined;
    if (--this.open === 0) this.onEmpty?.();
  }

  /** A held client closed before a slot served it: its outcome is the client's abort (or the proxy's shutdown). @internal */
  heldClosed(socket: Tracked): void {
    this.counters.refused(this.worker, socket[kCut] === true ? 'shutdown' : 'client_abort');
    // It leaves the held gauge now; its FIFO entry is dropped when the pump reaches it.
    this.unhold(socket);
    this.untrack(socket);
  }

  private accept(client: net.Socket): void {
    this.counters.accepted(this.worker);
    const c = client as Tracked;
    c[kClient] = true;
    this.track(c);
    if (this.heldHead === this.held.length && this.limit.tryTake()) {
      serveConnection(this.host, c);
      return;
    }
    // Over the limit (or others already wait: keep the order): hold it unread.
    // Until a connection serves it, this listener untracks it if it closes.
    c[kListener] = this;
    c.on('error', onHeldError);
    c.on('close', onHeldClose);
    this.held.push(client);
    c[kHeld] = true;
    this.counters.held(this.worker, 1);
    this.pump();
  }

  private finished(): void {
    this.limit.give();
    this.pump();
  }

  /** Serves held clients while slots are free; sleeps on the shared generation while some wait. */
  private pump(): void {
    const limit = this.limit;
    while (this.heldHead < this.held.length) {
      const next = this.held[this.heldHead]!;
      if (next.destroyed) {
        this.dequeue();
        continue;
      }
      // Read the generation before trying: a release after this read makes the wait return at once.
      const seen = limit.generation();
      if (!limit.tryTake()) {
        if (!this.waiting) {
          this.waiting = true;
          void limit.wait(seen, HELD_RECHECK_MS).then(() => {
            this.waiting = false;
            this.pump();
          });
        }
        return;
      }
      this.dequeue();
      next.off('error', onHeldError);
      next.off('close', onHeldClose);
      serveConnection(this.host, next);
    }
    this.held.length = 0;
    this.heldHead = 0;
  }

  /** Takes a held socket out of the held gauge, once (whichever of its close and its dequeue comes first). */
  private unhold(socket: Tracked): void {
    if (socket[kHeld] !== true) return;
    socket[kHeld] = false;
    this.counters.held(this.worker, -1);
  }

  private dequeue(): void {
    this.unhold(this.held[this.heldHead] as Tracked);
    this.held[this.heldHead++] = undefined as unknown as net.Socket;
    if (this.heldHead > 1024 && this.heldHead * 2 > this.held.length) {
      this.held = this.held.slice(this.heldHead);
      this.heldHead = 0;
    }
  }
}
