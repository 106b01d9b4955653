/**
 * `balancer.ready()`'s wait: until a membership is in force and every
 * backend in it has its first verdict from each health source configured
 * (load/verdicts.ts), or a deadline, or the Balancer's close. It looks
 * again at every move of the change epoch (each verdict settled and each
 * membership bumps it), so it neither polls nor misses a settle.
 */
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import { integerIn } from '../core/validate.js';
import type { Epochs } from '../load/epochs.js';

/** Options of {@link Balancer.ready}. */
export interface ReadyOptions {
  /** Longest wait, ms; default 10 000. Then it rejects with `NotReady`, naming what is still missing. */
  timeoutMs?: number;
  /** The clock and timers of the deadline; default the process's (tests drive it by hand). */
  timers?: TimerSource;
}

/** What the wait reads of its Balancer. */
export interface ReadySubject {
  epochs: Epochs;
  closed(): boolean;
  /** What is still missing: empty when ready (a membership applied, every first verdict in), else each item named. */
  missing(): string[];
}

/** The wait of `balancer.ready(opts)` (see there); rejects with `InvalidConfig`, `NotReady` or `Closed`. @internal */
export function waitForVerdicts(opts: ReadyOptions, subject: ReadySubject): Promise<void> {
  let timers: TimerSource;
  let timeoutMs: number;
  try {
    if (typeof opts !== 'object' || opts === null) invalidConfig('ready(options)', 'must be an object', opts);
    checkOptionKeys(opts, ['timeoutMs', 'timers'], 'ready(options)');
    timers = timersOption(opts.timers, 'ready(options).timers');
    timeoutMs = opts.timeoutMs === undefined ? 10_000 : integerIn(opts.timeoutMs, 'ready(options).timeoutMs', 1, 2 ** 31 - 1);
  } catch (err) {
    return Promise.reject(err);
  }
  const { epochs } = subject;
  return new Promise<void>((resolve, reject) => {
    let done = false;
    const finish = (err?: PoiseError): void => {
      done = true;
      timers.clearTimeout(deadline);
      if (err === undefined) resolve();
      else reject(err);
    };
    const deadline = timers.setTimeout(() => {
      if (done) return;
      finish(
        new PoiseError('NotReady', `balancer.ready: after ${timeoutMs} ms still without a first verdict: ${subject.missing().join(', ')}`, {
          field: 'ready',
        }),
      );
    }, timeoutMs);
    const look = (): void => {
      if (done) return;
      if (subject.closed()) {
        finish(new PoiseError('Closed', 'balancer.ready: the balancer was closed'));
        return;
      }
      // The epoch first: a verdict settled after this read moves it, so the wait below returns at once.
      const seen = epochs.change();
      if (subject.missing().length === 0) {
        finish();
        return;
      }
      // Every settle and every membership bumps the change epoch (and notifies); the 1 s cap only
      // bounds how long a wait outlives a deadline or a close.
      void epochs.changedAsync(seen, 1000).then(look);
    };
    look();
  });
}
