/**
 * A sample value of the Prometheus text format, read as Prometheus reads it:
 * Go's `strconv.ParseFloat(s, 64)` with `p`, `P` and `_` refused ("keep to
 * pre-Go 1.13 float formats", prometheus/model/textparse), so:
 *
 * - decimal: `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`;
 * - `Inf` / `Infinity` with an optional sign and `NaN` without one, in any
 *   letter case;
 * - no hexadecimal (Go needs a `p` exponent for it), no digit separators,
 *   no blanks;
 * - a decimal whose value rounds past the largest float64 is refused (Go's
 *   `ErrRange`); one that rounds to zero is zero.
 *
 * One forward pass over the characters, each looked at once, then one
 * `Number()` of the same text (linear in V8): no backtracking pattern, so a
 * long digit run costs its length and nothing more.
 */

/** Why `raw` is not a value, or undefined when it is one. */
export type FloatRefusal = 'syntax' | 'range';

const PLUS = 43;
const MINUS = 45;
const DOT = 46;
const ZERO = 48;
const NINE = 57;
const LOWER_E = 101;

/** Counts the decimal digits of `s` from `i`; returns the index after them. */
function digitsFrom(s: string, i: number): number {
  let j = i;
  for (; j < s.length; j++) {
    const c = s.charCodeAt(j);
    if (c < ZERO || c > NINE) break;
  }
  return j;
}

/** Whether `s` is a decimal float in Go's grammar (sign, mantissa with at least one digit, optional exponent). */
function isDecimal(s: string): boolean {
  let i = 0;
  const first = s.charCodeAt(0);
  if (first === PLUS || first === MINUS) i = 1;
  const intEnd = digitsFrom(s, i);
  let mantissaDigits = intEnd - i;
  i = intEnd;
  if (s.charCodeAt(i) === DOT) {
    const fracEnd = digitsFrom(s, i + 1);
    mantissaDigits += fracEnd - (i + 1);
    i = fracEnd;
  }
  if (mantissaDigits === 0) return false;
  if (i < s.length && (s.charCodeAt(i) | 0x20) === LOWER_E) {
    i++;
    const sign = s.charCodeAt(i);
    if (sign === PLUS || sign === MINUS) i++;
    const expEnd = digitsFrom(s, i);
    if (expEnd === i) return false;
    i = expEnd;
  }
  return i === s.length;
}

/** The special values: `[+-]?inf`, `[+-]?infinity`, `nan`, in any case; undefined for anything else. */
function special(s: string): number | undefined {
  if (s.length < 3 || s.length > 9) return undefined;
  const lower = s.toLowerCase();
  if (lower === 'nan') return Number.NaN;
  const sign = lower[0] === '-' ? -1 : 1;
  const body = lower[0] === '+' || lower[0] === '-' ? lower.slice(1) : lower;
  return body === 'inf' || body === 'infinity' ? sign * Number.POSITIVE_INFINITY : undefined;
}

/**
 * Reads one sample value: its number, or why it is refused. Linear in the
 * length of `raw`.
 */
export function parseTextFloat(raw: string): number | FloatRefusal {
  const sp = special(raw);
  if (sp !== undefined) return sp;
  if (!isDecimal(raw)) return 'syntax';
  const v = Number(raw);
  return Number.isFinite(v) ? v : 'range';
}
