/**
 * The one Redis URL rule: `redis://` or `rediss://` (TLS), parseable as a
 * WHATWG URL, with a host. The Redis membership reader, the publisher and
 * every CLI `--redis` flag check URLs here, so a URL one of them accepts is
 * accepted by all of them (and ioredis then reads it as a server address,
 * not as a socket path or the default localhost by accident).
 */
import { invalidConfig } from '../core/errors.js';

/** The rule in words, for messages and `--help`. */
export const REDIS_URL_RULE = 'a redis:// or rediss:// URL with a host';

/** Why `value` is not an accepted Redis URL (`must be ...`), or undefined when it is. */
export function redisUrlProblem(value: unknown): string | undefined {
  if (typeof value === 'string' && /^rediss?:\/\//i.test(value)) {
    try {
      if (new URL(value).hostname !== '') return undefined;
    } catch {
      // not a URL: the same refusal below
    }
  }
  return `must be ${REDIS_URL_RULE}`;
}

/** Validates a Redis URL; returns it. Throws `InvalidConfig` naming `field`. */
export function validateRedisUrl(value: unknown, field = 'options.url'): string {
  const problem = redisUrlProblem(value);
  if (problem !== undefined) invalidConfig(field, problem, value);
  return value as string;
}
