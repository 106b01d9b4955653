/** A `poise` subcommand, as the dispatcher (main.ts) loads it. */
export interface Command {
  /** One line for `poise --help`. */
  summary: string;
  /** Runs the command with the words after its name; resolves to the process exit code (exit.ts). */
  run(argv: string[]): Promise<number>;
}
