/**
 * One duration grammar for every flag of every `poise` command that takes a
 * time: each flag below is parsed through its own command's parser (the
 * words a user types, not durationFlag alone), and each must accept the
 * same spellings, print its range in the same words, and refuse the same
 * malformed values. A test at the end keeps the table complete: every flag
 * a help text documents with a duration `D` is in it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { DURATION_GRAMMAR, formatDuration } from '../../src/cli/args.js';
import { MEMBERS_HELP, parseMembersConnection } from '../../src/cli/members.js';
import { PROXY_HELP, parseProxyArgs } from '../../src/cli/proxy.js';
import { TOP_HELP, topIntervalMs, topTimeoutMs } from '../../src/cli/top.js';
import { UsageError } from '../../src/cli/usage.js';
import { benchHelp, parseBenchFlags } from '../../packages/bench/src/flags.js';

/** POISE_LOG_LEVEL silent for the proxy's logger (the parser builds one). */
const savedLevel = process.env['POISE_LOG_LEVEL'];
process.env['POISE_LOG_LEVEL'] = 'silent';
afterAll(() => {
  if (savedLevel === undefined) delete process.env['POISE_LOG_LEVEL'];
  else process.env['POISE_LOG_LEVEL'] = savedLevel;
});

const DAY = 86_400_000;
const PROXY = ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:7001'];
const BANDS = ['--band', 'hi=1', '--band', 'lo=0', '--admission-ceiling-min', '0.5'];
const REDIS = ['--redis', 'redis://127.0.0.1:6379', '--cluster', 'c'];

interface Row {
  /** The flag as typed. */
  flag: string;
  /** The command's parse of the flag given `raw` (absent when undefined), in ms. */
  parse: (raw: string | undefined) => number | undefined;
  min: number;
  max: number;
  /** What an absent flag gives (undefined: left to the component's own default). */
  absent: number | undefined;
}

const arg = (flag: string, raw: string | undefined): string[] => (raw === undefined ? [] : [flag, raw]);
const proxy =
  (flag: string, read: (f: ReturnType<typeof parseProxyArgs>) => number | undefined, extra: string[] = []) =>
  (raw: string | undefined) =>
    read(parseProxyArgs([...PROXY, ...extra, ...arg(flag, raw)]));

const ROWS: Row[] = [
  {
    flag: '--watcher-lease',
    parse: (raw) =>
      parseProxyArgs(['--listen', '127.0.0.1:6000', '--discover', 'dns:a.test:80', ...REDIS, ...arg('--watcher-lease', raw)])
        .watcherLeaseMs,
    min: 100,
    max: 600_000,
    absent: undefined,
  },
  { flag: '--grace', parse: proxy('--grace', (f) => f.graceMs), min: 0, max: DAY, absent: 30_000 },
  { flag: '--wait-log-interval', parse: proxy('--wait-log-interval', (f) => f.waitLogMs), min: 100, max: 600_000, absent: 5000 },
  {
    flag: '--check-interval',
    parse: proxy('--check-interval', (f) => f.check?.intervalMs, ['--check', 'tcp']),
    min: 10,
    max: DAY,
    absent: undefined,
  },
  {
    flag: '--check-timeout',
    parse: proxy('--check-timeout', (f) => f.check?.timeoutMs, ['--check', 'tcp']),
    min: 1,
    max: DAY,
    absent: undefined,
  },
  {
    flag: '--timeout-connect',
    parse: proxy('--timeout-connect', (f) => f.connection.connectTimeoutMs),
    min: 1,
    max: 600_000,
    absent: 2000,
  },
  { flag: '--timeout-client', parse: proxy('--timeout-client', (f) => f.connection.clientTimeoutMs), min: 0, max: DAY, absent: 30_000 },
  { flag: '--timeout-server', parse: proxy('--timeout-server', (f) => f.connection.serverTimeoutMs), min: 0, max: DAY, absent: 30_000 },
  {
    flag: '--accept-proxy-timeout',
    parse: proxy('--accept-proxy-timeout', (f) => f.connection.acceptProxyTimeoutMs, ['--accept-proxy']),
    min: 1,
    max: 600_000,
    absent: 5000,
  },
  {
    flag: '--admission-timeout',
    parse: proxy('--admission-timeout', (f) => f.admission?.gate.timeoutMs, BANDS),
    min: 1,
    max: DAY,
    absent: undefined,
  },
  {
    flag: '--wait-timeout',
    parse: (raw) => parseMembersConnection([...REDIS, '--wait-replicas', '1', ...arg('--wait-timeout', raw)]).waitTimeoutMs,
    min: 1,
    max: 60_000,
    absent: undefined,
  },
  { flag: '--interval', parse: topIntervalMs, min: 100, max: 3_600_000, absent: 2000 },
  { flag: '--timeout', parse: topTimeoutMs, min: 100, max: 600_000, absent: 5000 },
  {
    flag: '--duration',
    // bench keeps seconds inside; the flag is a duration like every other.
    parse: (raw) => parseBenchFlags(arg('--duration', raw)).duration * 1000,
    min: 200,
    max: 3_600_000,
    absent: 5000,
  },
];

