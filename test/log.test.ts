import { describe, expect, it } from 'vitest';
import { DEFAULT_LOG_LEVEL, LOG_LEVELS, createLogger, rateLimited } from '../src/log.js';
import { captureLog } from './helpers/log-capture.js';
import { thrown } from './helpers/thrown.js';

/** A hand-driven scheduler: `fire()` runs what is due, as the end of a window would. */
function manualSchedule() {
  const pending: { fn: () => void; ms: number; cancelled: boolean }[] = [];
  return {
    schedule: (fn: () => void, ms: number) => {
      const entry = { fn, ms, cancelled: false };
      pending.push(entry);
      return () => {
        entry.cancelled = true;
      };
    },
    fire(): void {
      for (const e of pending.splice(0)) if (!e.cancelled) e.fn();
    },
    get waiting(): number[] {
      return pending.filter((e) => !e.cancelled).map((e) => e.ms);
    },
  };
}

describe('rateLimited', () => {
  it('logs the first of identical (message, key) warnings, counts the repeats and logs the count when the window ends', () => {
    const log = captureLog('info');
    const clock = manualSchedule();
    const limited = rateLimited(log.logger, { windowMs: 1000, schedule: clock.schedule });
    for (let i = 0; i < 5; i++) limited.warn('bad json', { err: 'bad json', i }, 'notice rejected');
    limited.warn('negative weight', { err: 'negative weight' }, 'notice rejected'); // another key: its own line
    limited.error('bad json', { err: 'bad json' }, 'notice rejected'); // another level: its own line
    expect(log.records.map((r) => [r['level'], r['err'], r['i'], r['repeated']])).toEqual([
      [40, 'bad json', 0, undefined],
      [40, 'negative weight', undefined, undefined],
      [50, 'bad json', undefined, undefined],
    ]);
    expect(clock.waiting).toEqual([1000, 1000, 1000]);
    clock.fire(); // the windows end
    // One summary, for the only window that suppressed anything: the last occurrence's fields and the count.
    expect(log.records.slice(3).map((r) => [r['level'], r['msg'], r['err'], r['i'], r['repeated'], r['windowMs']])).toEqual([
      [40, 'notice rejected', 'bad json', 4, 4, 1000],
    ]);
    // After the window, the next occurrence is logged at once again.
    limited.warn('bad json', { err: 'bad json', i: 9 }, 'notice rejected');
    expect(log.records.at(-1)).toMatchObject({ i: 9 });
    expect(log.records.at(-1)!['repeated']).toBeUndefined();
  });

  it('flush() logs pending counts now and cancels the timers', () => {
    const log = captureLog('info');
    const clock = manualSchedule();
    const limited = rateLimited(log.logger, { windowMs: 60_000, schedule: clock.schedule });
    limited.warn('k', {}, 'm');
    limited.warn('k', {}, 'm');
    limited.flush();
    expect(log.records.map((r) => r['repeated'])).toEqual([undefined, 1]);
    expect(clock.waiting).toEqual([]);
    clock.fire();
    expect(log.records).toHaveLength(2);
  });

  it('refuses a bad window naming the option', () => {
    expect(() => rateLimited(captureLog().logger, { windowMs: 0 })).toThrow('options.windowMs: must be an integer >= 1, got 0');
  });
});

describe('createLogger', () => {
  it('refuses a level pino does not know with InvalidConfig naming where it came from', () => {
    const err = thrown(() => createLogger({ level: 'loud' }));
    expect(err.code).toBe('InvalidConfig');
    expect(err.message).toBe(`level: must be one of ${LOG_LEVELS.join(', ')}, got "loud"`);
    for (const level of LOG_LEVELS) expect(createLogger({ level }).level).toBe(level);
  });
});

describe('the default level', () => {
  /** Runs `fn` with POISE_LOG_LEVEL set to `value` (removed when undefined), then restores it. */
  function withEnv<T>(value: string | undefined, fn: () => T): T {
    const saved = process.env['POISE_LOG_LEVEL'];
    if (value === undefined) delete process.env['POISE_LOG_LEVEL'];
    else process.env['POISE_LOG_LEVEL'] = value;
    try {
      return fn();
    } finally {
      if (saved === undefined) delete process.env['POISE_LOG_LEVEL'];
      else process.env['POISE_LOG_LEVEL'] = saved;
    }
  }

  it('is warn without POISE_LOG_LEVEL; POISE_LOG_LEVEL overrides it; an explicit level overrides both', () => {
    expect(DEFAULT_LOG_LEVEL).toBe('warn');
    expect(withEnv(undefined, () => createLogger().level)).toBe('warn');
    expect(withEnv('debug', () => createLogger().level)).toBe('debug');
    expect(withEnv('debug', () => createLogger({ level: 'error' }).level)).toBe('error');
  });

  it('a bad POISE_LOG_LEVEL is InvalidConfig naming the variable', () => {
    expect(() => withEnv('loud', () => createLogger())).toThrow(`POISE_LOG_LEVEL: must be one of ${LOG_LEVELS.join(', ')}, got "loud"`);
  });
});
