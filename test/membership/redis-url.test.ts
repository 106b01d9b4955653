import { describe, expect, it } from 'vitest';
import { redisUrlFlag } from '../../src/cli/args.js';
import { UsageError } from '../../src/cli/usage.js';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { RedisMembership } from '../../src/membership/redis-source.js';
import { redisUrlProblem, validateRedisUrl } from '../../src/membership/redis-url.js';
import { thrown } from '../helpers/thrown.js';

const GOOD = [
  'redis://127.0.0.1:6379',
  'rediss://cache.example:6380/2',
  'redis://:secret@10.0.0.1:6379/0',
  'redis://user:pw@[::1]:6379',
  'REDIS://localhost',
];
const BAD: unknown[] = [
  'http://x',
  'redis//x',
  'redis:x',
  'redis://',
  'redis://:pw@/0',
  'redis://exa mple:6379',
  'rediss:',
  '',
  'tcp://127.0.0.1:6379',
  undefined,
  null,
  6379,
];

describe('the one Redis URL rule', () => {
  it('accepts redis:// and rediss:// URLs with a host, and nothing else', () => {
    for (const u of GOOD) expect(redisUrlProblem(u)).toBeUndefined();
    for (const u of BAD)
      expect(redisUrlProblem(u)).toBe(
        'must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N]',
      );
  });

  it('validateRedisUrl names the field and the value', () => {
    const err = thrown(() => validateRedisUrl('redis:x', 'options.url'));
    expect(err.code).toBe('InvalidConfig');
    expect(err.field).toBe('options.url');
    expect(err.message).toBe(
      'options.url: must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N], got "redis:x"',
    );
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

describe('the redis+sentinel:// URL', () => {
  it('parses sentinels, the master name, db and the master credentials (percent-decoded)', async () => {
    const { parseSentinelUrl } = await import('../../src/membership/redis-url.js');
    expect(parseSentinelUrl('redis+sentinel://app:p%40ss@10.0.0.1:26379,[::1]:26380/my.master?db=3')).toEqual({
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      name: 'my.master',
      db: 3,
      username: 'app',
      password: 'p@ss',
    });
    expect(parseSentinelUrl('redis+sentinel://:secret@h:1/m')).toEqual({
      sentinels: [{ host: 'h', port: 1 }],
      name: 'm',
      db: 0,
      username: undefined,
      password: 'secret',
    });
    expect(parseSentinelUrl('REDIS+SENTINEL://h:1/m')).toMatchObject({ name: 'm', db: 0 });
  });

  it('the reader, the publisher and the flag accept and refuse the same sentinel URLs', () => {
    const good = ['redis+sentinel://h:1/m', 'redis+sentinel://h:1,h:2/m?db=0'];
    const bad = [
      'redis+sentinel://h:1',
      'redis+sentinel://h/m',
      'redis+sentinel://h:1,h:1/m',
      'redis+sentinel://h:1/m?db=100',
      'redis+sentinel:///m',
      'redis+sentinel://h:1/m/extra',
    ];
    for (const url of good) {
      expect(redisUrlProblem(url)).toBeUndefined();
      expect(redisUrlFlag('--redis', url)).toBe(url);
      expect(() => new RedisMembership({ url, cluster: 'c' })).not.toThrow();
    }
    for (const url of bad) {
      expect(redisUrlProblem(url)).toMatch(/^must be a redis:\/\/ or rediss:\/\/ URL with a host, or redis\+sentinel:\/\/.* \(.+\)$/);
      expect(thrown(() => new RedisMembership({ url, cluster: 'c' })).field).toBe('options.url');
      expect(thrown(() => new MembershipPublisher({ url, cluster: 'c' })).field).toBe('options.url');
      expect(() => redisUrlFlag('--redis', url)).toThrow(UsageError);
    }
  });
});
