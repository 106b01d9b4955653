/**
 * Rate-limited warnings: a burst of identical warnings (the same message and
 * key, e.g. the same malformed Redis notice published in a loop) becomes one
 * line, then one summary line with the count when the window ends.
 */
import type { Logger } from 'pino';
import { integerIn } from './core/validate.js';

/** Options of {@link rateLimited}. @internal */
export interface RateLimitOptions {
  /** Window in ms during which repeats of one (level, message, key) are counted, not logged; default 30000. */
  windowMs?: number;
  /**
   * Runs `fn` after `ms` (the summary at the end of a window); returns a
   * cancel function. Default: an unref'd `setTimeout`, so a pending summary
   * never keeps the process alive.
   */
  schedule?: (fn: () => void, ms: number) => () => void;
}

/** A logger facade whose `warn` / `error` drop repeats within a window. @internal */
export interface RateLimitedLogger {
  /** Logs at warn unless the same (`msg`, `key`) was logged less than `windowMs` ago. */
  warn(key: string, obj: Record<string, unknown>, msg: string): void;
  /** Logs at error unless the same (`msg`, `key`) was logged less than `windowMs` ago. */
  error(key: string, obj: Record<string, unknown>, msg: string): void;
  /** Logs the pending summaries now (call on close) and forgets every window. */
  flush(): void;
}

interface Window {
  level: 'warn' | 'error';
  msg: string;
  /** The fields of the last suppressed occurrence. */
  last: Record<string, unknown>;
  suppressed: number;
  cancel: (() => void) | undefined;
}

function defaultSchedule(fn: () => void, ms: number): () => void {
  const t = setTimeout(fn, ms);
  t.unref();
  return () => clearTimeout(t);
}

/**
 * Wraps `logger`: the first occurrence of a (level, message, key) is logged
 * at once; repeats within `windowMs` are counted; when the window ends, one
 * line with the same message, the last occurrence's fields and `repeated: N`
 * (the number suppressed) is logged. The next occurrence after that starts a
 * new window and is logged at once.
 *
 * @example
 * const limited = rateLimited(log, { windowMs: 30_000 });
 * limited.warn(err.message, { err: err.message }, 'membership notice rejected; membership unchanged');
 * @internal
 */
export function rateLimited(logger: Logger, opts: RateLimitOptions = {}): RateLimitedLogger {
  const windowMs = integerIn(opts.windowMs ?? 30_000, 'options.windowMs', 1);
  const schedule = opts.schedule ?? defaultSchedule;
  const windows = new Map<string, Window>();

  const close = (id: string, w: Window): void => {
    windows.delete(id);
    w.cancel?.();
    if (w.suppressed > 0) logger[w.level]({ ...w.last, repeated: w.suppressed, windowMs }, w.msg);
  };

  const log = (level: 'warn' | 'error', key: string, obj: Record<string, unknown>, msg: string): void => {
    const id = `${level}\u0000${msg}\u0000${key}`;
    const w = windows.get(id);
    if (w !== undefined) {
      w.suppressed++;
      w.last = obj;
      return;
    }
    logger[level](obj, msg);
    const fresh: Window = { level, msg, last: obj, suppressed: 0, cancel: undefined };
    windows.set(id, fresh);
    fresh.cancel = schedule(() => {
      if (windows.get(id) === fresh) close(id, fresh);
    }, windowMs);
  };

  return {
    warn: (key, obj, msg) => log('warn', key, obj, msg),
    error: (key, obj, msg) => log('error', key, obj, msg),
    flush() {
      for (const [id, w] of [...windows]) close(id, w);
    },
  };
}