function refusal(row: Row, raw: string): string {
  try {
    row.parse(raw);
  } catch (err) {
    // The bench package's UsageError is the same class, through its kit (src/bench-kit.ts).
    expect((err as Error).constructor.name).toBe(UsageError.name);
    expect((err as UsageError).flag).toBe(row.flag);
    return (err as Error).message;
  }
  throw new Error(`${row.flag} ${JSON.stringify(raw)} was accepted`);
}

describe.each(ROWS)('$flag', (row) => {
  const message = (raw: string) =>
    `${row.flag}: must be a duration in [${formatDuration(row.min)}, ${formatDuration(row.max)}] (${DURATION_GRAMMAR}), got ${JSON.stringify(raw)}`;

  it('absent: its default', () => {
    expect(row.parse(undefined)).toBe(row.absent);
  });

  it('each bound, written in its largest whole unit, as a bare number and in ms, is exactly that bound', () => {
    for (const bound of [row.min, row.max]) {
      for (const raw of [formatDuration(bound), String(bound), `${bound}ms`]) expect(row.parse(raw), raw).toBe(bound);
    }
  });

  it('every unit means the same: ms, s, m, h, fractions rounding to the nearest ms; a bare number is ms', () => {
    const spellings: [string, number][] = [
      ['250', 250],
      ['250ms', 250],
      ['1s', 1000],
      ['1.5s', 1500],
      ['2.0005s', 2001],
      ['1m', 60_000],
      ['0.5m', 30_000],
      ['1h', 3_600_000],
      ['0.25h', 900_000],
      [' 2s ', 2000],
    ];
    for (const [raw, ms] of spellings) {
      if (ms >= row.min && ms <= row.max) expect(row.parse(raw), raw).toBe(ms);
      else expect(refusal(row, raw)).toBe(message(raw));
    }
  });

  it('one ms outside the range, and every malformed value, is refused naming the flag, the range and the grammar', () => {
    const outside = [...(row.min > 0 ? [String(row.min - 1)] : []), `${row.max + 1}ms`];
    for (const raw of [...outside, '2 s', 's', '-1s', '+1s', '1d', '1e3', '1,5s', '', 'NaN', '0x10']) {
      expect(refusal(row, raw), raw).toBe(message(raw));
    }
  });
});

it('the table holds every flag a help text documents as a duration D, and no other', () => {
  const documented = new Set<string>();
  for (const help of [PROXY_HELP, MEMBERS_HELP, TOP_HELP, benchHelp()]) {
    for (const m of help.matchAll(/(--[a-z-]+) D\b/g)) documented.add(m[1]!);
  }
  expect([...documented].sort()).toEqual(ROWS.map((r) => r.flag).sort());
});
