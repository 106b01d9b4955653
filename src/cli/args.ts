/**
 * The one flag parser of every `poise` command. `node:util` parseArgs splits
 * argv into tokens (`--flag value`, `--flag=value`, `-h`, `--`, positionals);
 * this file turns them into values or a {@link UsageError} in the house style,
 * the same for every command:
 *
 *   unknown flag --wokers (accepted: --workers, --backends, --help)
 *   --workers: needs a value
 *   --workers: given more than once
 *   --json: takes no value, got "yes"
 *   unexpected argument "x" (this command takes flags only)
 *
 * and the value checks below (`--capacity: must be an integer in [1, 65536],
 * got "0"`). Every command answers `--help` / `-h`, which wins over any other
 * problem on the line.
 */
import { parseArgs } from 'node:util';
import { nameProblem } from '../membership/name.js';
import { redisUrlProblem } from '../membership/redis-url.js';
import { UsageError } from './usage.js';
import { isIntegerIn } from '../core/validate.js';

/** One flag: a string value (optionally repeatable) or a boolean switch. */
export interface FlagSpec {
  type: 'string' | 'boolean';
  /** A string flag that may repeat; its values come back in order. */
  multiple?: boolean;
  /** A one-letter alias (`-h`). */
  short?: string;
}

/** A command's flags by long name (without the dashes). */
export type FlagSpecs = Readonly<Record<string, FlagSpec>>;

type ValueOf<F extends FlagSpec> = F extends { type: 'boolean' } ? boolean : F extends { multiple: true } ? string[] : string | undefined;

/** The parsed values: a string flag's raw value (undefined when absent), `[]` for an absent repeatable flag, false for an absent switch. */
export type FlagValues<S extends FlagSpecs> = { -readonly [K in keyof S]: ValueOf<S[K]> } & { help: boolean };

/** What {@link parseFlags} returns. */
export interface ParsedFlags<S extends FlagSpecs> {
  values: FlagValues<S>;
  /** Positional arguments, in order (only when the command takes them). */
  positionals: string[];
}

const HELP: FlagSpec = { type: 'boolean', short: 'h' };

/** A negative number given where a value or an argument belongs (`--seed -3`, `weight b -2`), not a short flag. */
const NEGATIVE = /^-\d/;

/**
 * Parses `argv` against `specs` (plus `--help` / `-h`, always). Throws
 * {@link UsageError} naming the flag; when `--help` is on the line it returns
 * instead (with `values.help` true), whatever else is wrong.
 *
 * @example
 * const { values } = parseFlags(['--workers', '2', '--policy=random'], {
 *   workers: { type: 'string' },
 *   policy: { type: 'string', multiple: true },
 * });
 * integerFlag('--workers', values.workers, 1, 64); // 2
 * values.policy; // ['random']
 */
export function parseFlags<const S extends FlagSpecs>(
  argv: readonly string[],
  specs: S,
  opts: { positionals?: boolean } = {},
): ParsedFlags<S> {
  const all: Record<string, FlagSpec> = { help: HELP, ...specs };
  const { tokens } = parseArgs({ args: [...argv], options: all, strict: false, allowPositionals: true, tokens: true });
  const values: Record<string, string | string[] | boolean | undefined> = {};
  for (const [name, spec] of Object.entries(all)) values[name] = spec.type === 'boolean' ? false : spec.multiple === true ? [] : undefined;
  const positionals: string[] = [];
  const seen = new Set<string>();
  let problem: UsageError | undefined;
  const fail = (message: string, flag?: string): void => {
    problem ??= new UsageError(message, flag);
  };
  let negativeAt = -1;
  for (const t of tokens) {
    if (t.kind === 'option-terminator') continue;
    let positional: string | undefined;
    if (t.kind === 'positional') positional = t.value;
    else if (!Object.hasOwn(all, t.name) && NEGATIVE.test(argv[t.index]!)) {
      // parseArgs reads "-25" as the short flags -2 -5 (two tokens, one index): it is one argument.
      if (t.index === negativeAt) continue;
      negativeAt = t.index;
      positional = argv[t.index]!;
    }
    if (positional !== undefined) {
      if (opts.positionals === true) positionals.push(positional);
      else fail(`unexpected argument ${JSON.stringify(positional)} (this command takes flags only)`);
      continue;
    }
    if (t.kind !== 'option') continue;
    const flag = t.rawName.startsWith('--') ? t.rawName : `-${t.name}`;
    const spec = Object.hasOwn(all, t.name) ? all[t.name] : undefined;
    if (spec === undefined) {
      fail(
        `unknown flag ${flag} (accepted: ${Object.keys(specs)
          .map((n) => `--${n}`)
          .join(', ')}, --help)`,
        flag,
      );
      continue;
    }
    const long = `--${t.name}`;
    if (spec.type === 'boolean') {
      if (t.value !== undefined) fail(`${long}: takes no value, got ${JSON.stringify(t.value)}`, long);
      values[t.name] = true;
      continue;
    }
    // `--workers --backends 3`: parseArgs hands "--backends" to --workers; it is a missing value.
    if (t.value === undefined || (t.inlineValue === false && t.value.startsWith('--'))) {
      fail(`${long}: needs a value`, long);
      continue;
    }
    if (spec.multiple === true) (values[t.name] as string[]).push(t.value);
    else if (seen.has(t.name)) fail(`${long}: given more than once`, long);
    else values[t.name] = t.value;
    seen.add(t.name);
  }
  if (problem !== undefined && values['help'] !== true) throw problem;
  return { values: values as FlagValues<S>, positionals };
}

