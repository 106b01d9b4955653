/**
 * Progress while a run goes: one line rewritten in place when stdout is a
 * TTY, plain lines (at most one a second) otherwise.
 */
import type { Writable } from 'node:stream';

/** Where progress and results go. */
export interface Output {
  stream: Writable & { isTTY?: boolean };
}

/** A progress reporter bound to one output stream. */
export class Progress {
  private lastPlain = Number.NEGATIVE_INFINITY;
  private open = false;

  /** `clock` (ms) paces the plain lines; injectable for tests. */
  constructor(
    private readonly out: Output['stream'],
    private readonly clock: () => number = () => performance.now(),
  ) {}

  private get tty(): boolean {
    return this.out.isTTY === true;
  }

  /** Shows `line`: in place on a TTY; as a plain line at most once a second otherwise (or always when `force`). */
  update(line: string, force = false): void {
    if (this.tty) {
      this.out.write(`\r\x1b[2K${line}`);
      this.open = true;
      return;
    }
    const now = this.clock();
    if (!force && now - this.lastPlain < 1000) return;
    this.lastPlain = now;
    this.out.write(`${line}\n`);
  }

  /** Ends the in-place line (TTY) so that ordinary output follows cleanly. */
  done(): void {
    if (this.tty && this.open) this.out.write('\r\x1b[2K');
    this.open = false;
  }
}
