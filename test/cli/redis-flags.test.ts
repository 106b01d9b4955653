import { describe, expect, it } from 'vitest';
import { redisFlags } from '../../src/cli/redis-flags.js';
import { UsageError } from '../../src/cli/usage.js';

function usage(f: () => unknown): { message: string; flag: string | undefined } {
  try {
    f();
  } catch (err) {
    if (err instanceof UsageError) return { message: err.message, flag: err.flag };
    throw err;
  }
  throw new Error('no usage error');
}

describe('the Redis connection flags (--redis, --sentinel + --sentinel-name, --redis-cluster)', () => {
  it('each form resolves to the library options, lists trimmed and in order', () => {
    expect(redisFlags({ redis: 'redis://127.0.0.1:6379' })).toEqual({ url: 'redis://127.0.0.1:6379' });
    expect(redisFlags({ redis: 'redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster?db=2' })).toEqual({
      url: 'redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster?db=2',
    });
    expect(redisFlags({ sentinel: '127.0.0.1:26379, [::1]:26380', 'sentinel-name': 'mymaster' })).toEqual({
      sentinels: ['127.0.0.1:26379', '[::1]:26380'],
      sentinelName: 'mymaster',
    });
    expect(redisFlags({ 'redis-cluster': '10.0.0.1:7000,10.0.0.2:7000' })).toEqual({ redisCluster: ['10.0.0.1:7000', '10.0.0.2:7000'] });
  });

  it('the environment URL is used only when no flag names Redis', () => {
    expect(redisFlags({}, 'redis://env:6379')).toEqual({ url: 'redis://env:6379' });
    expect(redisFlags({}, '')).toBeUndefined();
    expect(redisFlags({})).toBeUndefined();
    expect(redisFlags({ 'redis-cluster': 'h:1' }, 'redis://env:6379')).toEqual({ redisCluster: ['h:1'] });
  });

  it.each([
    [
      { redis: 'redis://h:1', sentinel: 'h:2', 'sentinel-name': 'm' },
      '--sentinel',
      '--sentinel: give exactly one of --redis, --sentinel, --redis-cluster (got --redis and --sentinel)',
    ],
    [
      { sentinel: 'h:2', 'redis-cluster': 'h:3' },
      '--redis-cluster',
      '--redis-cluster: give exactly one of --redis, --sentinel, --redis-cluster (got --sentinel and --redis-cluster)',
    ],
    [{ sentinel: 'h:2' }, '--sentinel-name', '--sentinel-name: required with --sentinel'],
    [{ 'sentinel-name': 'm' }, '--sentinel-name', '--sentinel-name: only with --sentinel'],
    [
      { sentinel: 'h:2', 'sentinel-name': 'a/b' },
      '--sentinel-name',
      '--sentinel-name: must be 1 to 128 characters of [A-Za-z0-9._-], got "a/b"',
    ],
    [{ sentinel: '', 'sentinel-name': 'm' }, '--sentinel', '--sentinel: must name at least one "host:port", got ""'],
    [
      { sentinel: 'h:2,h', 'sentinel-name': 'm' },
      '--sentinel',
      '--sentinel: element 1 "h": must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"), got "h:2,h"',
    ],
    [{ 'redis-cluster': 'h:1,h:1' }, '--redis-cluster', '--redis-cluster: element 1 "h:1": repeated, got "h:1,h:1"'],
    [
      { 'redis-cluster': 'h:70000' },
      '--redis-cluster',
      '--redis-cluster: element 0 "h:70000": must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"), got "h:70000"',
    ],
    [
      { redis: 'redis+sentinel://h:1' },
      '--redis',
      '--redis: must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N] (must be redis+sentinel://[[user]:password@]host:port[,host:port...]/master-name[?db=N]), got "redis+sentinel://h:1"',
    ],
  ])('%j is refused naming %s', (values, flag, message) => {
    expect(usage(() => redisFlags(values))).toEqual({ message, flag });
  });
});
