/**
 * A timer source: the clock and the timers a component runs its timeouts on,
 * injected so that a test can drive time by hand (tower's paused clock is
 * the model: `time::pause(); time::advance(..)`). Components take one in
 * their options and default to {@link realTimers}.
 */
import { invalidConfig } from './errors.js';

/** What a component needs of time: milliseconds now, and one-shot timers on that clock. */
export interface TimerSource {
  /** Milliseconds on this source's clock (any origin; only differences matter). */
  now(): number;
  /** Runs `fn` once, `ms` milliseconds from now on this clock; returns a handle for {@link clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer that has not run (a handle that ran or was cleared is ignored). */
  clearTimeout(handle: unknown): void;
}

/** The process's own clock (`performance.now`) and timers (`setTimeout`: a pending one keeps the process alive, as a waiting request should). */
export const realTimers: TimerSource = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** The process's clock and timers, unref'd: a pending one never keeps the process alive (the owner's health pollers: a check never does). */
export const backgroundTimers: TimerSource = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** Checks a `timers` option: `InvalidConfig`-style message text when it is not a TimerSource, else undefined. @internal */
export function timerSourceProblem(t: unknown): string | undefined {
  if (typeof t !== 'object' || t === null) return 'must be a TimerSource ({ now, setTimeout, clearTimeout })';
  const o = t as Record<string, unknown>;
  for (const k of ['now', 'setTimeout', 'clearTimeout']) if (typeof o[k] !== 'function') return `must have a function ${k}`;
  return undefined;
}

/** The `timers` option: `realTimers` when absent, else the TimerSource given (`InvalidConfig` naming `field` otherwise). @internal */
export function timersOption(t: unknown, field = 'options.timers'): TimerSource {
  if (t === undefined) return realTimers;
  const problem = timerSourceProblem(t);
  if (problem !== undefined) invalidConfig(field, problem, t);
  return t as TimerSource;
}
