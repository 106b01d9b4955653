/**
 * `poise-lb/cli` — what every command of the `poise` family shares, for the
 * commands that live in their own package (`@poise-lb/bench`): the one flag
 * parser and its value checks, the usage error, the one exit-code table and
 * the cluster-name rule. Explicit named exports only.
 */
export type { Command } from './cli/command.js';
export {
  parseFlags,
  integerFlag,
  durationFlag,
  formatDuration,
  DURATION_GRAMMAR,
  choiceFlag,
  redisUrlFlag,
  nameFlag,
  pathFlag,
  type FlagSpec,
  type FlagSpecs,
  type FlagValues,
  type ParsedFlags,
} from './cli/args.js';
export { UsageError } from './cli/usage.js';
export { EXIT, EXIT_HELP, exitCodeOf } from './cli/exit.js';
export { NAME_RULE } from './membership/name.js';
