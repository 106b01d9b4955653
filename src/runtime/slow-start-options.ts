/**
 * Slow start's options (a Balancer's `slowStart`, a membership document's)
 * and their validation into the table's configuration (load/slow-start.ts).
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn, numberIn } from '../core/validate.js';
import type { SlowStartConfig } from '../load/slow-start.js';

/** Options of slow start (a Balancer's `slowStart`, a membership document's). */
export interface SlowStartOptions {
  /** The ramp, ms: an integer in [1, 3600000]. */
  windowMs: number;
  /** The curve's aggression, in [0.001, 1000]; 1 (default) is linear, more ramps faster at first. */
  aggression?: number;
  /** The factor's floor, percent in [0, 100]; default 10 (Envoy's). */
  minWeightPercent?: number;
}

/** Validates slow-start options (`field` names them) into the table's configuration; undefined or `false` is off. @internal */
export function resolveSlowStart(value: unknown, field: string): SlowStartConfig | undefined {
  if (value === undefined || value === false) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalidConfig(field, 'must be an object or false', value);
  const o = value as SlowStartOptions;
  checkOptionKeys(o, ['windowMs', 'aggression', 'minWeightPercent'], field);
  const windowMs = integerIn(o.windowMs, `${field}.windowMs`, 1, 3_600_000);
  const aggression = numberIn(o.aggression ?? 1, `${field}.aggression`, 0.001, 1000);
  const minPercent = numberIn(o.minWeightPercent ?? 10, `${field}.minWeightPercent`, 0, 100);
  return { windowMs, aggressionMilli: Math.round(aggression * 1000), minMilli: Math.round(minPercent * 10) };
}
