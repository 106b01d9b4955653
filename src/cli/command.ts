import { parseFlags, type FlagSpecs, type FlagValues } from './args.js';
import { EXIT, reportFailure } from './exit.js';

/** A `poise` subcommand, as the dispatcher (main.ts) loads it. */
export interface Command {
  /** One line for `poise --help`. */
  summary: string;
  /** Runs the command with the words after its name; resolves to the process exit code (exit.ts). */
  run(argv: string[]): Promise<number>;
}

/**
 * The `run` of a command that takes flags only: parses `argv` against
 * `specs`, prints `help` for `--help`, otherwise runs `body`; a thrown error
 * becomes the exit code and message of {@link reportFailure}.
 */
export function flagCommand<const S extends FlagSpecs>(
  name: string,
  specs: S,
  help: string,
  body: (values: FlagValues<S>) => Promise<number>,
): Command['run'] {
  return async (argv) => {
    try {
      const { values } = parseFlags(argv, specs);
      if (values.help) {
        process.stdout.write(`${help}\n`);
        return EXIT.ok;
      }
      return await body(values);
    } catch (err) {
      return reportFailure(name, err);
    }
  };
}
