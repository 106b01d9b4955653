import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { choiceFlag, durationFlag, formatDuration, integerFlag, nameFlag, parseFlags, pathFlag, redisUrlFlag } from '../../src/cli/args.js';
import { UsageError } from '../../src/cli/usage.js';

const SPECS = {
  workers: { type: 'string' },
  policy: { type: 'string', multiple: true },
  json: { type: 'boolean' },
} as const;

function refusal(f: () => unknown): { message: string; flag: string | undefined } {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return { message: (err as UsageError).message, flag: (err as UsageError).flag };
  }
  throw new Error('accepted');
}

describe('parseFlags: node:util parseArgs tokens → values or the house usage errors', () => {
  it('reads --flag value, --flag=value, repeated flags in order, switches and -h; absent flags have their empty value', () => {
    expect(parseFlags(['--workers', '2', '--policy=a', '--json', '--policy', 'b'], SPECS).values).toEqual({
      help: false,
      workers: '2',
      policy: ['a', 'b'],
      json: true,
    });
    expect(parseFlags([], SPECS).values).toEqual({ help: false, workers: undefined, policy: [], json: false });
    expect(parseFlags(['-h'], SPECS).values.help).toBe(true);
  });

  it('takes a negative number as a value or an argument, not as short flags (-25 is one argument)', () => {
    expect(parseFlags(['--workers', '-3'], SPECS).values.workers).toBe('-3');
    expect(parseFlags(['weight', 'b', '-25', '-'], SPECS, { positionals: true }).positionals).toEqual(['weight', 'b', '-25', '-']);
  });

  const cases: Array<[string[], string, string | undefined]> = [
    [['--wokers', '2'], 'unknown flag --wokers (accepted: --workers, --policy, --json, --help)', '--wokers'],
    [['-x'], 'unknown flag -x (accepted: --workers, --policy, --json, --help)', '-x'],
    [['--workers'], '--workers: needs a value', '--workers'],
    [['--workers', '--json'], '--workers: needs a value', '--workers'],
    [['--policy'], '--policy: needs a value', '--policy'],
    [['--workers', '2', '--workers=3'], '--workers: given more than once', '--workers'],
    [['--json=yes'], '--json: takes no value, got "yes"', '--json'],
    [['stray'], 'unexpected argument "stray" (this command takes flags only)', undefined],
    [['--workers', '2', '--bad', '--worse'], 'unknown flag --bad (accepted: --workers, --policy, --json, --help)', '--bad'],
  ];
  it.each(cases)('refuses %j: %s', (argv, message, flag) => {
    expect(refusal(() => parseFlags(argv, SPECS))).toEqual({ message, flag });
  });

  it('--help wins over anything else wrong on the line', () => {
    expect(parseFlags(['--wokers', '--help', 'stray', '--json=1'], SPECS).values.help).toBe(true);
  });

  it('any argv parses or is refused with a UsageError, and --f=v means the same as --f v (property)', () => {
    const word = fc.oneof(
      fc.constantFrom('--workers', '--policy', '--json', '--nope', '-h', '-x', '--', '-', '-7', 'a', '=', '--json=1'),
      fc.string({ maxLength: 4 }),
    );
    fc.assert(
      fc.property(fc.array(word, { maxLength: 8 }), fc.boolean(), (argv, positionals) => {
        try {
          parseFlags(argv, SPECS, { positionals });
        } catch (err) {
          expect(err).toBeInstanceOf(UsageError);
        }
      }),
    );
    fc.assert(
      fc.property(
        fc.string({ maxLength: 6 }).filter((v) => !v.startsWith('-')),
        (v) => {
          expect(parseFlags([`--workers=${v}`], SPECS).values.workers).toBe(v);
          expect(parseFlags(['--workers', v], SPECS).values.workers).toBe(v);
        },
      ),
    );
  });
});

