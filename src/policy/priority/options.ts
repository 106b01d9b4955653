/**
 * Options of the priority and locality policies, and their validation.
 * Shared by the per-decision and the prepared forms.
 */
import { checkOptionKeys, invalidConfig } from '../../core/errors.js';
import type { Policy, SeedOptions } from '../types.js';
/** What use-all panic does when traffic lands on a panicking priority. */
export type PanicMode = 'useAll' | 'failClosed';

/**
 * How priority shares are computed.
 * - `'millionths'` (default): weighted availability in integer millionths.
 * - `'envoy'`: Envoy's integer-percent priority load and panic, from host counts.
 */
export type PriorityArithmetic = 'millionths' | 'envoy';

/** Options of `PriorityWeightedRandom`, `LocalityWeightedRandom` and their prepared forms. */
export interface PriorityOptions extends SeedOptions {
  /** Integer percent in [100, 100000]; default 140 (a priority stays full down to 5/7 available). */
  overprovisioningFactorPercent?: number;
  /** Integer percent in [0, 100]; default 50; 0 disables panic. A priority panics when strictly below it. */
  panicThresholdPercent?: number;
  /** Default `'useAll'`. `'failClosed'` throws `PanicRejected` instead of reviving members. */
  panicMode?: PanicMode;
  /** Default `'millionths'`; `'envoy'` reproduces Envoy's priority load and panic computation. */
  arithmetic?: PriorityArithmetic;
  /**
   * Prepared form only (`prepared: true`): the policy that chooses inside the chosen priority
   * (and locality), instead of weighted random. Called once per endpoint
   * group — `group` counts the instances made (0 first) — and each instance
   * is kept for its (priority, locality) across prepares. Default: weighted
   * random by `Candidate.weight`, with exactly the decisions of the policy
   * without this option.
   *
   * @example
   * const policy = new PriorityWeightedRandom({ prepared: true, within: () => new PowerOfTwo() });
   */
  within?: (group: number) => Policy;
  /**
   * With `within`: take the priority and locality draws from the hash of
   * `context.key` when a pick has one (for keyed policies: a key stays on
   * its priority and locality unless their shares move). Default false.
   */
  stickyKeys?: boolean;
  /**
   * Default false: plan on every decision. True: plan once per snapshot (a
   * new array or length, or `prepare()`), then expected-O(1) picks through
   * prepared tables; the same index sequence for the same snapshot and seed
   * (docs/priority.md, "Prepared vs per-decision").
   */
  prepared?: boolean;
}

/** Validated options, every field present. */
export interface ResolvedPriorityOptions {
  readonly overprovisioningFactorPercent: number;
  readonly panicThresholdPercent: number;
  readonly panicMode: PanicMode;
  readonly arithmetic: PriorityArithmetic;
}

/** The largest accepted overprovisioning factor, in percent. @internal */
export const MAX_OVERPROVISIONING_PERCENT = 100_000;

function integerIn(value: unknown, min: number, max: number, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    invalidConfig(`options.${field}`, `must be an integer in [${min}, ${max}]`, value);
  }
  return value;
}

/**
 * Validates options, filling defaults; throws `InvalidConfig` naming the
 * option (`options.overprovisioningFactorPercent: must be an integer in
 * [100, 100000], got 99`).
 * @internal
 */
export function resolvePriorityOptions(options: PriorityOptions = {}): ResolvedPriorityOptions {
  checkOptionKeys(options, [
    'overprovisioningFactorPercent',
    'panicThresholdPercent',
    'panicMode',
    'arithmetic',
    'prepared',
    'seed',
    'within',
    'stickyKeys',
  ]);
  if (options.prepared !== undefined && typeof options.prepared !== 'boolean') {
    invalidConfig('options.prepared', 'must be a boolean', options.prepared);
  }
  if (options.within !== undefined && typeof options.within !== 'function') {
    invalidConfig('options.within', 'must be a function returning a policy', options.within);
  }
  if (options.stickyKeys !== undefined && typeof options.stickyKeys !== 'boolean') {
    invalidConfig('options.stickyKeys', 'must be a boolean', options.stickyKeys);
  }
  const overprovisioningFactorPercent = integerIn(
    options.overprovisioningFactorPercent ?? 140,
    100,
    MAX_OVERPROVISIONING_PERCENT,
    'overprovisioningFactorPercent',
  );
  const panicThresholdPercent = integerIn(options.panicThresholdPercent ?? 50, 0, 100, 'panicThresholdPercent');
  const panicMode = options.panicMode ?? 'useAll';
  if (panicMode !== 'useAll' && panicMode !== 'failClosed') {
    invalidConfig('options.panicMode', "must be 'useAll' or 'failClosed'", panicMode);
  }
  const arithmetic = options.arithmetic ?? 'millionths';
  if (arithmetic !== 'millionths' && arithmetic !== 'envoy') {
    invalidConfig('options.arithmetic', "must be 'millionths' or 'envoy'", arithmetic);
  }
  return { overprovisioningFactorPercent, panicThresholdPercent, panicMode, arithmetic };
}
