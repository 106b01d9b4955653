/**
 * The CLI's usage error: an unknown, missing or malformed flag, a flag value
 * out of its range, a wrong number of arguments. Every command turns it into
 * exit code 2 (see exit.ts); the message names the flag and the reason
 * (`--capacity: must be an integer in [1, 65536], got "0"`).
 */
export class UsageError extends Error {
  /** The offending flag (`--workers`), when one is to blame. */
  readonly flag: string | undefined;

  constructor(message: string, flag?: string) {
    super(message);
    this.name = 'UsageError';
    this.flag = flag;
  }
}
