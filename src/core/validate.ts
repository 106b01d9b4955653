/**
 * The one place for the numeric option rules every component shares: "an
 * integer in [min, max]", "a finite number > 0", ... Each check returns the
 * value when it holds and otherwise throws `InvalidConfig` naming the field
 * and the reason, in the words every caller used before this file existed:
 *
 *   options.port: must be an integer in [0, 65535], got 70000
 *   options.capacity: must be an integer >= 1, got 0
 *   options.tauMs: must be a finite number > 0 (milliseconds), got NaN
 *
 * `note` is appended in parentheses (a unit, or what a special value means).
 * @internal
 */
import { invalidConfig } from './errors.js';

function withNote(reason: string, note: string | undefined): string {
  return note === undefined ? reason : `${reason} (${note})`;
}

/** True when `value` is a safe integer in [min, max]. @internal */
export function isIntegerIn(value: unknown, min: number, max: number = Number.MAX_SAFE_INTEGER): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
}

/**
 * `value` when it is a safe integer in [min, max]; else `InvalidConfig`
 * naming `field`. Without `max` the bound is 2^53 − 1 and the message says
 * `must be an integer >= min`.
 *
 * @example
 * const port = integerIn(opts.port ?? 0, 'options.port', 0, 65535);
 * @internal
 */
export function integerIn(value: unknown, field: string, min: number, max?: number, note?: string): number {
  if (!isIntegerIn(value, min, max)) {
    invalidConfig(
      field,
      withNote(max === undefined ? `must be an integer >= ${min}` : `must be an integer in [${min}, ${max}]`, note),
      value,
    );
  }
  return value;
}

/** `value` when it is a finite number in [min, max]; else `InvalidConfig` naming `field`. @internal */
export function numberIn(value: unknown, field: string, min: number, max: number, note?: string): number {
  if (typeof value !== 'number' || !(value >= min && value <= max)) {
    invalidConfig(field, withNote(`must be a number in [${min}, ${max}]`, note), value);
  }
  return value;
}

/** `value` when it is a finite number; else `InvalidConfig` naming `field`. @internal */
export function finiteNumber(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) invalidConfig(field, 'must be a finite number', value);
  return value;
}

/** `value` when it is a finite number > 0; else `InvalidConfig` naming `field`. @internal */
export function positiveNumber(value: unknown, field: string, note?: string): number {
  if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value))
    invalidConfig(field, withNote('must be a finite number > 0', note), value);
  return value;
}

/** `value` when it is a finite number >= 0; else `InvalidConfig` naming `field`. @internal */
export function nonNegativeNumber(value: unknown, field: string, note?: string): number {
  if (typeof value !== 'number' || !(value >= 0) || !Number.isFinite(value))
    invalidConfig(field, withNote('must be a finite number >= 0', note), value);
  return value;
}

/** An HTTP request path: "/" then printable ASCII without spaces, at most 1,024 characters (`InvalidConfig` naming `field`). @internal */
export function requestPath(value: unknown, field: string): string {
  if (typeof value !== 'string' || !/^\/[\x21-\x7e]*$/.test(value) || value.length > 1024)
    invalidConfig(field, 'must be a path starting with "/" (printable ASCII, no spaces)', value);
  return value;
}
