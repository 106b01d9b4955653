/**
 * Database state: what a database health check learned about a backend —
 * its role (primary or replica), a replica's replay lag, and its WAL
 * position (LSN) — written by the owner into five slot words (layout.ts):
 *
 * | word   | field       | unit / encoding |
 * |--------|-------------|-----------------|
 * | 9      | role        | 0 unknown / none, 1 primary, 2 replica |
 * | 10     | lag         | replay lag, ms, saturated at 2^30 − 1; 0 on a primary |
 * | 11     | LSN seqlock | even = stable, odd = the owner is writing words 12–13 |
 * | 12, 13 | LSN         | high and low 32 bits (a primary's current WAL LSN, a replica's replay LSN) |
 *
 * The owner is the one writer. Routers read the role at view builds (a role
 * change bumps the health epoch, so every router rebuilds its role sets at
 * its next pick) and the lag and LSN on the pick of a read: one load each,
 * never a scan.
 */
import { S_LAG_MS, S_LSN_HI, S_LSN_LO, S_LSN_SEQ, S_ROLE, type Layout } from './layout.js';

/** Role codes of the role word. */
export const DbRole = {
  /** No role known: not a database, not checked yet, or its last check failed. */
  Unknown: 0,
  Primary: 1,
  Replica: 2,
} as const;

/** A role code. */
export type DbRoleCode = (typeof DbRole)[keyof typeof DbRole];

/** The role code of a spec's `role` (`'none'` is unknown). */
export function dbRoleCode(role: string): DbRoleCode {
  return role === 'primary' ? DbRole.Primary : role === 'replica' ? DbRole.Replica : DbRole.Unknown;
}

/** Largest lag the lag word holds, ms (a larger lag reads as this: far over any sensible `maxLagMs`). */
export const MAX_LAG_MS = 0x3fff_ffff;

/** The database-state words of one table. */
export class DbState {
  private readonly i32: Int32Array;
  private readonly layout: Layout;
  /** This thread's copy of an LSN pair being read (a typed array: uint32 values stay unboxed). */
  private readonly scratch = new Uint32Array(2);

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /**
   * Owner: writes slot `slot`'s role, lag and LSN. Returns whether the role
   * changed (the caller then bumps the health epoch, after these stores, so
   * a router that sees the bump sees the role).
   */
  write(slot: number, role: DbRoleCode, lagMs: number, lsnHi: number, lsnLo: number): boolean {
    const o = this.layout.slot(slot);
    const i = this.i32;
    // Lag before role: a router that rebuilds on the role change reads a lag
    // at least as new as the role (SC stores, in order).
    const lag = Number.isFinite(lagMs) ? Math.max(0, Math.min(MAX_LAG_MS, Math.round(lagMs))) : MAX_LAG_MS;
    Atomics.store(i, o + S_LAG_MS, lag);
    // The LSN pair under a seqlock: the owner is the only writer, so a plain
    // odd/even sequence suffices (no CAS between writers); readers that see
    // an odd or moved sequence take the pair as unknown (never torn).
    const seq = Atomics.load(i, o + S_LSN_SEQ);
    Atomics.store(i, o + S_LSN_SEQ, (seq + 1) | 0);
    Atomics.store(i, o + S_LSN_HI, lsnHi | 0);
    Atomics.store(i, o + S_LSN_LO, lsnLo | 0);
    Atomics.store(i, o + S_LSN_SEQ, (seq + 2) | 0);
    return Atomics.exchange(i, o + S_ROLE, role) !== role;
  }

  /** Owner: sets slot `slot`'s role only (a spec's configured role, a failed check); returns whether it changed. */
  setRole(slot: number, role: DbRoleCode): boolean {
    // exchange: one SC read-modify-write tells the caller whether to bump the health epoch.
    return Atomics.exchange(this.i32, this.layout.slot(slot) + S_ROLE, role) !== role;
  }

  /** Owner: forgets slot `slot`'s state (a new occupant). */
  clear(slot: number): void {
    this.write(slot, DbRole.Unknown, 0, 0, 0);
  }

  /** The role of slot `slot` (read at view builds: Atomics, off the pick path). */
  role(slot: number): DbRoleCode {
    return Atomics.load(this.i32, this.layout.slot(slot) + S_ROLE) as DbRoleCode;
  }

  /**
   * The replay lag of slot `slot`, ms. On the pick path of a read: an
   * Atomics load of one aligned word (no allocation; ordered after the role
   * the view was built from).
   */
  lagMs(slot: number): number {
    return Atomics.load(this.i32, this.layout.slot(slot) + S_LAG_MS);
  }

  /**
   * Whether slot `slot`'s LSN has reached `min` (`[high, low]` 32-bit
   * halves; a typed array, so the uint32 values never cross a call boxed).
   * On the pick path: four loads, no allocation, no spin — a pair being
   * written (odd sequence) or rewritten during the read counts as not
   * reached, which sends the read elsewhere (a primary is never behind),
   * never to a replica that is behind.
   */
  reachedMin(slot: number, min: Uint32Array): boolean {
    const got = this.scratch;
    if (!this.readLsn(slot, got)) return false;
    const h = got[0]!;
    const mh = min[0]!;
    return h > mh || (h === mh && got[1]! >= min[1]!);
  }

  /** Slot `slot`'s LSN as a bigint, or undefined while it is being written (statistics, `poise top`). */
  lsn(slot: number): bigint | undefined {
    const got = this.scratch;
    if (!this.readLsn(slot, got)) return undefined;
    return (BigInt(got[0]!) << 32n) | BigInt(got[1]!);
  }

  /**
   * The seqlock read: copies slot `slot`'s LSN pair into `out` and returns
   * true, or false when the owner was writing it (odd sequence) or rewrote
   * it during the read. Never spins: a caller treats false as "unknown".
   */
  private readLsn(slot: number, out: Uint32Array): boolean {
    const o = this.layout.slot(slot);
    const i = this.i32;
    const seq = Atomics.load(i, o + S_LSN_SEQ);
    if ((seq & 1) !== 0) return false;
    out[0] = Atomics.load(i, o + S_LSN_HI);
    out[1] = Atomics.load(i, o + S_LSN_LO);
    return Atomics.load(i, o + S_LSN_SEQ) === seq;
  }
}
