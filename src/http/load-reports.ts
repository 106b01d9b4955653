/**
 * Backend load reports on responses (ORCA, docs/resilience.md): a backend
 * may answer every request with an `endpoint-load-metrics` header in
 * Envoy's TEXT form,
 *
 *     endpoint-load-metrics: TEXT cpu_utilization=0.3, rps_fractional=10.0, eps=0.1
 *
 * and the dispatcher of whichever thread saw the response records it in
 * the backend's slot (lease.reportLoad → runtime/feedback.ts → load/backend-load.ts), where the
 * owner's periodic A58 computation (`health.orca`, health/orca.ts) reads
 * it beside its own endpoint polls. The header is read in place by the
 * allocation-free scanner (core/load-report.ts); a header that is not a
 * report is ignored and counted — never an error of the caller's request.
 * @internal
 */
import { ReportScan, newLoadReportScan, scanLoadReport } from '../core/load-report.js';
import { PROBE_REPORT_HEADER, newProbeReportScan, scanProbeReport } from '../core/probe-report.js';
import type { Lease } from '../runtime/lease.js';
import type { HttpCounters } from './counters.js';
import type { Headers } from './sink.js';

/** The response header a backend reports its load in (lower case, as undici names parsed headers). */
export const LOAD_REPORT_HEADER = 'endpoint-load-metrics';

/** Counts of one dispatcher's load reports (this thread). */
export interface LoadReportCounts {
  /** Reports recorded in the table. */
  read: number;
  /** Headers ignored: not a report in the documented form. */
  malformed: number;
  /** Reports read but not recorded: another thread was recording the same backend's at that instant. */
  busy: number;
  /** `poise-load` reports (the `probe` policy's) recorded in the probe region. */
  probes: number;
}

/** Feeds one dispatcher's response headers into the table. @internal */
export class ResponseLoadReports {
  /** This dispatcher's counts. */
  readonly counts: LoadReportCounts = { read: 0, malformed: 0, busy: 0, probes: 0 };
  private readonly scan = newLoadReportScan();
  private readonly probeScan = newProbeReportScan();
  private readonly counters: HttpCounters | undefined;

  constructor(counters: HttpCounters | undefined) {
    this.counters = counters;
  }

  /** Parsed headers (undici's new API): the header's last value when repeated. */
  fromHeaders(lease: Lease, headers: Headers): void {
    const p = headers[PROBE_REPORT_HEADER];
    if (typeof p === 'string') this.takeProbe(lease, p);
    const v = headers[LOAD_REPORT_HEADER];
    if (v === undefined) return;
    if (typeof v === 'string') this.take(lease, v);
    else if (v.length > 0) this.take(lease, v[v.length - 1]!);
  }

  /**
   * Raw headers (the older API: a flat [name, value, ...] list of Buffers,
   * names in the case the backend sent). Names are compared in place; the
   * value of the matching one is decoded (latin1, as undici decodes header
   * values) — the one string this path makes, as undici makes it for the
   * parsed form.
   */
  fromRaw(lease: Lease, raw: unknown): void {
    if (!Array.isArray(raw)) return;
    let value: unknown;
    let probe: unknown;
    for (let k = 0; k + 1 < raw.length; k += 2) {
      if (isHeader(raw[k], LOAD_REPORT_HEADER)) value = raw[k + 1];
      else if (isHeader(raw[k], PROBE_REPORT_HEADER)) probe = raw[k + 1];
    }
    if (probe !== undefined) this.takeProbe(lease, Buffer.isBuffer(probe) ? probe.toString('latin1') : String(probe));
    if (value === undefined) return;
    this.take(lease, Buffer.isBuffer(value) ? value.toString('latin1') : String(value));
  }

  /** A `poise-load` report: into the probe region (one that is not a report is ignored). */
  private takeProbe(lease: Lease, text: string): void {
    const s = this.probeScan;
    if (scanProbeReport(text, s) && lease.reportProbe(s.rif, s.latencyUs)) this.counts.probes++;
  }

  private take(lease: Lease, text: string): void {
    const s = this.scan;
    if (scanLoadReport(text, s) !== ReportScan.Ok) {
      this.counts.malformed++;
      this.counters?.loadReport(lease.slot, lease.generation, true);
      return;
    }
    if (lease.reportLoad(s.utilization, s.qps, s.eps)) this.counts.read++;
    else this.counts.busy++;
    this.counters?.loadReport(lease.slot, lease.generation, false);
  }
}

/** Whether a raw header name (Buffer or string) is `h` (lower case), in any case. */
function isHeader(name: unknown, h: string): boolean {
  if (typeof name === 'string') return name.length === h.length && name.toLowerCase() === h;
  if (!Buffer.isBuffer(name) || name.length !== h.length) return false;
  for (let k = 0; k < h.length; k++) {
    const c = name[k]!;
    const want = h.charCodeAt(k);
    // An upper-case ASCII letter is its lower-case one less 0x20; nothing else folds.
    if (c !== want && !(want >= 0x61 && want <= 0x7a && c === want - 0x20)) return false;
  }
  return true;
}
