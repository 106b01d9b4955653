/**
 * The probe report: what a backend says about itself for the `probe`
 * policy, in one header (and a probe answer's body), the
 * `endpoint-load-metrics` style of `key=value` parts:
 *
 *     poise-load: rif=3, latency_us=1200
 *
 * `rif` is the requests in flight at the backend, `latency_us` its latency
 * estimate in whole microseconds. A header of its own rather than extra keys
 * in `endpoint-load-metrics`: ORCA readers (Envoy's, poise's own scanner)
 * refuse unknown keys, so mixing them would turn a backend's ORCA reports
 * malformed. Written by `poise-lb/probe-server`, read in place by the owner's
 * prober and any thread's HTTP dispatcher without allocating. @internal
 */

/** The header name (lower case, as Node and undici name parsed headers). @internal */
export const PROBE_REPORT_HEADER = 'poise-load';

/** What {@link scanProbeReport} writes (a reused object). @internal */
export interface ProbeReportScan {
  /** Requests in flight. */
  rif: number;
  /** Latency estimate, µs. */
  latencyUs: number;
}

/** A fresh scan object. @internal */
export function newProbeReportScan(): ProbeReportScan {
  return { rif: 0, latencyUs: 0 };
}

/** The report text of `rif` requests in flight and a latency of `latencyUs`. @internal */
export function formatProbeReport(rif: number, latencyUs: number): string {
  return `rif=${rif}, latency_us=${Math.round(latencyUs)}`;
}

const RIF = 'rif';
const LATENCY = 'latency_us';

/**
 * Reads a report in place into `out`: parts `key=digits` separated by
 * commas (spaces around them ignored), both keys required, other keys
 * ignored (a later version may add some). False for anything else.
 * Allocates nothing. @internal
 */
export function scanProbeReport(text: string, out: ProbeReportScan): boolean {
  let seen = 0;
  let k = 0;
  const n = text.length;
  while (k < n) {
    while (k < n && (text.charCodeAt(k) === 0x20 || text.charCodeAt(k) === 0x2c)) k++;
    if (k >= n) break;
    const keyStart = k;
    while (k < n && text.charCodeAt(k) !== 0x3d && text.charCodeAt(k) !== 0x2c) k++;
    if (k >= n || text.charCodeAt(k) !== 0x3d) return false;
    let keyEnd = k;
    while (keyEnd > keyStart && text.charCodeAt(keyEnd - 1) === 0x20) keyEnd--;
    k++;
    const key = keyIs(text, keyStart, keyEnd, RIF) ? 1 : keyIs(text, keyStart, keyEnd, LATENCY) ? 2 : 0;
    if (key === 0) {
      // Another key: its value is skipped, whatever it is.
      while (k < n && text.charCodeAt(k) !== 0x2c) k++;
      continue;
    }
    while (k < n && text.charCodeAt(k) === 0x20) k++;
    let v = 0;
    let digits = 0;
    while (k < n) {
      const c = text.charCodeAt(k);
      if (c < 0x30 || c > 0x39) break;
      v = v * 10 + (c - 0x30);
      digits++;
      k++;
    }
    while (k < n && text.charCodeAt(k) === 0x20) k++;
    if (k < n && text.charCodeAt(k) !== 0x2c) return false;
    if (digits === 0 || digits > 15) return false;
    if (key === 1) out.rif = v;
    else out.latencyUs = v;
    seen |= key;
  }
  return seen === 3;
}

function keyIs(text: string, start: number, end: number, word: string): boolean {
  if (end - start !== word.length) return false;
  for (let k = 0; k < word.length; k++) if (text.charCodeAt(start + k) !== word.charCodeAt(k)) return false;
  return true;
}
