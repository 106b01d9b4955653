/**
 * The pino logger factory. Library components take an optional `logger`
 * and fall back to {@link defaultLogger}: JSON on stderr at the level in
 * `POISE_LOG_LEVEL` (default `info`). The CLI pretty-prints only when its
 * output is a TTY.
 */
import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Logger name; default `poise`. */
  name?: string;
  /** pino level; default `POISE_LOG_LEVEL` or `info`. */
  level?: string;
  /** Pretty-print (pino-pretty) instead of JSON; default: when stderr is a TTY and `pretty` is not false. */
  pretty?: boolean;
}

/**
 * A pino logger writing to stderr (fd 2), so command output on stdout stays machine-readable.
 *
 * @example
 * const log = createLogger({ name: 'poise-proxy', level: 'debug' });
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? process.env['POISE_LOG_LEVEL'] ?? 'info';
  const name = opts.name ?? 'poise';
  const pretty = opts.pretty ?? false;
  if (pretty) {
    return pino({
      name,
      level,
      transport: { target: 'pino-pretty', options: { destination: 2, colorize: true } },
    });
  }
  return pino({ name, level }, pino.destination({ fd: 2, sync: true }));
}

let shared: Logger | undefined;

/** The process-wide default logger, created on first use. */
export function defaultLogger(): Logger {
  shared ??= createLogger();
  return shared;
}