/** `raw` as a safe integer in [min, max]; undefined when absent. Throws {@link UsageError} naming `flag`. */
export function integerFlag(flag: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = /^[+-]?\d+$/.test(raw.trim()) ? Number(raw) + 0 : Number.NaN; // + 0: "-0" is 0
  if (!isIntegerIn(v, min, max)) throw new UsageError(`${flag}: must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`, flag);
  return v;
}

/** The units of a duration, largest first, in ms. */
const DURATION_UNITS: readonly (readonly [string, number])[] = [
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
  ['ms', 1],
];
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;

/**
 * The one duration grammar of every `poise` flag that takes a time, as the
 * help texts state it: a number with a unit `ms`, `s`, `m` or `h`, no unit
 * meaning milliseconds (as in HAProxy).
 */
export const DURATION_GRAMMAR = 'a number with a unit ms, s, m or h; no unit = ms';

/** `ms` in the largest unit that writes it as a whole number: `86400000` → `24h`, `1500` → `1500ms`. */
export function formatDuration(ms: number): string {
  for (const [unit, size] of DURATION_UNITS) if (ms !== 0 && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/**
 * `raw` as a duration in whole milliseconds in [minMs, maxMs], in the one
 * grammar ({@link DURATION_GRAMMAR}): `30s`, `2000` (ms), `1.5s`, `10m`,
 * `1h`; fractions round to the nearest ms. Undefined when absent. Throws
 * {@link UsageError} naming `flag`, the range and the grammar.
 *
 * @example
 * durationFlag('--grace', '5s', 0, 86_400_000); // 5000
 * durationFlag('--grace', '5 s', 0, 86_400_000); // UsageError: --grace: must be a duration in [0ms, 24h] (a number with ...
 */
export function durationFlag(flag: string, raw: string | undefined, minMs: number, maxMs: number): number | undefined {
  if (raw === undefined) return undefined;
  const m = DURATION.exec(raw.trim());
  const unit = m === null ? undefined : DURATION_UNITS.find(([u]) => u === (m[2] ?? 'ms'));
  const v = m === null || unit === undefined ? Number.NaN : Math.round(Number(m[1]) * unit[1]);
  if (!Number.isSafeInteger(v) || v < minMs || v > maxMs) {
    throw new UsageError(
      `${flag}: must be a duration in [${formatDuration(minMs)}, ${formatDuration(maxMs)}] (${DURATION_GRAMMAR}), got ${JSON.stringify(raw)}`,
      flag,
    );
  }
  return v;
}

/** `raw` when it is one of `allowed`; undefined when absent. Throws {@link UsageError} listing them. */
export function choiceFlag<T extends string>(flag: string, raw: string | undefined, allowed: readonly T[]): T | undefined {
  if (raw === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(raw))
    throw new UsageError(`${flag}: must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`, flag);
  return raw as T;
}

/** `raw` when it is a Redis URL (the one rule, membership/redis-url.ts); undefined when absent. Throws {@link UsageError}. */
export function redisUrlFlag(flag: string, raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const problem = redisUrlProblem(raw);
  if (problem !== undefined) throw new UsageError(`${flag}: ${problem}, got ${JSON.stringify(raw)}`, flag);
  return raw;
}

/** `raw` when it is a valid cluster name or key prefix (the one naming rule, membership/name.ts); undefined when absent. */
export function nameFlag(flag: string, raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const problem = nameProblem(raw);
  if (problem !== undefined) throw new UsageError(`${flag}: ${problem}, got ${JSON.stringify(raw)}`, flag);
  return raw;
}

/** `raw` when it is a non-empty path; undefined when absent. Throws {@link UsageError}. */
export function pathFlag(flag: string, raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (raw.length === 0) throw new UsageError(`${flag}: must be a non-empty file path, got ""`, flag);
  return raw;
}
