/**
 * How Redis failures surface: a connection problem becomes `Unavailable`
 * naming the server (password redacted) and the underlying reason — never
 * ioredis' "Reached the max retries per request limit", which names neither.
 */
import { PoiseError } from '../core/errors.js';

/** The URL without its password, for logs and messages. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, (_m, auth: string) => `//${auth.includes(':') ? `${auth.split(':')[0]}:***` : '***'}@`);
}

/**
 * The `Unavailable` error of a Redis command that failed for `err`.
 * `lastConnectionError` is the last 'error' event of the connection: when the
 * command itself only says that ioredis gave up, that is the real reason.
 * `outcome` ends the message (`nothing written`, `nothing read`).
 */
export function redisUnavailable(url: string, err: unknown, lastConnectionError: string | undefined, outcome: string): PoiseError {
  const e = err as Error;
  // A reply error (WRONGPASS, OOM, READONLY) is the server speaking: its own message is the reason.
  const reason = e?.name === 'ReplyError' ? e.message : (lastConnectionError ?? e?.message ?? String(err));
  return new PoiseError('Unavailable', `redis ${redactUrl(url)}: unavailable (${reason}); ${outcome}`, { field: 'redis', cause: err });
}
