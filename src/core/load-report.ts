/**
 * The scanner of backend load reports in Envoy's TEXT form (the
 * `endpoint-load-metrics` header, docs/resilience.md):
 *
 *     TEXT cpu_utilization=0.3, rps_fractional=100, eps=2
 *
 * It reads the string it is given in place — no `split`, `trim`, regular
 * expression or substring — and writes its figures into an object the
 * caller keeps, so the HTTP dispatcher can read the header of every
 * response without allocating more than the header string undici made. A
 * report it cannot read leaves a code and the offending range
 * (`errorStart`, `errorEnd`); only the caller that wants a message (the
 * owner's endpoint polls) slices it.
 * @internal
 */

/** What {@link scanLoadReport} writes (a reused object). @internal */
export interface LoadReportScan {
  /** `application_utilization` when above 0, else `cpu_utilization`. */
  utilization: number;
  /** `rps_fractional`: queries per second. */
  qps: number;
  /** `eps`: errors per second. */
  eps: number;
  /** The offending part of a report not read: [errorStart, errorEnd). */
  errorStart: number;
  errorEnd: number;
}

/** Results of {@link scanLoadReport}. @internal */
export const ReportScan = {
  Ok: 0,
  /** A part without `=`, or with nothing before it. */
  NotKeyValue: 1,
  /** A key that is none of the known ones. */
  UnknownKey: 2,
  /** A value that is not a finite decimal number >= 0; the range is the value. */
  BadNumber: 3,
  /** No `rps_fractional`, or no utilization. */
  Missing: 4,
} as const;

/** A fresh scan object (one per reader, reused for every report). @internal */
export function newLoadReportScan(): LoadReportScan {
  return { utilization: 0, qps: 0, eps: 0, errorStart: 0, errorEnd: 0 };
}

const SPACE = 0x20;
const TAB = 0x09;
const COMMA = 0x2c;
const EQUALS = 0x3d;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

function isSpace(c: number): boolean {
  return c === SPACE || c === TAB;
}

/** Whether text[start, end) is exactly `word`. */
function is(text: string, start: number, end: number, word: string): boolean {
  if (end - start !== word.length) return false;
  for (let k = 0; k < word.length; k++) if (text.charCodeAt(start + k) !== word.charCodeAt(k)) return false;
  return true;
}

/** Whether text[start, end) starts with `prefix`. */
function startsWith(text: string, start: number, end: number, prefix: string): boolean {
  return end - start >= prefix.length && is(text, start, start + prefix.length, prefix);
}

function digitsValue(text: string, start: number, end: number): number {
  let v = 0;
  for (let k = start; k < end; k++) v = v * 10 + (text.charCodeAt(k) - ZERO);
  return v;
}

/**
 * text[start, end) as a decimal `digits[.digits][(e|E)[+|-]digits]`, or NaN.
 * The mantissa's digits as one integer divided once by a power of ten, so
 * short decimals read exactly as `Number()` reads them.
 */
export function scanDecimal(text: string, start: number, end: number): number {
  let k = start;
  let mantissa = 0;
  let digits = 0;
  let frac = 0;
  while (k < end) {
    const c = text.charCodeAt(k);
    if (c < ZERO || c > NINE) break;
    mantissa = mantissa * 10 + (c - ZERO);
    digits++;
    k++;
  }
  if (k < end && text.charCodeAt(k) === DOT) {
    k++;
    while (k < end) {
      const c = text.charCodeAt(k);
      if (c < ZERO || c > NINE) break;
      mantissa = mantissa * 10 + (c - ZERO);
      digits++;
      frac++;
      k++;
    }
  }
  if (digits === 0) return Number.NaN;
  let exp = 0;
  if (k < end && (text.charCodeAt(k) | 0x20) === 0x65) {
    k++;
    let sign = 1;
    const s = k < end ? text.charCodeAt(k) : 0;
    if (s === 0x2b || s === 0x2d) {
      sign = s === 0x2d ? -1 : 1;
      k++;
    }
    const from = k;
    while (k < end && text.charCodeAt(k) >= ZERO && text.charCodeAt(k) <= NINE) k++;
    if (k === from || k - from > 3) return Number.NaN;
    exp = sign * digitsValue(text, from, k);
  }
  if (k !== end) return Number.NaN;
  const e = exp - frac;
  const v = e < 0 ? mantissa / 10 ** -e : mantissa * 10 ** e;
  return Number.isFinite(v) ? v : Number.NaN;
}

/**
 * Reads one report (the `TEXT ` prefix optional; parts separated by commas,
 * spaces and tabs around them ignored). Known keys: `cpu_utilization`,
 * `application_utilization`, `rps_fractional`, `eps`; `mem_utilization` and
 * `named_metrics.*` are read and unused. Returns a {@link ReportScan} code;
 * on `Ok` the figures are in `out`. Allocates nothing. @internal
 */
export function scanLoadReport(text: string, out: LoadReportScan): number {
  const n = text.length;
  let i = 0;
  while (i < n && isSpace(text.charCodeAt(i))) i++;
  if (startsWith(text, i, n, 'TEXT') && i + 4 < n && isSpace(text.charCodeAt(i + 4))) i += 5;
  let cpu = 0;
  let app = 0;
  let qps = -1;
  let eps = 0;
  let hasUtil = false;
  while (i <= n) {
    let end = i;
    while (end < n && text.charCodeAt(end) !== COMMA) end++;
    const next = end + 1;
    let s = i;
    while (s < end && isSpace(text.charCodeAt(s))) s++;
    let e = end;
    while (e > s && isSpace(text.charCodeAt(e - 1))) e--;
    i = next;
    if (s === e) continue;
    let eq = s;
    while (eq < e && text.charCodeAt(eq) !== EQUALS) eq++;
    if (eq === e || eq === s) return fail(out, ReportScan.NotKeyValue, s, e);
    let ke = eq;
    while (ke > s && isSpace(text.charCodeAt(ke - 1))) ke--;
    let vs = eq + 1;
    while (vs < e && isSpace(text.charCodeAt(vs))) vs++;
    const value = scanDecimal(text, vs, e);
    if (Number.isNaN(value)) return fail(out, ReportScan.BadNumber, s, e);
    if (is(text, s, ke, 'cpu_utilization')) {
      cpu = value;
      hasUtil = true;
    } else if (is(text, s, ke, 'application_utilization')) {
      app = value;
      hasUtil = true;
    } else if (is(text, s, ke, 'rps_fractional')) qps = value;
    else if (is(text, s, ke, 'eps')) eps = value;
    else if (!is(text, s, ke, 'mem_utilization') && !startsWith(text, s, ke, 'named_metrics.'))
      return fail(out, ReportScan.UnknownKey, s, ke);
  }
  if (qps < 0 || !hasUtil) return fail(out, ReportScan.Missing, 0, n);
  out.utilization = app > 0 ? app : cpu;
  out.qps = qps;
  out.eps = eps;
  return ReportScan.Ok;
}

function fail(out: LoadReportScan, code: number, start: number, end: number): number {
  out.errorStart = start;
  out.errorEnd = end;
  return code;
}
