/**
 * What the `@poise-lb/bench` workspace package (packages/bench) takes from
 * poise-lb beyond its public entries: the one flag parser of every `poise`
 * command and its value checks, the usage error, the one exit-code table, the
 * cluster-name rule, the runtime's policy names and the seedable generator.
 *
 * Not a package entry (package.json "exports" does not list it, and a test
 * proves `poise-lb/cli` does not resolve): none of this is poise-lb's semver
 * API. The bench reaches it by a relative path into this package's build
 * (packages/bench/src/kit.ts); a unit run maps that path to this source
 * (vitest.config.ts).
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
  type FlagSpecs,
} from './cli/args.js';
export { UsageError } from './cli/usage.js';
export { EXIT, EXIT_HELP, exitCodeOf } from './cli/exit.js';
export { NAME_RULE } from './membership/name.js';
export { KEYED_POLICY_NAMES, POLICY_NAMES } from './runtime/policies.js';
export { Rng, type Seed } from './core/rng.js';
