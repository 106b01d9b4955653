/**
 * The pino logger factory. Library components take an optional `logger`
 * and fall back to {@link defaultLogger}: JSON on stderr at the level in
 * `POISE_LOG_LEVEL`, default {@link DEFAULT_LOG_LEVEL} (`warn`: a library
 * says nothing while things go as planned). The CLI picks its own defaults
 * and pretty-prints only when its output is a TTY.
 */
import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import { invalidConfig } from './core/errors.js';

export type { Logger } from 'pino';
/** Re-exported for the library's own sources. @internal */
export { rateLimited, type RateLimitedLogger, type RateLimitOptions } from './log-rate.js';

/** The accepted log levels, most severe first. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The level of a library logger when neither an option nor `POISE_LOG_LEVEL`
 * names one: `warn`, so membership changes, health transitions and listener
 * start-up (info) stay quiet and what needs attention (warn, error) does not.
 */
export const DEFAULT_LOG_LEVEL: LogLevel = 'warn';

/** True when `value` is one of {@link LOG_LEVELS}. @internal */
export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value);
}

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Logger name; default `poise`. */
  name?: string;
  /** pino level, one of {@link LOG_LEVELS}; default `POISE_LOG_LEVEL`, else {@link DEFAULT_LOG_LEVEL} (`warn`). */
  level?: string;
  /**
   * Pretty-print with pino-pretty instead of JSON; default false (the CLI passes
   * true when stderr is a TTY). pino-pretty is an optional dependency: when it
   * is not installed the logger writes JSON.
   */
  pretty?: boolean;
}

/**
 * A pino logger writing to stderr (fd 2), so command output on stdout stays
 * machine-readable. Throws `InvalidConfig` naming `level` (or
 * `POISE_LOG_LEVEL`) when the level is not one of {@link LOG_LEVELS}.
 *
 * @example
 * const log = createLogger({ name: 'poise-proxy', level: 'debug' });
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const fromEnv = opts.level === undefined;
  const level = opts.level ?? process.env['POISE_LOG_LEVEL'] ?? DEFAULT_LOG_LEVEL;
  if (!isLogLevel(level)) invalidConfig(fromEnv ? 'POISE_LOG_LEVEL' : 'level', `must be one of ${LOG_LEVELS.join(', ')}`, level);
  const name = opts.name ?? 'poise';
  const pretty = opts.pretty ?? false;
  if (pretty && hasPinoPretty()) {
    return pino({
      name,
      level,
      transport: { target: 'pino-pretty', options: { destination: 2, colorize: true } },
    });
  }
  return pino({ name, level }, pino.destination({ fd: 2, sync: true }));
}

/** Whether the optional pino-pretty can be loaded from here (where pino will resolve it from). */
function hasPinoPretty(): boolean {
  try {
    createRequire(import.meta.url).resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

let shared: Logger | undefined;

/** The process-wide default logger (`createLogger()`: `POISE_LOG_LEVEL`, else `warn`), created on first use. @internal */
export function defaultLogger(): Logger {
  shared ??= createLogger();
  return shared;
}