describe('value checks: name the flag, the accepted range and the raw value', () => {
  const cases: Array<[() => unknown, string]> = [
    [() => integerFlag('--capacity', '0', 1, 65536), '--capacity: must be an integer in [1, 65536], got "0"'],
    [() => integerFlag('--capacity', '2.5', 1, 65536), '--capacity: must be an integer in [1, 65536], got "2.5"'],
    [() => integerFlag('--capacity', '1e3', 1, 65536), '--capacity: must be an integer in [1, 65536], got "1e3"'],
    [() => integerFlag('--capacity', '', 1, 65536), '--capacity: must be an integer in [1, 65536], got ""'],
    [
      () => integerFlag('--version', '9007199254740992', 1, Number.MAX_SAFE_INTEGER),
      '--version: must be an integer in [1, 9007199254740991], got "9007199254740992"',
    ],
    [
      () => durationFlag('--timeout-client', '30 s', 0, 86_400_000),
      '--timeout-client: must be a duration in [0ms, 24h] (a number with a unit ms, s, m or h; no unit = ms), got "30 s"',
    ],
    [
      () => durationFlag('--timeout-client', '25h', 0, 86_400_000),
      '--timeout-client: must be a duration in [0ms, 24h] (a number with a unit ms, s, m or h; no unit = ms), got "25h"',
    ],
    [
      () => durationFlag('--timeout-client', '-1s', 0, 86_400_000),
      '--timeout-client: must be a duration in [0ms, 24h] (a number with a unit ms, s, m or h; no unit = ms), got "-1s"',
    ],
    [
      () => choiceFlag('--connection', 'udp', ['persistent', 'per-request']),
      '--connection: must be one of persistent, per-request, got "udp"',
    ],
    [
      () => redisUrlFlag('--redis', 'http://x'),
      '--redis: must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N], got "http://x"',
    ],
    [
      () => redisUrlFlag('--redis', 'redis//x'),
      '--redis: must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N], got "redis//x"',
    ],
    [
      () => nameFlag('--cluster', 'a:b'),
      '--cluster: must be 1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit, got "a:b"',
    ],
    [() => pathFlag('--json', ''), '--json: must be a non-empty file path, got ""'],
  ];
  it.each(cases)('%#: %s', (f, message) => {
    const r = refusal(f);
    expect(r.message).toBe(message);
    expect(message.startsWith(`${r.flag}:`)).toBe(true);
  });

  it('formatDuration writes a bound in the largest unit that keeps it whole, and it parses back to the same ms', () => {
    const bounds = [0, 1, 10, 100, 200, 999, 1000, 1500, 5000, 60_000, 90_000, 600_000, 3_600_000, 5_400_000, 86_400_000];
    expect(bounds.map(formatDuration)).toEqual([
      '0ms',
      '1ms',
      '10ms',
      '100ms',
      '200ms',
      '999ms',
      '1s',
      '1500ms',
      '5s',
      '1m',
      '90s',
      '10m',
      '1h',
      '90m',
      '24h',
    ]);
    for (const ms of bounds) expect(durationFlag('--t', formatDuration(ms), 0, 86_400_000)).toBe(ms);
  });

  it('accepts the bounds, +N and -0, fractions of a unit, and passes an absent value through as undefined', () => {
    expect([
      integerFlag('--n', '1', 1, 9),
      integerFlag('--n', '9', 1, 9),
      integerFlag('--n', '+4', 1, 9),
      integerFlag('--n', ' 5 ', 1, 9),
    ]).toEqual([1, 9, 4, 5]);
    expect(Object.is(integerFlag('--n', '-0', 0, 9), 0)).toBe(true);
    expect(['30s', '2000', '1.5s', '250ms', '2m', '1h', '0'].map((d) => durationFlag('--t', d, 0, 86_400_000))).toEqual([
      30_000, 2000, 1500, 250, 120_000, 3_600_000, 0,
    ]);
    expect(durationFlag('--t', undefined, 0, 1)).toBeUndefined();
    expect(redisUrlFlag('--redis', 'rediss://:pw@h:6380/2')).toBe('rediss://:pw@h:6380/2');
    for (const f of [integerFlag, durationFlag] as const) expect(f('--x', undefined, 0, 1)).toBeUndefined();
    expect([
      choiceFlag('--c', undefined, ['a']),
      redisUrlFlag('--r', undefined),
      nameFlag('--n', undefined),
      pathFlag('--p', undefined),
    ]).toEqual([undefined, undefined, undefined, undefined]);
  });
});
