#!/usr/bin/env node
/**
 * `poise` — the command-line entry. Each subcommand lives in its own module
 * and is loaded only when asked for; each answers `--help`.
 *
 * Exit codes: one table for every subcommand (exit.ts, docs/cli.md "Exit codes"):
 * 0 success, 1 runtime failure, 2 usage error, 3 rejected by validation,
 * 4 not found, 5 conflict, 6 capacity exhausted, 7 stored snapshot corrupt.
 */
import { readFileSync } from 'node:fs';
import { importInOrder } from '../core/ordered-import.js';
import type { Command } from './command.js';
import { EXIT, exitCodeOf } from './exit.js';
import { keepYoungGenerationsSmall } from './young-generation.js';

/**
 * A subcommand's `command`, its module graph loaded one file at a time
 * (core/ordered-import.ts): Node 20's loader would hold every file of it open
 * at once, and `poise proxy` could not start under `ulimit -n 64`.
 */
async function commandOf(file: string): Promise<Command> {
  return ((await importInOrder(new URL(file, import.meta.url))) as { command: Command }).command;
}

const commands: Record<string, () => Promise<Command>> = {
  // subcommands register here: name → lazy loader
  bench: () => commandOf('./bench.js'),
  members: () => commandOf('./members.js'),
  proxy: () => {
    // Before the proxy's modules load: they would grow the main thread's young generation for good.
    keepYoungGenerationsSmall();
    return commandOf('./proxy.js');
  },
  top: () => commandOf('./top.js'),
};

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function usage(): Promise<string> {
  const lines = ['usage: poise <command> [flags]', '', 'commands:'];
  for (const [name, load] of Object.entries(commands)) lines.push(`  ${name.padEnd(10)} ${(await load()).summary}`);
  lines.push('', 'Run `poise <command> --help` for the flags of one command.');
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${await usage()}\n`);
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === '--version' || name === '-v') {
    process.stdout.write(`${version()}\n`);
    return EXIT.ok;
  }
  const load = commands[name];
  if (load === undefined) {
    process.stderr.write(`poise: unknown command ${JSON.stringify(name)}\n\n${await usage()}\n`);
    return EXIT.usage;
  }
  return (await load()).run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`poise: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = exitCodeOf(err);
  },
);
