/**
 * The fleet connection budget, this process's side: two slot words
 * (layout.ts) that make a process's share of a backend's fleet-wide
 * connection limit exact across all of its threads.
 *
 * | word | field            | unit |
 * |------|------------------|------|
 * | 14   | connection share | the connection leases this process may hold on the backend: 0 = no budget (unlimited), −1 = a budget with a share of zero, n ≥ 1 = at most n |
 * | 15   | share refusals   | connection leases refused at the share since the owner last took the count (the demand the fleet rebalances by) |
 *
 * The owner writes the share (budget/redis-connection-budget.ts leases
 * it from Redis); every router checks it when it takes a connection lease,
 * on the count its own `Atomics.add` on the slot's connections word
 * returned (leases.ts): of two threads racing for the last unit the later
 * add sees both, so the process never holds more than its share, whatever
 * the number of threads (the same argument as `maxInflight`). A refused
 * taker undoes its add and counts one refusal here.
 *
 * A share that shrinks below the leases held refuses new ones until enough
 * are returned; nothing already held is taken away.
 */
import { S_CONN_SHARE, S_SHARE_REFUSED, type Layout } from './layout.js';

/** The share word's value for "a budget, and this process's share is zero". */
export const ZERO_SHARE = -1;

/** The connection-budget words of one table. */
export class ConnectionBudget {
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /**
   * The share word of slot `slot` as the pick path compares it: 0 none,
   * −1 zero, else the share. An SC load: the owner's store is seen by the next
   * lease (a share read a moment late is the previous share, which the owner
   * only replaces by one the fleet's sum already allows, so either is safe).
   */
  word(slot: number): number {
    return Atomics.load(this.i32, this.layout.slot(slot) + S_CONN_SHARE);
  }

  /** The share of slot `slot`: undefined without a budget, else the connection leases allowed (≥ 0). */
  share(slot: number): number | undefined {
    const w = this.word(slot);
    return w === 0 ? undefined : Math.max(w, 0);
  }

  /** Owner: sets slot `slot`'s share (undefined: no budget). Returns whether it changed. */
  setShare(slot: number, share: number | undefined): boolean {
    const w = share === undefined ? 0 : share <= 0 ? ZERO_SHARE : Math.min(share, 0x7fffffff);
    // exchange: one SC store that also says whether the value moved (for the caller's log and gauge wake-up).
    return Atomics.exchange(this.i32, this.layout.slot(slot) + S_CONN_SHARE, w) !== w;
  }

  /** Any thread: one connection lease on slot `slot` was refused at the share. */
  refused(slot: number): void {
    // add: refusals from every thread are counted, none lost.
    Atomics.add(this.i32, this.layout.slot(slot) + S_SHARE_REFUSED, 1);
  }

  /** Owner: the refusals on slot `slot` since the last call, and resets the count. */
  takeRefusals(slot: number): number {
    // exchange: a refusal counted between a read and a reset would be lost; one atomic swap loses none.
    return Atomics.exchange(this.i32, this.layout.slot(slot) + S_SHARE_REFUSED, 0) >>> 0;
  }

  /**
   * Owner only, not shared: the share a new occupant starts with — undefined
   * (no budget) until a fleet budget runs, then 0, so a backend that joins
   * takes no connection until the budget has leased it a share.
   */
  startShare: number | undefined = undefined;

  /** Owner: forgets slot `slot`'s refusals (a new occupant) and sets its starting share ({@link startShare}). */
  reset(slot: number): void {
    this.takeRefusals(slot);
    this.setShare(slot, this.startShare);
  }
}
