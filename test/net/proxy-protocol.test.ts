import net from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeProxyV1, encodeProxyV2, parseProxyHeader } from '../../src/net/proxy-protocol.js';

const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((q) => q.join('.'));
/** IPv6 in the platform's canonical text (URL's host serializer compresses as RFC 5952 does). */
const v6 = fc
  .array(fc.oneof(fc.constant(0), fc.nat(0xffff)), { minLength: 8, maxLength: 8 })
  .map((g) => new URL(`http://[${g.map((x) => x.toString(16)).join(':')}]/`).hostname.slice(1, -1))
  .filter((a) => !a.startsWith('::ffff:') && a.split(':').length > 1 && !/\d+\.\d+\.\d+\.\d+$/.test(a));
const port = fc.nat(65535);

describe('PROXY protocol encode / parse', () => {
  it('round-trips every IPv4 and IPv6 endpoint pair through v1 and v2, with any payload after it', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.tuple(v4, v4), fc.tuple(v6, v6)),
        port,
        port,
        fc.uint8Array({ maxLength: 64 }),
        ([src, dst], sp, dp, payload) => {
          for (const [version, encode] of [
            [1, encodeProxyV1],
            [2, encodeProxyV2],
          ] as const) {
            const header = encode({ address: src, port: sp }, { address: dst, port: dp });
            const parsed = parseProxyHeader(Buffer.concat([header, payload]), 536);
            expect(parsed).toEqual({
              version,
              source: { address: src, port: sp },
              destination: { address: dst, port: dp },
              length: header.length,
            });
            // Every strict prefix asks for more bytes; none is taken for a header.
            for (let n = 0; n < header.length; n++) expect(parseProxyHeader(header.subarray(0, n), 536)).toBeUndefined();
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('writes IPv4-mapped addresses as TCP4 and a v4/v6 mix as TCP6', () => {
    expect(encodeProxyV1({ address: '::ffff:10.0.0.1', port: 1 }, { address: '10.0.0.2', port: 2 }).toString()).toBe(
      'PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n',
    );
    expect(encodeProxyV1({ address: '10.0.0.1', port: 1 }, { address: '::1', port: 2 }).toString()).toBe(
      'PROXY TCP6 ::ffff:10.0.0.1 ::1 1 2\r\n',
    );
    expect(
      net.isIPv6(parseProxyHeader(encodeProxyV2({ address: '10.0.0.1', port: 1 }, { address: '::1', port: 2 }), 536)!.destination!.address),
    ).toBe(true);
  });

  it('v1 UNKNOWN and v2 LOCAL carry no address; v2 TLVs are skipped', () => {
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nrest'), 536)).toEqual({ version: 1, length: 35 });
    const local = Buffer.concat([Buffer.from('0d0a0d0a000d0a515549540a', 'hex'), Buffer.from([0x20, 0x00, 0x00, 0x00])]);
    expect(parseProxyHeader(local, 536)).toEqual({ version: 2, length: 16 });
    const tlv = Buffer.concat([
      encodeProxyV2({ address: '1.2.3.4', port: 5 }, { address: '5.6.7.8', port: 9 }),
      Buffer.from([0x04, 0x00, 0x01, 0x00]),
    ]);
    tlv.writeUInt16BE(16, 14);
    expect(parseProxyHeader(tlv, 536)).toMatchObject({ version: 2, source: { address: '1.2.3.4', port: 5 }, length: 32 });
  });

  it.each([
    ['PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n', 'v1 protocol must be TCP4, TCP6 or UNKNOWN, got "TCP5"'],
    ['PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n', 'v1 source port must be a decimal in [0, 65535], got "01"'],
    ['PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n', 'v1 TCP4 line must have 6 single-space-separated fields, got 7'],
    ['PROXY TCP4 ::1 5.6.7.8 1 2\r\n', 'v1 source "::1" is not an IPv4 address'],
    ['PROXY TCP6 ::1 5.6.7.8 1 2\r\n', 'v1 destination "5.6.7.8" is not an IPv6 address'],
    ['PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n', 'v1 line must end with CRLF'],
    ['SSH-2.0-OpenSSH\r\n', 'does not start with a v1 ("PROXY ") or v2 signature'],
  ])('refuses %j: %s', (line, reason) => {
    expect(() => parseProxyHeader(Buffer.from(line), 536)).toThrow(reason);
    try {
      parseProxyHeader(Buffer.from(line), 536);
    } catch (err) {
      expect(err).toMatchObject({ code: 'Corrupt' });
    }
  });

  it('refuses a v2 header with a bad version, command, family or a short address block', () => {
    const good = encodeProxyV2({ address: '1.2.3.4', port: 5 }, { address: '5.6.7.8', port: 9 });
    const bad = (at: number, value: number): Buffer => {
      const b = Buffer.from(good);
      b[at] = value;
      return b;
    };
    expect(() => parseProxyHeader(bad(12, 0x31), 536)).toThrow('v2 version must be 2, got 3');
    expect(() => parseProxyHeader(bad(12, 0x22), 536)).toThrow('v2 command must be LOCAL (0) or PROXY (1), got 2');
    expect(() => parseProxyHeader(bad(13, 0x41), 536)).toThrow('v2 family/transport byte 0x41 is not defined');
    expect(() => parseProxyHeader(bad(15, 8).subarray(0, 24), 536)).toThrow('v2 INET address block needs 12 bytes, length says 8');
    expect(() => parseProxyHeader(good, 27)).toThrow('v2 header of 28 bytes is above the limit of 27');
  });
});
