/**
 * The binary ORCA report decoder (src/grpc/orca.ts) against hand-encoded
 * protobuf: the four fields read, every other wire type skipped, and
 * truncated or bad input refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OrcaDecode, decodeOrcaReport, newOrcaFigures } from '../../src/grpc/orca.js';
import { encodeOrca } from '../helpers/grpc-servers.js';

/** A map entry of field `field` (length-delimited): key string → double. */
function mapEntry(field: number, key: string, value: number): Buffer {
  const k = Buffer.from(key);
  const v = Buffer.alloc(8);
  v.writeDoubleLE(value);
  const entry = Buffer.concat([Buffer.from([0x0a, k.length]), k, Buffer.from([0x11]), v]);
  return Buffer.concat([Buffer.from([(field << 3) | 2, entry.length]), entry]);
}

describe('decodeOrcaReport', () => {
  it('reads cpu, rps_fractional, eps and application_utilization, whatever else the report holds', () => {
    const figure = fc.double({ min: 0, max: 1e6, noNaN: true });
    fc.assert(
      fc.property(figure, figure, figure, figure, fc.boolean(), (cpu, qps, eps, app, extras) => {
        const extra = extras
          ? Buffer.concat([
              mapEntry(8, 'queue', 3.5),
              mapEntry(5, 'mem', 0.2),
              Buffer.from([(3 << 3) | 0, 0xac, 0x02]), // rps (varint 300)
              encodeOrca({ 2: 0.4 }), // mem_utilization
            ])
          : Buffer.alloc(0);
        const bytes = Buffer.concat([encodeOrca({ 1: cpu, 6: qps }), extra, encodeOrca({ 7: eps, 9: app })]);
        const out = newOrcaFigures();
        expect(decodeOrcaReport(bytes, out)).toBe(OrcaDecode.Ok);
        expect(out.utilization).toBe(app > 0 ? app : cpu);
        expect(out.qps).toBe(qps);
        expect(out.eps).toBe(eps);
      }),
    );
  });

  it('an empty report is all zeros (proto3 leaves zero fields out)', () => {
    const out = { utilization: 9, qps: 9, eps: 9 };
    expect(decodeOrcaReport(new Uint8Array(0), out)).toBe(OrcaDecode.Ok);
    expect(out).toEqual({ utilization: 0, qps: 0, eps: 0 });
  });

  it('a report cut anywhere inside a field is Truncated; a negative or infinite figure is BadNumber', () => {
    const whole = Buffer.concat([encodeOrca({ 1: 0.5 }), mapEntry(8, 'queue', 3.5), encodeOrca({ 6: 10 })]);
    const fieldEnds = new Set([0, 9, 9 + mapEntry(8, 'queue', 3.5).length, whole.length]);
    for (let cut = 1; cut < whole.length; cut++) {
      if (fieldEnds.has(cut)) continue;
      expect(decodeOrcaReport(whole.subarray(0, cut), newOrcaFigures()), `cut at ${cut}`).toBe(OrcaDecode.Truncated);
    }
    expect(decodeOrcaReport(encodeOrca({ 1: -0.1 }), newOrcaFigures())).toBe(OrcaDecode.BadNumber);
    expect(decodeOrcaReport(encodeOrca({ 6: Number.POSITIVE_INFINITY }), newOrcaFigures())).toBe(OrcaDecode.BadNumber);
    expect(decodeOrcaReport(Buffer.from([(4 << 3) | 3]), newOrcaFigures())).toBe(OrcaDecode.Truncated);
  });
});
