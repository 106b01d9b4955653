/** fast-check arbitraries for PROXY protocol headers: valid ones, mutations of them, zone-id attacks, raw bytes. */
import fc from 'fast-check';
import { encodeProxyV1, encodeProxyV2, type ProxyEndpoint } from '../../src/proxy/proxy-protocol.js';

/** Dotted-quad IPv4 text. */
export const ipv4Text = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((q) => q.join('.'));
/** Eight full hex groups (any valid IPv6 address, not canonical text). */
export const ipv6Groups = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(':'));
/** An endpoint of either family. */
export const endpoint: fc.Arbitrary<ProxyEndpoint> = fc.record({ address: fc.oneof(ipv4Text, ipv6Groups), port: fc.nat(65535) });
/** A valid v1 or v2 header. */
export const validHeader = fc
  .tuple(endpoint, endpoint, fc.boolean())
  .map(([s, d, one]) => (one ? encodeProxyV1(s, d) : encodeProxyV2(s, d)));
/** A valid header after up to `maxEdits` byte edits: a byte replaced, inserted or deleted, or the rest cut. */
export function mutatedHeader(maxEdits: number): fc.Arbitrary<Buffer> {
  return fc
    .tuple(
      validHeader,
      fc.array(fc.tuple(fc.nat(300), fc.nat(255), fc.constantFrom('flip', 'insert', 'delete', 'cut')), { maxLength: maxEdits }),
    )
    .map(([buf, edits]) => {
      let b = Buffer.from(buf);
      for (const [at, byte, op] of edits) {
        const i = at % (b.length + 1);
        if (op === 'flip' && i < b.length) b[i] = byte;
        else if (op === 'insert') b = Buffer.concat([b.subarray(0, i), Buffer.from([byte]), b.subarray(i)]);
        else if (op === 'delete') b = Buffer.concat([b.subarray(0, i), b.subarray(i + 1)]);
        else b = b.subarray(0, i);
      }
      return b;
    });
}
/** v1 TCP6 headers whose source carries a zone id (what crashed the proxy). */
export const zonedHeader = fc
  .tuple(fc.nat(0xffff), fc.string({ unit: fc.constantFrom(...'0123456789abcdef:%'.split('')), minLength: 1, maxLength: 30 }))
  .map(([g, zone]) => Buffer.from(`PROXY TCP6 fe80::${g.toString(16)}%${zone} ::1 1 2\r\n`));
/** Random bytes. */
export const rawBytes = fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a));
/** "PROXY " and then text from the v1 alphabet (with '%' and CRLF). */
export const v1ish = fc
  .string({ unit: fc.constantFrom(...'PROXY TCP46UNKOW0123456789abcdef:.% \r\n'.split('')), maxLength: 110 })
  .map((s) => Buffer.from(`PROXY ${s}`));
/** Every kind above. */
export const anyHeaderBytes = fc.oneof(mutatedHeader(4), zonedHeader, rawBytes, v1ish, validHeader);
