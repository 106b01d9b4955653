/**
 * The table's epochs: the membership epoch (slots or specs changed), the
 * health epoch (an ejection, an active check's verdict), and the change
 * epoch that moves after either — the one word a router reads per acquire to
 * know whether its prepared view is still current.
 */
import { H_CHANGE_EPOCH, H_HEALTH_EPOCH, H_MEMBER_EPOCH } from './layout.js';

/** The epoch words of one table. */
export class Epochs {
  private readonly i32: Int32Array;

  constructor(i32: Int32Array) {
    this.i32 = i32;
  }

  /** The change epoch, ordered: everything a writer stored before its bump is visible after this load sees the bump. */
  change(): number {
    // A sequentially consistent load: the writer's stores (slot tags, the
    // spec blob) precede its Atomics.add on this word, so they are visible
    // to a thread whose SC load returns the bumped value.
    return Atomics.load(this.i32, H_CHANGE_EPOCH);
  }

  /**
   * The change epoch as a plain read: the router's per-acquire "has anything
   * moved" check. Tear-free (an aligned Int32 element), unordered: it may lag
   * a bump by the time the store takes to reach this core, so a router may
   * draw once more from its old view — which is safe, because a lease stands
   * only after the SC check of the slot's tag (slot-tags.ts), and the rebuild
   * that a moved epoch triggers reads the epoch again with {@link change}.
   */
  changeHint(): number {
    return this.i32[H_CHANGE_EPOCH]!;
  }

  /** The membership epoch. */
  membership(): number {
    return Atomics.load(this.i32, H_MEMBER_EPOCH);
  }

  /** The health epoch. */
  health(): number {
    return Atomics.load(this.i32, H_HEALTH_EPOCH);
  }

  /** Publishes a membership change: the membership epoch, then the change epoch; wakes waiters. */
  bumpMembership(): number {
    // add (not store): several writers may bump; SC ordering makes the
    // membership epoch visible before the change epoch that announces it.
    const e = Atomics.add(this.i32, H_MEMBER_EPOCH, 1) + 1;
    Atomics.add(this.i32, H_CHANGE_EPOCH, 1);
    this.wake();
    return e;
  }

  /** Publishes a health change: the health epoch, then the change epoch; wakes waiters. */
  bumpHealth(): number {
    // Any router may eject; add keeps concurrent bumps from being lost.
    const e = Atomics.add(this.i32, H_HEALTH_EPOCH, 1) + 1;
    Atomics.add(this.i32, H_CHANGE_EPOCH, 1);
    this.wake();
    return e;
  }

  /** Wakes every thread blocked in {@link waitForChange}; returns how many were woken. */
  wake(): number {
    return Atomics.notify(this.i32, H_CHANGE_EPOCH);
  }

  /**
   * Resolves when the change epoch differs from `seen` (true) or after
   * `timeoutMs` of real time (false), without blocking the thread: for a
   * caller that waits for an owner's verdict (`ready()`, a refused
   * `acquireAsync({ intent })`). `Atomics.waitAsync` compares and arms
   * atomically, and every bump notifies after it stores, so no bump is
   * missed; a pending wait holds no handle (it keeps no process alive).
   */
  changedAsync(seen: number, timeoutMs: number): Promise<boolean> {
    const r = Atomics.waitAsync(this.i32, H_CHANGE_EPOCH, seen, Math.max(0, timeoutMs));
    if (!r.async) return Promise.resolve(r.value === 'not-equal');
    return r.value.then((v) => v === 'ok' || Atomics.load(this.i32, H_CHANGE_EPOCH) !== seen);
  }

  /**
   * Blocks this thread until the change epoch differs from `seen`, for at
   * most `timeoutMs`; returns whether it moved. For a router whose lease was
   * refused because a slot's tag changed while the epoch that announces the
   * change has not moved yet: the owner is between its tag stores and its
   * epoch bump, which is microseconds of straight-line code.
   */
  waitForChange(seen: number, timeoutMs: number): boolean {
    const i = this.i32;
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      // Atomics.wait compares and sleeps atomically: a bump that lands
      // before it returns 'not-equal' at once; one that lands after it is
      // followed by the bumper's notify, so no wake-up is lost. A wake-up
      // without a bump (another notifier) re-checks and sleeps for the rest.
      const left = deadline - performance.now();
      if (Atomics.load(i, H_CHANGE_EPOCH) !== seen) return true;
      if (left <= 0) return false;
      Atomics.wait(i, H_CHANGE_EPOCH, seen, left);
    }
  }
}
