/**
 * The AdmissionGate's options, checked all at once: {@link readGateOptions}
 * runs every check and throws one `InvalidConfig` naming every bad option,
 * then gives the gate its bands, most important first, with their ceilings
 * (explicit, or from the holdback curve of holdback.ts).
 */
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { timerSourceProblem, type TimerSource } from '../core/timers.js';
import { finiteNumber, integerIn, positiveNumber } from '../core/validate.js';
import type { LeaseKindName } from '../runtime/acquire-options.js';
import { holdbackCeilings, type HoldbackOptions } from './holdback.js';

/** What the gate counts as load. */
export type AdmissionLoadKind = LeaseKindName | 'outstanding';

/** Options of {@link AdmissionGate}. */
export interface AdmissionGateOptions extends Partial<HoldbackOptions> {
  /** The admission bands, each a rank, any order; a larger rank is more important. */
  bands: readonly number[];
  /**
   * Explicit ceilings in [0, 1], `ceilings[i]` for `bands[i]`, instead
   * of the holdback options (`minCeiling`, `maxCeiling`, `shape`, `domain`).
   * A more important band may not have a lower ceiling. All equal = a single
   * static ceiling.
   */
  ceilings?: readonly number[];
  /** Capacity at saturation 1, an integer ≥ 1; default Σ `maxInflight` of the eligible backends. */
  capacity?: number;
  /** Custom saturation (0 idle, ≥ 1 full) replacing load / capacity; a non-number or NaN reads as 1. */
  saturation?: () => number;
  /** The lease counter that is the load; default the router's lease kind. */
  kind?: AdmissionLoadKind;
  /** Waiters per band (in this gate) before `QueueFull`; default 1024. */
  maxQueue?: number;
  /** Longest wait in a queue, ms, before `QueueTimeout`; default 60 000 (per-request `timeoutMs` overrides it). */
  timeoutMs?: number;
  /** Longest wait for a wake-up while something waits (the fallback re-check; releases wake the gates at once), ms; default 20. */
  pollMs?: number;
  /** The band of a request that names none (one of `bands`); default the most important one. */
  defaultBand?: number;
  /** Milliseconds for the wait statistics; default the timer source's clock. */
  clock?: () => number;
  /**
   * The clock and timers queue timeouts run on; default the process's
   * (`realTimers`). Inject a paused clock to drive timeouts by hand in tests.
   */
  timers?: TimerSource;
}

const OPTION_KEYS = [
  'bands',
  'ceilings',
  'shape',
  'domain',
  'minCeiling',
  'maxCeiling',
  'capacity',
  'saturation',
  'kind',
  'maxQueue',
  'timeoutMs',
  'pollMs',
  'defaultBand',
  'clock',
  'timers',
];

/** Runs every check, then throws one `InvalidConfig` naming every bad option. */
function collect(checks: (() => void)[]): void {
  const bad: PoiseError[] = [];
  for (const check of checks) {
    try {
      check();
    } catch (err) {
      if (err instanceof PoiseError && err.code === 'InvalidConfig') bad.push(err);
      else throw err;
    }
  }
  if (bad.length === 1) throw bad[0];
  if (bad.length > 1) {
    throw new PoiseError('InvalidConfig', `${bad.length} bad options: ${bad.map((e) => e.message).join('; ')}`, {
      field: bad.map((e) => e.field).join(', '),
    });
  }
}

/** The bands of valid options: their ranks, most important first, and each one's ceiling. @internal */
export interface GateBands {
  readonly sorted: readonly number[];
  readonly ceilings: readonly number[];
}

/**
 * Checks `opts` (every option, then one `InvalidConfig` naming every bad
 * one) and returns its bands. One piece (about 85 lines, most of them the
 * list of checks): `collect` runs every check before it throws, so they
 * share one list.
 * @internal
 */
