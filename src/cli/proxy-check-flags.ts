/**
 * `poise proxy --check` and its companions (`--check-interval`,
 * `--check-timeout`, `--rise`, `--fall`): the active health check of every
 * backend. Usage errors name the flag.
 * @internal
 */
import type { HealthCheckOptions } from '../health/config.js';
import { durationFlag, integerFlag } from './args.js';
import { UsageError } from './usage.js';

/** A day in ms: the longest check interval or timeout. */
const DAY_MS = 86_400_000;

/** The flags this reads, as parsed. @internal */
export interface CheckFlagValues {
  check?: string | undefined;
  'check-interval'?: string | undefined;
  'check-timeout'?: string | undefined;
  rise?: string | undefined;
  fall?: string | undefined;
}

/** `--check` and its companions → an active check (usage errors name the flag). @internal */
export function checkFlags(values: CheckFlagValues): HealthCheckOptions | undefined {
  const tuning = (['check-interval', 'check-timeout', 'rise', 'fall'] as const).find((k) => values[k] !== undefined);
  if (values.check === undefined) {
    if (tuning !== undefined) throw new UsageError(`--${tuning}: needs --check`, `--${tuning}`);
    return undefined;
  }
  const raw = values.check;
  let check: HealthCheckOptions;
  if (raw === 'tcp' || raw === 'redis' || raw === 'postgres') check = { kind: raw };
  else if (raw === 'http' || raw.startsWith('http:')) {
    const path = raw === 'http' ? '/' : raw.slice(5);
    if (!/^\/[\x21-\x7e]*$/.test(path))
      throw new UsageError(
        `--check: the http path must start with "/" (printable ASCII, no spaces), got ${JSON.stringify(path)}`,
        '--check',
      );
    check = { kind: 'http', path };
  } else {
    throw new UsageError(`--check: must be one of tcp, http:/PATH, redis, postgres, got ${JSON.stringify(raw)}`, '--check');
  }
  const intervalMs = durationFlag('--check-interval', values['check-interval'], 10, DAY_MS);
  const timeoutMs = durationFlag('--check-timeout', values['check-timeout'], 1, DAY_MS);
  const rise = integerFlag('--rise', values.rise, 1, 1000);
  const fall = integerFlag('--fall', values.fall, 1, 1000);
  return {
    ...check,
    ...(intervalMs === undefined ? {} : { intervalMs }),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    ...(rise === undefined ? {} : { rise }),
    ...(fall === undefined ? {} : { fall }),
  };
}
