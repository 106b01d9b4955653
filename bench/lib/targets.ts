/**
 * `--check`: a benchmark states its targets, records each figure against
 * them, and with `--check` exits non-zero when one is missed, printing which.
 * Without `--check` the misses are printed too, but the exit code stays 0
 * (a loaded machine's figures inform; a quiet run's decide).
 */

/** The targets of one benchmark run. */
export class Targets {
  /** `--check` was given: a missed target makes the process exit non-zero. */
  readonly enabled = process.argv.includes('--check');
  private readonly missed: string[] = [];
  private checked = 0;

  /** Records one target: `ok` false means `what` (the figure, its target) was missed. */
  expect(ok: boolean, what: string): void {
    this.checked++;
    if (!ok) this.missed.push(what);
  }

  /** The targets missed so far. */
  get misses(): readonly string[] {
    return this.missed;
  }

  /** Prints the verdict; with `--check` and a miss, sets a non-zero exit code. */
  finish(name: string): void {
    if (this.missed.length === 0) {
      console.log(`${name}: all ${this.checked} targets met`);
      return;
    }
    console.log(`${name}: ${this.missed.length} of ${this.checked} targets missed:`);
    for (const m of this.missed) console.log(`  MISSED ${m}`);
    if (this.enabled) process.exitCode = 1;
  }
}
