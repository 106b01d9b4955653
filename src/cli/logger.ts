/**
 * The CLI's logger: the level comes from a flag or `POISE_LOG_LEVEL`, and a
 * level that is not one of pino's is a usage error (exit 2) naming where it
 * came from — not a crash inside pino.
 */
import { LOG_LEVELS, createLogger, isLogLevel, type Logger } from '../log.js';
import { UsageError } from './usage.js';

/**
 * A logger named `name` at `flagLevel` (from `flag`, e.g. `--log-level`), else
 * `POISE_LOG_LEVEL`, else `dflt`. Throws {@link UsageError}.
 */
export function cliLogger(name: string, opts: { flag?: string; flagLevel?: string | undefined; dflt: string; pretty?: boolean }): Logger {
  const fromFlag = opts.flagLevel !== undefined;
  const level = opts.flagLevel ?? process.env['POISE_LOG_LEVEL'] ?? opts.dflt;
  if (!isLogLevel(level)) {
    const where = fromFlag ? (opts.flag ?? '--log-level') : 'POISE_LOG_LEVEL';
    throw new UsageError(`${where}: must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`, fromFlag ? where : undefined);
  }
  return createLogger({ name, level, ...(opts.pretty === undefined ? {} : { pretty: opts.pretty }) });
}
