/**
 * `poise bench` — the policies compared under load (what `npm start` runs).
 * The bench lives in its own package, `@poise-lb/bench` (packages/bench in
 * this repository), so that its 2,000 lines of harness, report and
 * simulation do not ship with the library. The package is private: it runs
 * from a clone of the repository, where `npm install` links it. This command
 * loads it when it is there and otherwise says how to get it: exit 1, or 0
 * for `--help`.
 */
import type { Command } from './command.js';
import { EXIT } from './exit.js';

/** The package that implements `poise bench`. */
export const BENCH_PACKAGE = '@poise-lb/bench';

/** What this command needs of the package. */
interface BenchModule {
  command: Command;
}

/** True when `err` says that `specifier` itself cannot be found (not one of its own imports). */
function isMissing(err: unknown, specifier: string): boolean {
  const e = err as NodeJS.ErrnoException;
  return e?.code === 'ERR_MODULE_NOT_FOUND' && typeof e.message === 'string' && e.message.includes(`'${specifier}'`);
}

/**
 * The `bench` command of `specifier` (default {@link BENCH_PACKAGE}), or
 * undefined when that package is not installed. Any other failure to load it
 * (a missing dependency of its own, a syntax error) is thrown as it is.
 */
export async function loadBench(specifier: string = BENCH_PACKAGE): Promise<Command | undefined> {
  try {
    return ((await import(specifier)) as BenchModule).command;
  } catch (err) {
    if (isMissing(err, specifier)) return undefined;
    throw err;
  }
}

/** The text for a `poise bench` without its package. */
export function missingBench(specifier: string = BENCH_PACKAGE): string {
  return `poise bench: the bench is the workspace package ${specifier} (packages/bench), which is not installed here.
It is not published: it runs from a clone of the repository, where \`npm install\` links it:

  git clone https://github.com/poise-for-node/poise-lb && cd poise-lb
  npm install
  npm start                     (or: npx poise bench --help)`;
}

/** Runs `poise bench argv` through `specifier`'s command. */
export async function runBench(argv: string[], specifier: string = BENCH_PACKAGE): Promise<number> {
  const bench = await loadBench(specifier);
  if (bench !== undefined) return bench.run(argv);
  const help = argv.includes('--help') || argv.includes('-h');
  (help ? process.stdout : process.stderr).write(`${missingBench(specifier)}\n`);
  return help ? EXIT.ok : EXIT.failure;
}

/** The `bench` subcommand. */
export const command: Command = {
  summary: `compare balancing policies under load on local TCP backends; writes an HTML report (npm start; package ${BENCH_PACKAGE})`,
  run: (argv) => runBench(argv),
};
