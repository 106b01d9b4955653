import { describe, expect, it } from 'vitest';
import { UsageError } from '../src/kit.js';
import { DEFAULTS, LIMITS, defaultWorkers, parseBenchFlags } from '../src/flags.js';

function refused(argv: string[]): UsageError {
  try {
    parseBenchFlags(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return err as UsageError;
  }
  throw new Error(`accepted ${argv.join(' ')}`);
}

describe('poise bench flags', () => {
  it('defaults: cores workers, 8 backends, slow-backend, no explicit policies, OS seed', () => {
    const f = parseBenchFlags([]);
    expect(f).toMatchObject({
      workers: defaultWorkers(),
      backends: 8,
      concurrency: DEFAULTS.concurrency,
      duration: DEFAULTS.duration,
      scenario: 'slow-backend',
      policies: [],
      seed: undefined,
      connection: 'persistent',
    });
  });

  it('accepts --flag value and --flag=value, repeated --policy in order without duplicates', () => {
    const f = parseBenchFlags([
      '--workers',
      '2',
      '--duration=1.5s',
      '--policy',
      'random',
      '--policy=p2c:latency',
      '--policy',
      'random',
      '--seed',
      '42',
      '--scenario',
      'uniform',
      '--json',
      'a.json',
      '--report=r.html',
    ]);
    expect(f).toMatchObject({
      workers: 2,
      duration: 1.5,
      policies: ['random', 'p2c:latency'],
      seed: 42,
      scenario: 'uniform',
      json: 'a.json',
      report: 'r.html',
    });
  });

  const cases: Array<[string[], string]> = [
    [['--workers', '0'], `--workers: must be an integer in [${LIMITS.workers.min}, ${LIMITS.workers.max}], got "0"`],
    [['--workers', '2.5'], `--workers: must be an integer in [1, 64], got "2.5"`],
    [['--backends', '2'], `--backends: must be an integer in [3, 64], got "2"`],
    [['--concurrency', '-1'], `--concurrency: must be an integer in [1, 1024], got "-1"`],
    [['--duration', 'abc'], `--duration: must be a duration in [200ms, 1h] (a number with a unit ms, s, m or h; no unit = ms), got "abc"`],
    [['--duration', '0'], `--duration: must be a duration in [200ms, 1h] (a number with a unit ms, s, m or h; no unit = ms), got "0"`],
    // A bare number is milliseconds, as for every duration flag: 5 is 5 ms, below the range.
    [['--duration', '5'], `--duration: must be a duration in [200ms, 1h] (a number with a unit ms, s, m or h; no unit = ms), got "5"`],
    [
      ['--policy', 'fastest'],
      '--policy: must be one of round-robin, smooth-weighted, random, weighted, least-loaded, p2c, p2c:connections, p2c:requests, p2c:connectionTime, p2c:latency, probe, rendezvous, maglev, maglev:bounded, ring-hash, ring-hash:bounded, priority, locality, got "fastest"',
    ],
    [['--scenario', 'chaos'], '--scenario: must be one of slow-backend, uniform, failover, membership-churn, balls, got "chaos"'],
    [['--connection', 'udp'], '--connection: must be one of persistent, per-request, got "udp"'],
    [['--seed', '-3'], `--seed: must be an integer in [0, ${Number.MAX_SAFE_INTEGER}], got "-3"`],
    [
      ['--redis', 'http://x'],
      '--redis: must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N], got "http://x"',
    ],
    [['--redis', 'redis://127.0.0.1:6379'], '--cluster: --redis URL and --cluster NAME must be given together'],
    [['--cluster', 'db'], '--redis: --redis URL and --cluster NAME must be given together'],
    [
      ['--cluster', 'a b', '--redis', 'redis://127.0.0.1'],
      '--cluster: must be 1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit, got "a b"',
    ],
    // The one naming rule (membership/name.ts): the Redis reader refuses ':' too, so the flag must.
    [
      ['--cluster', 'a:b', '--redis', 'redis://127.0.0.1'],
      '--cluster: must be 1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit, got "a:b"',
    ],
    [['--workers'], '--workers: needs a value'],
    [['--workers', '2', '--workers', '3'], '--workers: given more than once'],
    [['--json', ''], '--json: must be a non-empty file path, got ""'],
    [['--scenario', 'failover', '--backends', '3'], '--backends: the failover scenario needs an integer in [4, 64], got 3'],
  ];
  it.each(cases)('refuses %j naming the flag and its range', (argv, message) => {
    const err = refused(argv);
    expect(err.message).toBe(message);
    expect(message.startsWith(err.flag!)).toBe(true);
  });

  it('refuses an unknown flag by name', () => {
    expect(refused(['--wokers', '2']).message).toMatch(/^unknown flag --wokers \(accepted: --workers, --backends, /);
  });
});
