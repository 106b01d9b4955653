/**
 * The binary ORCA load report a gRPC backend sends in the
 * `endpoint-load-metrics-bin` trailer (protobuf `xds.data.orca.v3.OrcaLoadReport`),
 * read by hand: only the fields that feed the slot's backend-load words
 * (the same ones the HTTP `endpoint-load-metrics` header feeds,
 * http/load-reports.ts):
 *
 *     double cpu_utilization = 1;          (fixed64, tag 0x09)
 *     double rps_fractional = 6;           (fixed64, tag 0x31)
 *     double eps = 7;                      (fixed64, tag 0x39)
 *     double application_utilization = 9;  (fixed64, tag 0x49)
 *
 * Every other field (mem_utilization, the deprecated integer rps, the maps
 * request_cost, utilization, named_metrics) is skipped by its wire type. In
 * proto3 a field at 0 is not sent, so a missing one reads as 0. The decoder
 * reads the bytes in place and writes into an object the caller keeps:
 * nothing is allocated per report.
 * @internal
 */

/** What {@link decodeOrcaReport} writes (a reused object). @internal */
export interface OrcaFigures {
  /** `application_utilization` when above 0, else `cpu_utilization` (as the TEXT form is read). */
  utilization: number;
  /** `rps_fractional`. */
  qps: number;
  /** `eps`. */
  eps: number;
}

/** A fresh figures object (one per reader). @internal */
export function newOrcaFigures(): OrcaFigures {
  return { utilization: 0, qps: 0, eps: 0 };
}

/** Results of {@link decodeOrcaReport}. @internal */
export const OrcaDecode = {
  Ok: 0,
  /** The bytes end inside a field, or a field has a wire type protobuf does not have (or a group). */
  Truncated: 1,
  /** A figure is negative, NaN or infinite. */
  BadNumber: 2,
} as const;

/** Eight bytes and their view as a little-endian double: one per thread, reused by every report. */
const SCRATCH = new Uint8Array(8);
const SCRATCH_VIEW = new DataView(SCRATCH.buffer);

function float64At(bytes: Uint8Array, at: number): number {
  for (let k = 0; k < 8; k++) SCRATCH[k] = bytes[at + k]!;
  return SCRATCH_VIEW.getFloat64(0, true);
}

/**
 * Decodes one report; returns an {@link OrcaDecode} code, the figures in
 * `out` on `Ok`. The doubles are read through a scratch view (no view per report).
 */
export function decodeOrcaReport(bytes: Uint8Array, out: OrcaFigures): number {
  const n = bytes.length;
  let cpu = 0;
  let app = 0;
  let qps = 0;
  let eps = 0;
  let i = 0;
  while (i < n) {
    // The key: a varint (field number << 3 | wire type); our fields' keys fit in one byte.
    let key = 0;
    let shift = 0;
    for (;;) {
      if (i >= n || shift > 28) return OrcaDecode.Truncated;
      const b = bytes[i++]!;
      key |= (b & 0x7f) << shift;
      if (b < 0x80) break;
      shift += 7;
    }
    const wire = key & 7;
    const field = key >>> 3;
    if (wire === 1) {
      if (i + 8 > n) return OrcaDecode.Truncated;
      const v = float64At(bytes, i);
      i += 8;
      if (field === 1 || field === 6 || field === 7 || field === 9) {
        if (!(v >= 0) || v === Number.POSITIVE_INFINITY) return OrcaDecode.BadNumber;
        if (field === 1) cpu = v;
        else if (field === 6) qps = v;
        else if (field === 7) eps = v;
        else app = v;
      }
    } else if (wire === 0) {
      // A varint (the deprecated integer rps): skipped.
      for (;;) {
        if (i >= n) return OrcaDecode.Truncated;
        if (bytes[i++]! < 0x80) break;
      }
    } else if (wire === 2) {
      // Length-delimited (a map entry): its length, then skipped.
      let len = 0;
      let s = 0;
      for (;;) {
        if (i >= n || s > 28) return OrcaDecode.Truncated;
        const b = bytes[i++]!;
        len += (b & 0x7f) * 2 ** s;
        if (b < 0x80) break;
        s += 7;
      }
      if (i + len > n) return OrcaDecode.Truncated;
      i += len;
    } else if (wire === 5) {
      if (i + 4 > n) return OrcaDecode.Truncated;
      i += 4;
    } else {
      return OrcaDecode.Truncated;
    }
  }
  out.utilization = app > 0 ? app : cpu;
  out.qps = qps;
  out.eps = eps;
  return OrcaDecode.Ok;
}
