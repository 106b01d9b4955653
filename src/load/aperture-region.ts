/**
 * The aperture's two header words (layout.ts): the width the process uses
 * (a fraction of the ring, millionths; 0 = no aperture) and its coordinate
 * among the fleet's processes (`rank` of `processes`), which the fleet
 * connection budget's lease round returns (budget/redis-connection-budget.ts).
 * The owner writes them and bumps the health epoch; every router reads them
 * at its next view build (runtime/candidate-view.ts) and keeps only the
 * process's slice of the ring (policy/aperture.ts), so no message travels
 * and no pick reads them.
 *
 * The coordinate is one word, so a reader never sees a rank of one round
 * with the process count of another; the width is written before it (and
 * only once per budget), so a torn pair is at worst the previous width with
 * the new coordinate — a valid slice, replaced by the next build.
 */
import { H_APERTURE_COORD, H_APERTURE_WIDTH } from './layout.js';

/** The largest process count the coordinate word holds. */
export const MAX_APERTURE_PROCESSES = 0xffff;

/** What a router reads: the width (a fraction in (0, 1]) and the coordinate. */
export interface ApertureCoordinate {
  width: number;
  rank: number;
  processes: number;
}

/** The aperture words of one table. */
export class ApertureRegion {
  private readonly i32: Int32Array;

  constructor(i32: Int32Array) {
    this.i32 = i32;
  }

  /** Owner: turns the aperture on with `width` in (0, 1] (rounded to millionths, at least one), or off (undefined: coordinate forgotten). */
  configure(width: number | undefined): void {
    if (width === undefined) {
      Atomics.store(this.i32, H_APERTURE_COORD, 0);
      Atomics.store(this.i32, H_APERTURE_WIDTH, 0);
      return;
    }
    Atomics.store(this.i32, H_APERTURE_WIDTH, Math.min(1_000_000, Math.max(1, Math.round(width * 1_000_000))));
  }

  /**
   * Owner: this process is `rank` of `processes` (0 ≤ rank < processes ≤
   * 65535). Returns whether the word changed (the caller then bumps the
   * health epoch so routers rebuild).
   */
  setCoordinate(rank: number, processes: number): boolean {
    const word = (processes << 16) | rank | 0;
    // exchange: one atomic write that also tells whether anything moved.
    return Atomics.exchange(this.i32, H_APERTURE_COORD, word) !== word;
  }

  /** The aperture in force, or undefined when off or before the first coordinate (then the whole ring is used). */
  read(): ApertureCoordinate | undefined {
    // Atomics loads: the owner writes both words at any time; each is read whole.
    const width = Atomics.load(this.i32, H_APERTURE_WIDTH);
    if (width === 0) return undefined;
    const word = Atomics.load(this.i32, H_APERTURE_COORD) >>> 0;
    const processes = word >>> 16;
    const rank = word & 0xffff;
    if (processes === 0 || rank >= processes) return undefined;
    return { width: width / 1_000_000, rank, processes };
  }
}
