/**
 * The one naming rule of the control plane: cluster names and key prefixes.
 * Document validation, the Redis key builder and every CLI flag parser
 * (`--cluster`, `--prefix` of members, proxy and bench) check names here, so
 * a name one of them accepts is accepted by all of them.
 */
import { invalidConfig } from '../core/errors.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The rule in words, for messages and `--help`. */
export const NAME_RULE = '1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit';

/** Why `value` is not a valid cluster name or prefix (`must be ..., got "a:b"`), or undefined when it is. */
export function nameProblem(value: unknown): string | undefined {
  if (typeof value === 'string' && NAME.test(value)) return undefined;
  return `must be ${NAME_RULE}`;
}

/** Validates a cluster name (or a key prefix); returns it. Throws `InvalidConfig` naming `field`. */
export function validateName(value: unknown, field = 'cluster'): string {
  const problem = nameProblem(value);
  if (problem !== undefined) invalidConfig(field, problem, value);
  return value as string;
}