export function readGateOptions(opts: AdmissionGateOptions): GateBands {
  if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
  const o = opts;
  let sorted: number[] = [];
  let ceilings: number[] = [];
  collect([
    () => checkOptionKeys(o, OPTION_KEYS),
    () => {
      if (!Array.isArray(o.bands) || o.bands.length === 0) {
        invalidConfig('options.bands', 'must be a non-empty array of band ranks (numbers)', o.bands);
      }
      for (let i = 0; i < o.bands.length; i++) finiteNumber(o.bands[i], `options.bands[${i}]`);
      sorted = [...o.bands].sort((a, b) => b - a);
      for (let i = 1; i < sorted.length; i++)
        if (sorted[i] === sorted[i - 1]) invalidConfig('options.bands', `must not repeat ${sorted[i]}`);
    },
    () => {
      if (o.ceilings === undefined) {
        if (sorted.length > 0)
          ceilings = holdbackCeilings(sorted, {
            shape: o.shape,
            domain: o.domain,
            minCeiling: o.minCeiling as number,
            maxCeiling: o.maxCeiling,
          });
        return;
      }
      if (o.minCeiling !== undefined || o.maxCeiling !== undefined || o.shape !== undefined || o.domain !== undefined) {
        invalidConfig('options.ceilings', 'excludes minCeiling, maxCeiling, shape and domain (give one or the other)');
      }
      if (!Array.isArray(o.ceilings) || o.ceilings.length !== o.bands?.length) {
        invalidConfig('options.ceilings', `must be an array of ${o.bands?.length ?? 0} numbers in [0, 1], one per band`, o.ceilings);
      }
      const by = new Map<number, number>();
      for (let i = 0; i < o.ceilings.length; i++) {
        const c = o.ceilings[i];
        if (typeof c !== 'number' || !(c >= 0 && c <= 1)) invalidConfig(`options.ceilings[${i}]`, 'must be a number in [0, 1]', c);
        by.set(o.bands[i]!, c);
      }
      ceilings = sorted.map((p) => by.get(p)!);
      for (let i = 1; i < ceilings.length; i++) {
        if (ceilings[i]! > ceilings[i - 1]!) {
          invalidConfig(
            'options.ceilings',
            `band ${sorted[i]} has a higher ceiling (${ceilings[i]}) than the more important ${sorted[i - 1]} (${ceilings[i - 1]})`,
          );
        }
      }
    },
    () => {
      if (o.capacity !== undefined) integerIn(o.capacity, 'options.capacity', 1);
    },
    () => {
      if (o.saturation !== undefined && typeof o.saturation !== 'function')
        invalidConfig('options.saturation', 'must be a function returning a number', o.saturation);
      if (o.saturation !== undefined && o.capacity !== undefined)
        invalidConfig('options.saturation', 'excludes options.capacity (give one or the other)');
    },
    () => {
      if (o.kind !== undefined && o.kind !== 'request' && o.kind !== 'connection' && o.kind !== 'outstanding') {
        invalidConfig('options.kind', 'must be "request", "connection" or "outstanding"', o.kind);
      }
    },
    () => {
      if (o.maxQueue !== undefined) integerIn(o.maxQueue, 'options.maxQueue', 0);
    },
    () => {
      if (o.timeoutMs !== undefined) positiveNumber(o.timeoutMs, 'options.timeoutMs');
    },
    () => {
      if (o.pollMs !== undefined) positiveNumber(o.pollMs, 'options.pollMs');
    },
    () => {
      if (o.defaultBand !== undefined && !o.bands?.includes?.(o.defaultBand)) {
        invalidConfig('options.defaultBand', 'must be one of options.bands', o.defaultBand);
      }
    },
    () => {
      if (o.clock !== undefined && typeof o.clock !== 'function')
        invalidConfig('options.clock', 'must be a function returning milliseconds', o.clock);
    },
    () => {
      const problem = o.timers === undefined ? undefined : timerSourceProblem(o.timers);
      if (problem !== undefined) invalidConfig('options.timers', problem, o.timers);
    },
  ]);
  return { sorted, ceilings };
}
