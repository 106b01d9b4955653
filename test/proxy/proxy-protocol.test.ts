import net from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PoiseError } from '../../src/core/errors.js';
import { encodeProxyV1, encodeProxyV2, parseProxyHeader, V2_SIGNATURE } from '../../src/proxy/proxy-protocol.js';
import { anyHeaderBytes } from '../helpers/proxy-headers.js';
import { caught, thrown } from '../helpers/thrown.js';

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
    const err = thrown(() => parseProxyHeader(Buffer.from(line), 536));
    expect(err.code).toBe('Corrupt');
    expect(err.message).toContain(reason);
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

/** The strict grammar, checked against Node's own address validators (zone ids aside, which the PROXY grammar has none of). */
describe('PROXY v1 address grammar', () => {
  const v1 = (src: string, dst = '::1', proto = 'TCP6'): Buffer => Buffer.from(`PROXY ${proto} ${src} ${dst} 1 2\r\n`);

  it('refuses the zone-id header that crashed the proxy, and never hands an encoder an address it cannot write', () => {
    const crash = Buffer.from('PROXY TCP6 fe80::1%1:2:3:4:5:6:7:8 ::1 1 2\r\n');
    expect(() => parseProxyHeader(crash, 536)).toThrow('v1 source "fe80::1%1:2:3:4:5:6:7:8" is not an IPv6 address');
    expect(() => parseProxyHeader(Buffer.from('PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n'), 536)).toThrow('is not an IPv6 address');
  });

  it.each([
    ['TCP4', '01.2.3.4'],
    ['TCP4', '1.2.3'],
    ['TCP4', '1.2.3.4.5'],
    ['TCP4', '256.1.1.1'],
    ['TCP4', '1.2.3.-4'],
    ['TCP4', '1.2.3.04'],
    ['TCP4', '0x1.2.3.4'],
    ['TCP6', ':::1'],
    ['TCP6', '1::2::3'],
    ['TCP6', '1:2:3:4:5:6:7:8:9'],
    ['TCP6', '1:2:3:4:5:6:7'],
    ['TCP6', '12345::1'],
    ['TCP6', ':1::2'],
    ['TCP6', '1::2:'],
    ['TCP6', '::1.2.3'],
    ['TCP6', '::01.2.3.4'],
    ['TCP6', '1.2.3.4::'],
    ['TCP6', '1:2:3:4:5:6:7:1.2.3.4'],
    ['TCP6', '[::1]'],
    ['TCP6', 'g::1'],
  ])('refuses %s source %j', (proto, src) => {
    const dst = proto === 'TCP4' ? '1.1.1.1' : '::1';
    expect(() => parseProxyHeader(v1(src, dst, proto), 536)).toThrow(`v1 source ${JSON.stringify(src)} is not an`);
  });

  it.each([
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::', '::'],
    ['0000:0000::0001', '::1'],
    ['FE80::ABCD', 'fe80::abcd'],
    ['::ffff:10.0.0.1', '10.0.0.1'],
    ['::10.0.0.1', '::a00:1'],
    ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304'],
  ])('accepts TCP6 %j as %j (canonical text)', (src, canonical) => {
    expect(parseProxyHeader(v1(src), 536)?.source?.address).toBe(canonical);
  });

  const alphabet6 = fc.constantFrom(...'0123456789abcdefABCDEF:.%'.split(''));
  const alphabet4 = fc.constantFrom(...'0123456789.'.split(''));
  const ok = (text: string, proto: 'TCP4' | 'TCP6'): boolean => {
    try {
      parseProxyHeader(v1(text, proto === 'TCP4' ? '1.1.1.1' : '::1', proto), 536);
      return true;
    } catch {
      return false;
    }
  };

  it('accepts exactly what node:net calls an IPv4 address (10,000 strings)', () => {
    const near4 = fc.oneof(
      fc.string({ unit: alphabet4, maxLength: 16 }),
      fc.tuple(fc.nat(300), fc.nat(300), fc.nat(300), fc.nat(300)).map((q) => q.join('.')),
    );
    fc.assert(
      fc.property(near4, (t) => ok(t, 'TCP4') === net.isIPv4(t)),
      { numRuns: 10_000 },
    );
  });

  it('accepts exactly what node:net calls an IPv6 address without a zone id (10,000 strings)', () => {
    // Mostly near-misses of real addresses: mutate a valid text by one edit.
    const mutated = fc.tuple(v6, fc.nat(40), alphabet6, fc.constantFrom('insert', 'replace', 'delete')).map(([a, at, ch, op]) => {
      const i = at % (a.length + 1);
      if (op === 'insert') return a.slice(0, i) + ch + a.slice(i);
      if (op === 'replace') return a.slice(0, i) + ch + a.slice(i + 1);
      return a.slice(0, i) + a.slice(i + 1);
    });
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: alphabet6, maxLength: 45 }), mutated), (t) => {
        expect(ok(t, 'TCP6')).toBe(net.isIPv6(t) && !t.includes('%'));
      }),
      { numRuns: 10_000 },
    );
  });
});

describe('PROXY header fuzz (parser level)', () => {
  /** How many cases: a bounded number on every push, more under `npm run fuzz` (POISE_FUZZ_RUNS). */
  const RUNS = Number(process.env.POISE_FUZZ_RUNS ?? 4000);
  it(`any bytes: a header, a need for more, or a Corrupt PoiseError — and what it returns re-encodes and re-parses (${RUNS} cases)`, () => {
    fc.assert(
      fc.property(anyHeaderBytes, (buf) => {
        let parsed = undefined as ReturnType<typeof parseProxyHeader> | undefined;
        const err = caught(() => (parsed = parseProxyHeader(buf, 536)));
        if (err !== undefined) return void expect(err.code).toBe('Corrupt');
        if (parsed?.source === undefined || parsed.destination === undefined) return;
        expect(parsed.length).toBeLessThanOrEqual(buf.length);
        for (const enc of [encodeProxyV1, encodeProxyV2]) {
          const again = parseProxyHeader(enc(parsed.source, parsed.destination), 536);
          expect(again?.source).toEqual(parsed.source);
          expect(again?.destination).toEqual(parsed.destination);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('the encoders drop a socket address zone id and refuse what is no address with a PoiseError', () => {
    expect(encodeProxyV1({ address: 'fe80::1%eth0', port: 1 }, { address: '::1', port: 2 }).toString()).toBe(
      'PROXY TCP6 fe80::1 ::1 1 2\r\n',
    );
    const zoned = encodeProxyV2({ address: 'fe80::1%1:2:3:4', port: 1 }, { address: '::1', port: 2 });
    expect(parseProxyHeader(zoned, 536)?.source).toEqual({ address: 'fe80::1', port: 1 });
    expect(() => encodeProxyV2({ address: 'fe80::1::2', port: 1 }, { address: '::1', port: 2 })).toThrow(PoiseError);
    expect(() => encodeProxyV2({ address: 'localhost', port: 1 }, { address: '::1', port: 2 })).toThrow('is not an IP address');
    expect(() => encodeProxyV1({ address: '1.2.3.4', port: 70000 }, { address: '1.2.3.4', port: 2 })).toThrow(
      'source port must be an integer in [0, 65535], got 70000',
    );
  });

  it('refuses a v2 PROXY command whose AF_UNIX block is shorter than 216 bytes', () => {
    const h = Buffer.concat([V2_SIGNATURE, Buffer.from([0x21, 0x31, 0x00, 0x10]), Buffer.alloc(16)]);
    expect(() => parseProxyHeader(h, 536)).toThrow('v2 UNIX address block needs 216 bytes, length says 16');
  });
});
