/**
 * Database roles on the router's side: the freshness test a read applies to
 * a drawn replica (its lag, its replay LSN). Each role's prepared candidate
 * set (primaries, replicas) is a candidate set like a tier's
 * (candidate-sets.ts).
 *
 * Why the filter draws instead of preparing a "fresh replicas" set: lag and
 * LSN move on every check without an epoch (a bump per lag change would
 * rebuild every router's view several times a second), and the bound a
 * read applies is per call (`maxLagMs`, `minLsn`), so no prepared set can
 * hold the answer. A read draws within the replica set with the router's
 * policy, tests the drawn replica (one lag word, the LSN pair under its
 * seqlock: O(1), no allocation) and, when it is behind, blocks it for this
 * acquire and draws again — at most `min(READ_DRAWS, eligible replicas)`
 * times — then falls through to the primary. Blocked members are not drawn
 * again, so with up to READ_DRAWS eligible replicas the filter is exact
 * (every one is tried before the primary); with more it tries READ_DRAWS
 * distinct replicas and may read from the primary while a fresh replica
 * exists, which is always correct (a primary is never behind), only less
 * spread. Never a scan of all backends. docs/internals.md, "Reads under lag".
 */
import { invalidConfig } from '../core/errors.js';
import { parseLsnInto } from '../db/lsn.js';
import type { DbState } from '../load/db-state.js';

/** Distinct replicas one read tries before it falls through to the primary. */
export const READ_DRAWS = 4;

/** What falls back when no replica qualifies. */
export type ReadFallback = 'primary' | 'refuse';

/** The bounds of the read in progress (one per router; set per acquire, no allocation). */
export class ReadBounds {
  /** The lag bound in force, ms. */
  maxLagMs = 0;
  /** Whether a minimum LSN applies. */
  hasMin = false;
  /** The minimum LSN's high and low 32 bits (a typed array: uint32 values stay unboxed, internals.md). */
  readonly minLsn = new Uint32Array(2);

  /**
   * Sets the minimum LSN from `value` (undefined: none). The string form is
   * parsed with `charCodeAt` (no substring, no allocation); a bigint is
   * split with bigint arithmetic (which allocates).
   */
  setMinLsn(value: unknown): void {
    if (value === undefined) {
      this.hasMin = false;
      return;
    }
    if (typeof value === 'string') {
      if (!parseLsnInto(value, this.minLsn)) {
        invalidConfig('acquire(options).minLsn', 'must be an LSN "X/Y" (two hex numbers of 1 to 8 digits) or a bigint', value);
      }
    } else if (typeof value === 'bigint') {
      if (value < 0n || value > 0xffff_ffff_ffff_ffffn)
        invalidConfig('acquire(options).minLsn', 'must be a bigint in [0, 2^64 − 1]', value);
      this.minLsn[0] = Number(value >> 32n);
      this.minLsn[1] = Number(value & 0xffff_ffffn);
    } else {
      invalidConfig('acquire(options).minLsn', 'must be an LSN "X/Y" or a bigint', value);
    }
    this.hasMin = true;
  }

  /** Whether the replica in `slot` is fresh enough for this read: lag within the bound, LSN reached. */
  fresh(db: DbState, slot: number): boolean {
    if (db.lagMs(slot) > this.maxLagMs) return false;
    return !this.hasMin || db.reachedMin(slot, this.minLsn);
  }
}

/** Checks a lag bound: a finite number of ms ≥ 0 (`field` names it). */
export function checkLag(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) invalidConfig(field, 'must be a finite number of ms >= 0', value);
  return value;
}
