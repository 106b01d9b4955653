import { describe, expect, it } from 'vitest';
import { redisUrlFlag } from '../../src/cli/args.js';
import { UsageError } from '../../src/cli/usage.js';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { redisUrlProblem, validateRedisUrl } from '../../src/membership/redis-url.js';
import { thrown } from '../helpers/thrown.js';

const GOOD = ['redis://127.0.0.1:6379', 'rediss://cache.example:6380/2', 'redis://:secret@10.0.0.1:6379/0', 'redis://user:pw@[::1]:6379', 'REDIS://localhost'];
const BAD: unknown[] = ['http://x', 'redis//x', 'redis:x', 'redis://', 'redis://:pw@/0', 'redis://exa mple:6379', 'rediss:', '', 'tcp://127.0.0.1:6379', undefined, null, 6379];

describe('the one Redis URL rule', () => {
  it('accepts redis:// and rediss:// URLs with a host, and nothing else', () => {
    for (const u of GOOD) expect(redisUrlProblem(u)).toBeUndefined();
    for (const u of BAD) expect(redisUrlProblem(u)).toBe('must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N]');
  });

  it('validateRedisUrl names the field and the value', () => {
    const err = thrown(() => validateRedisUrl('redis:x', 'options.url'));
    expect(err.code).toBe('InvalidConfig');
    expect(err.field).toBe('options.url');
    expect(err.message).toBe('options.url: must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N], got "redis:x"');
    expect(validateRedisUrl(GOOD[0])).toBe(GOOD[0]);
  });

  it('the reader, the publisher and the CLI flag refuse exactly the same URLs', () => {
    for (const url of BAD) {
      expect(thrown(() => new RedisMembership({ url: url as string, cluster: 'c' })).field).toBe('options.url');
      expect(thrown(() => new MembershipPublisher({ url: url as string, cluster: 'c' })).field).toBe('options.url');
      if (typeof url === 'string') expect(() => redisUrlFlag('--redis', url)).toThrow(UsageError);
    }
    for (const url of GOOD) expect(redisUrlFlag('--redis', url)).toBe(url);
  });
});
