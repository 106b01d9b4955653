/**
 * The hand-back: routed sockets that give idle connections back when this
 * process holds more connections on a backend than its fleet connection
 * budget share (docs/connection-budget.md, "A late joiner").
 *
 * A share that shrinks takes nothing away by itself: a pool keeps its idle
 * connections for as long as its idle timeout, and the fleet's newcomer
 * waits for them. With `routedStream(router, { handBack: { idleMs } })`,
 * every socket of the factory joins this thread's sweep while it is
 * connected; every `idleMs / 2` the sweep ends (FIN) the sockets that are
 * idle on a backend whose connections exceed the share, at most as many as
 * the excess, so the process comes down to its share and its next round
 * hands the difference to the others.
 *
 * Idle, for the request/response protocols pools speak (PostgreSQL, MySQL,
 * Redis): nothing moved for `idleMs`, and the last thing that moved was a
 * read (the server's answer), so a query waiting for its reply — the last
 * move a write — is never cut. A pool removes a connection its server
 * closed (pg.Pool emits `'error'` on the pool for an idle client: give it
 * an `'error'` listener, as pg requires anyway).
 */
import type { Router } from '../runtime/router.js';

/** What the sweep needs of a routed socket. */
export interface HandBackSocket {
  /** The slot of the backend it is connected to. */
  readonly slot: number;
  /** The clock reading of its last read, and of its last write. */
  readonly lastRead: number;
  readonly lastWrite: number;
  /** Ends it (the lease is released at its close). */
  handBack(): void;
}

/** One factory's sweep over its connected sockets, on this thread. */
export class HandBack {
  readonly #router: Router;
  readonly #idleMs: number;
  readonly #clock: () => number;
  readonly #sockets = new Set<HandBackSocket>();
  /** Sockets ended by the sweep and not yet closed: not ended again, and counted against their slot's excess. */
  readonly #ending = new Set<HandBackSocket>();
  /** {@link #ending}'s count per slot. */
  readonly #endingOn = new Map<number, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(router: Router, idleMs: number, clock: () => number) {
    this.#router = router;
    this.#idleMs = idleMs;
    this.#clock = clock;
  }

  /** A socket connected: it joins the sweep (which runs while any socket is in it). */
  add(s: HandBackSocket): void {
    this.#sockets.add(s);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.sweep(), Math.max(10, Math.floor(this.#idleMs / 2)));
      this.#timer.unref();
    }
  }

  /** A socket closed: it leaves the sweep. */
  delete(s: HandBackSocket): void {
    if (!this.#sockets.delete(s)) return;
    if (this.#ending.delete(s)) this.#endingOn.set(s.slot, (this.#endingOn.get(s.slot) ?? 1) - 1);
    if (this.#sockets.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  /** One sweep: ends idle sockets on every slot above its share, at most the excess (less those already ending). */
  sweep(): void {
    const now = this.#clock();
    let excess: Map<number, number> | undefined;
    for (const s of this.#sockets) {
      if (s.lastRead < s.lastWrite || now - s.lastRead < this.#idleMs || this.#ending.has(s)) continue;
      excess ??= new Map();
      let left = excess.get(s.slot);
      if (left === undefined) left = this.#router.overShare(s.slot) - (this.#endingOn.get(s.slot) ?? 0);
      if (left <= 0) {
        excess.set(s.slot, 0);
        continue;
      }
      excess.set(s.slot, left - 1);
      this.#ending.add(s);
      this.#endingOn.set(s.slot, (this.#endingOn.get(s.slot) ?? 0) + 1);
      s.handBack();
    }
  }
}
