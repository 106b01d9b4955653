/**
 * The Redis connection flags of every `poise` command that talks to the
 * control plane (`members`, `proxy`): where Redis is, in one of three forms.
 *
 *   --redis URL                                  one server (redis://, rediss://), or redis+sentinel://h:p,h:p/name[?db=N]
 *   --sentinel HOST:PORT,... --sentinel-name N   the master that these sentinels monitor
 *   --redis-cluster HOST:PORT,...                a Redis Cluster (seed nodes)
 *
 * Exactly one form; each mistake is a usage error naming the flag. The
 * values are checked by the same rules as the library options
 * (membership/redis-url.ts), so the CLI accepts what the library accepts.
 */
import type { RedisConnectionOptions } from '../membership/redis-target.js';
import { parseHostList, sentinelNameProblem } from '../membership/redis-url.js';
import { type FlagSpecs, redisUrlFlag } from './args.js';
import { UsageError } from './usage.js';

/** The parseArgs specs of the connection flags. */
export const REDIS_FLAGS = {
  redis: { type: 'string' },
  sentinel: { type: 'string' },
  'sentinel-name': { type: 'string' },
  'redis-cluster': { type: 'string' },
} as const satisfies FlagSpecs;

/** The `--help` lines of the connection flags. */
export const REDIS_FLAGS_HELP = `  --redis URL       redis://[:password@]host:port[/db] or rediss:// (TLS), or
                    redis+sentinel://[[user]:password@]host:port[,host:port...]/master-name[?db=N];
                    default $POISE_REDIS_URL
  --sentinel HOST:PORT,...  --sentinel-name NAME
                    find the master through these sentinels (instead of --redis)
  --redis-cluster HOST:PORT,...
                    a Redis Cluster, by seed nodes (instead of --redis): keys and the
                    sharded notice channel share the {cluster} hash slot`;

/** The raw values of the connection flags. */
export interface RedisFlagValues {
  redis?: string | undefined;
  sentinel?: string | undefined;
  'sentinel-name'?: string | undefined;
  'redis-cluster'?: string | undefined;
}

function hosts(flag: string, raw: string): string[] {
  const parsed = parseHostList(raw);
  if (typeof parsed === 'string') throw new UsageError(`${flag}: ${parsed}, got ${JSON.stringify(raw)}`, flag);
  return raw.split(',').map((s) => s.trim());
}

/**
 * The connection options the flags name, or undefined when none is given
 * (`fallbackUrl`, e.g. $POISE_REDIS_URL, is used only then). Throws
 * {@link UsageError}: two forms at once, `--sentinel` without
 * `--sentinel-name` (or the reverse), an empty list, an element that is not
 * host:port, a malformed URL.
 */
export function redisFlags(values: RedisFlagValues, fallbackUrl?: string): RedisConnectionOptions | undefined {
  const given = (['redis', 'sentinel', 'redis-cluster'] as const).filter((k) => values[k] !== undefined).map((k) => `--${k}`);
  if (given.length > 1)
    throw new UsageError(`${given[1]}: give exactly one of --redis, --sentinel, --redis-cluster (got ${given.join(' and ')})`, given[1]);
  const name = values['sentinel-name'];
  if (name !== undefined && values.sentinel === undefined) throw new UsageError('--sentinel-name: only with --sentinel', '--sentinel-name');
  if (values.sentinel !== undefined) {
    const sentinels = hosts('--sentinel', values.sentinel);
    if (name === undefined) throw new UsageError('--sentinel-name: required with --sentinel', '--sentinel-name');
    const problem = sentinelNameProblem(name);
    if (problem !== undefined) throw new UsageError(`--sentinel-name: ${problem}, got ${JSON.stringify(name)}`, '--sentinel-name');
    return { sentinels, sentinelName: name };
  }
  if (values['redis-cluster'] !== undefined) return { redisCluster: hosts('--redis-cluster', values['redis-cluster']) };
  const url = values.redis ?? (fallbackUrl === '' ? undefined : fallbackUrl);
  if (url === undefined) return undefined;
  return { url: redisUrlFlag('--redis', url)! };
}
