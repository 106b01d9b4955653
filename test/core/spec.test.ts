import net from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isIPv4, isIPv6 } from '../../src/core/ip.js';
import {
  addressReason,
  checkBackendSet,
  parseAddress,
  resolveBackendSpec,
  resolveBackendSpecs,
  type ResolvedBackendSpec,
} from '../../src/core/spec.js';
import { caught, thrown } from '../helpers/thrown.js';

const ok = (over: Record<string, unknown> = {}): Record<string, unknown> => ({ id: 'db-1', address: '127.0.0.1:5432', ...over });

describe('resolveBackendSpec', () => {
  it('returns a frozen spec, takes it back as it is (by identity), and validates anything else again', () => {
    const spec = resolveBackendSpec(ok({ weight: 3 }));
    expect(Object.isFrozen(spec)).toBe(true);
    expect(resolveBackendSpec(spec)).toBe(spec);
    expect(resolveBackendSpecs([spec, ok({ id: 'db-2' })])[0]).toBe(spec);
    expect(() => {
      (spec as { weight: number }).weight = -1;
    }).toThrow(TypeError);
    // An equal copy is a new object: validated, and a bad field in it is refused.
    const copy = resolveBackendSpec({ ...spec });
    expect(copy).not.toBe(spec);
    expect(copy).toEqual(spec);
    expect(thrown(() => resolveBackendSpec({ ...spec, weight: -1 })).code).toBe('InvalidWeight');
    expect(thrown(() => resolveBackendSpecs([spec, spec])).code).toBe('DuplicateIdentity');
  });

  it('fills every default', () => {
    expect(resolveBackendSpec(ok())).toEqual({
      id: 'db-1',
      address: '127.0.0.1:5432',
      weight: 1,
      priority: 0,
      locality: '',
      localityWeight: 1,
      status: 'ready',
      maxInflight: 0,
      panicEligible: true,
      role: 'none',
      hostname: '',
      fallbackIp: '',
    });
  });

  it.each([
    [5, 'backends[0]', 'InvalidConfig', 'backends[0]: must be an object, got 5'],
    [ok({ weight: -2 }), 'backends[3]', 'InvalidWeight', 'backends[3].weight: must be an integer in [1, 4294967295], got -2'],
    [
      ok({ weight: 4294967296 }),
      'backends[0]',
      'InvalidWeight',
      'backends[0].weight: must be an integer in [1, 4294967295], got 4294967296',
    ],
    [ok({ id: '' }), 'backends[1]', 'InvalidConfig', 'backends[1].id: must be a string of 1 to 256 characters, got ""'],
    [
      ok({ address: 'localhost' }),
      'backends[2]',
      'InvalidConfig',
      'backends[2].address: must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"), got "localhost"',
    ],
    [ok({ priority: -1 }), 'b', 'InvalidConfig', 'b.priority: must be an integer in [0, 4294967295], got -1'],
    [ok({ locality: 7 }), 'b', 'InvalidConfig', 'b.locality: must be a string of at most 256 characters, got 7'],
    [ok({ localityWeight: 0 }), 'b', 'InvalidWeight', 'b.localityWeight: must be an integer in [1, 4294967295], got 0'],
    [ok({ status: 'up' }), 'b', 'InvalidConfig', 'b.status: must be one of "ready", "degraded", "draining", "unavailable", got "up"'],
    [ok({ maxInflight: -1 }), 'b', 'InvalidConfig', 'b.maxInflight: must be an integer in [0, 2147483647] (0 = unlimited), got -1'],
    [ok({ panicEligible: 'yes' }), 'b', 'InvalidConfig', 'b.panicEligible: must be a boolean, got "yes"'],
    [
      ok({ wieght: 2 }),
      'backends[0]',
      'InvalidConfig',
      'backends[0].wieght: unknown field (accepted: id, address, weight, priority, locality, localityWeight, status, maxInflight, panicEligible, role, hostname, fallbackIp)',
    ],
  ])('rejects %o at %s with an exact message', (value, path, code, message) => {
    const err = thrown(() => resolveBackendSpec(value, path));
    expect(err.code).toBe(code);
    expect(err.message).toBe(message);
  });
});

describe('resolveBackendSpecs', () => {
  it('validates each member with its index in the path', () => {
    const err = thrown(() => resolveBackendSpecs([ok(), ok({ id: 'b' }), ok({ id: 'c' }), ok({ id: 'd', weight: -2 })]));
    expect(err.message).toBe('backends[3].weight: must be an integer in [1, 4294967295], got -2');
    expect(err.field).toBe('backends[3].weight');
  });

  it('checkBackendSet refuses exactly what a direct per-group check refuses, with the same first error (property)', () => {
    /** The law, written directly: every (priority, locality) group keyed in one map, ids in another. */
    const reference = (specs: ResolvedBackendSpec[]): string | undefined => {
      const ids = new Map<string, number>();
      const groups = new Map<string, number>();
      for (let i = 0; i < specs.length; i++) {
        const s = specs[i]!;
        if (ids.has(s.id))
          return `DuplicateIdentity backends[${i}].id: duplicate id ${JSON.stringify(s.id)} (first at backends[${ids.get(s.id)}])`;
        ids.set(s.id, i);
        const key = JSON.stringify([s.priority, s.locality]);
        const first = groups.get(key);
        if (first === undefined) groups.set(key, i);
        else if (specs[first]!.localityWeight !== s.localityWeight)
          return `InconsistentTopology backends[${i}].localityWeight: ${s.localityWeight} contradicts ${specs[first]!.localityWeight} at backends[${first}] for priority ${s.priority}, locality ${JSON.stringify(s.locality)}`;
      }
      return undefined;
    };
    const member = fc.record({
      id: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g'),
      priority: fc.integer({ min: 0, max: 2 }),
      locality: fc.constantFrom('', 'eu', 'us'),
      localityWeight: fc.integer({ min: 1, max: 3 }),
    });
    fc.assert(
      fc.property(fc.array(member, { maxLength: 7 }), (members) => {
        const specs = members.map((m, i) => resolveBackendSpec({ ...m, address: `127.0.0.1:${1000 + i}` }));
        const err = caught(() => checkBackendSet(specs));
        const got = err === undefined ? undefined : `${err.code} ${err.message}`;
        expect(got).toBe(reference(specs));
      }),
      { numRuns: 5000 },
    );
  });

  it('rejects duplicate ids (DuplicateIdentity) and contradictory locality weights (InconsistentTopology)', () => {
    const dup = thrown(() => resolveBackendSpecs([ok(), ok({ id: 'x' }), ok()]));
    expect(dup.code).toBe('DuplicateIdentity');
    expect(dup.message).toBe('backends[2].id: duplicate id "db-1" (first at backends[0])');
    const topo = thrown(() =>
      resolveBackendSpecs([ok({ locality: 'eu', localityWeight: 2 }), ok({ id: 'b', locality: 'eu', localityWeight: 3 })]),
    );
    expect(topo.code).toBe('InconsistentTopology');
    expect(topo.message).toBe('backends[1].localityWeight: 3 contradicts 2 at backends[0] for priority 0, locality "eu"');
    // Different priorities may weigh the same locality differently.
    expect(
      resolveBackendSpecs([ok({ locality: 'eu', localityWeight: 2 }), ok({ id: 'b', priority: 1, locality: 'eu', localityWeight: 3 })]),
    ).toHaveLength(2);
  });

  it('requires an array', () => {
    expect(thrown(() => resolveBackendSpecs({})).message).toBe('backends: must be an array, got a object');
  });
});

describe('parseAddress', () => {
  it('parses host:port and bracketed IPv6', () => {
    expect(parseAddress('127.0.0.1:5432')).toEqual({ host: '127.0.0.1', port: 5432 });
    expect(parseAddress('[::1]:6379')).toEqual({ host: '::1', port: 6379 });
    expect(parseAddress('db.local:1')).toEqual({ host: 'db.local', port: 1 });
  });

  it('rejects malformed addresses and ports outside [1, 65535]', () => {
    for (const a of ['127.0.0.1', '127.0.0.1:0', '127.0.0.1:65536', '::1:80', ':80', 'host:port', ''])
      expect(parseAddress(a)).toBeUndefined();
  });

  // The address rule: RFC 1123 hostnames (with "_", as SRV and many internal names use), dotted-quad
  // IPv4 with every octet in [0, 255], bracketed IPv6 with an optional zone id.
  it.each([
    ['my_host:80', 'my_host', 80],
    ['_sip._tcp.example.com:5060', '_sip._tcp.example.com', 5060],
    ['a-b.c-d:1', 'a-b.c-d', 1],
    ['x:65535', 'x', 65535],
    ['123abc.example:80', '123abc.example', 80],
    ['0.0.0.0:80', '0.0.0.0', 80],
    ['255.255.255.255:80', '255.255.255.255', 80],
    ['[fe80::1%eth0]:80', 'fe80::1%eth0', 80],
    ['[::ffff:10.0.0.1]:5432', '::ffff:10.0.0.1', 5432],
    ['[2001:db8::]:443', '2001:db8::', 443],
    [`${'a'.repeat(63)}.b:1`, `${'a'.repeat(63)}.b`, 1],
  ])('accepts %s', (address, host, port) => {
    expect(parseAddress(address)).toEqual({ host, port });
    expect(addressReason(address)).toBeUndefined();
  });

  const RULE = 'must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port")';
  it.each([
    ['...:80', `${RULE}; host "..." has the label "", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`],
    ['-:80', `${RULE}; host "-" has the label "-", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`],
    ['999.999.999.999:80', `${RULE}; "999.999.999.999" is not an IPv4 address (four decimal octets, each in [0, 255])`],
    ['1.2.3:80', `${RULE}; "1.2.3" is not an IPv4 address (four decimal octets, each in [0, 255])`],
    ['01.2.3.4:80', `${RULE}; "01.2.3.4" is not an IPv4 address (four decimal octets, each in [0, 255])`],
    ['a..b:80', `${RULE}; host "a..b" has the label "", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`],
    ['host.:80', `${RULE}; host "host." has the label "", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`],
    [
      '-lead.example:80',
      `${RULE}; host "-lead.example" has the label "-lead", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`,
    ],
    [
      'trail-.example:80',
      `${RULE}; host "trail-.example" has the label "trail-", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`,
    ],
    [
      `${'a'.repeat(64)}:80`,
      `${RULE}; host "${'a'.repeat(64)}" has the label "${'a'.repeat(64)}", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`,
    ],
    [`${'a.'.repeat(127)}a:80`, `${RULE}; host is 255 characters, more than 253`],
    [
      'my host:80',
      `${RULE}; host "my host" has the label "my host", not 1 to 63 characters of [A-Za-z0-9_-] without a leading or trailing hyphen`,
    ],
    ['[fe80::1%]:80', `${RULE}; "fe80::1%" has a zone id that is not 1 to 64 characters of [A-Za-z0-9._~-]`],
    ['[fe80::1%eth 0]:80', `${RULE}; "fe80::1%eth 0" has a zone id that is not 1 to 64 characters of [A-Za-z0-9._~-]`],
    ['[::g]:80', `${RULE}; "::g" is not an IPv6 address`],
    ['[1.2.3.4]:80', `${RULE}; "1.2.3.4" is not an IPv6 address`],
    ['::1:80', `${RULE}; an IPv6 host must be in brackets`],
    ['http://127.0.0.1:7001', `${RULE}; "http://" is a URL scheme: give HOST:PORT without it ("127.0.0.1:7001")`],
    ['redis://cache.internal:6379/0', `${RULE}; "redis://" is a URL scheme: give HOST:PORT without it ("cache.internal:6379")`],
    ['tcp://[::1]:5432', `${RULE}; "tcp://" is a URL scheme: give HOST:PORT without it ("[::1]:5432")`],
    ['https://example.com', `${RULE}; "https://" is a URL scheme: give HOST:PORT without it`],
    ['[]:80', RULE],
    ['nope', RULE],
    ['h:0', RULE],
    ['h:+80', RULE],
  ])('refuses %s with the reason', (address, reason) => {
    expect(parseAddress(address)).toBeUndefined();
    expect(addressReason(address)).toBe(reason);
    const err = thrown(() => resolveBackendSpec(ok({ address }), 'backends[0]'));
    // (describe() shortens a long offending value to 77 characters and "...")
    const got = JSON.stringify(address.length > 80 ? `${address.slice(0, 77)}...` : address);
    expect([err.code, err.field, err.message]).toEqual([
      'InvalidConfig',
      'backends[0].address',
      `backends[0].address: ${reason}, got ${got}`,
    ]);
  });

  it('isIPv4 / isIPv6 agree with node:net isIP (core stays free of node:net)', () => {
    const group = fc.oneof(
      fc.stringMatching(/^[0-9a-fA-F]{0,5}$/),
      fc.constantFrom('1.2.3.4', '255.255.255.255', '256.1.1.1', '01.1.1.1', '1.2.3', ''),
    );
    const candidate = fc
      .array(fc.tuple(group, fc.constantFrom(':', '::', ':', '.')), { maxLength: 10 })
      .map((parts) => parts.map(([g, sep]) => g + sep).join(''))
      .chain((t) => fc.constantFrom(t, t.slice(0, -1), t.slice(1)));
    let valid = 0;
    fc.assert(
      fc.property(candidate, (text) => {
        const kind = net.isIP(text);
        if (kind !== 0) valid++;
        expect([isIPv4(text), isIPv6(text)]).toEqual([kind === 4, kind === 6]);
      }),
      { numRuns: 20_000, seed: 9 },
    );
    // The generator reaches valid addresses too, so the agreement is not only on garbage.
    expect(valid).toBeGreaterThan(100);
  });

  it('isIPv4 agrees with node:net on dotted digit strings (octet bounds, leading zeros, empty and extra parts)', () => {
    const octet = fc.oneof(
      fc.integer({ min: 0, max: 300 }).map(String),
      fc.stringMatching(/^[0-9]{0,5}$/),
      fc.constantFrom('00', '01', '255', '256', '1a', ' 1'),
    );
    const text = fc
      .oneof(fc.array(octet, { minLength: 0, maxLength: 6 }), fc.array(octet, { minLength: 4, maxLength: 4 }))
      .map((parts) => parts.join('.'));
    let valid = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          text,
          text.map((t) => `${t}.`),
          text.map((t) => `.${t}`),
        ),
        (t) => {
          if (net.isIP(t) === 4) valid++;
          expect(isIPv4(t)).toBe(net.isIP(t) === 4);
        },
      ),
      { numRuns: 20_000, seed: 4 },
    );
    expect(valid).toBeGreaterThan(100);
  });
});

describe('optional fields and arrays', () => {
  it.each([
    ['weight', 'InvalidWeight', 'backends[0].weight: must be an integer in [1, 4294967295], got null'],
    ['priority', 'InvalidConfig', 'backends[0].priority: must be an integer in [0, 4294967295], got null'],
    ['locality', 'InvalidConfig', 'backends[0].locality: must be a string of at most 256 characters, got null'],
    ['localityWeight', 'InvalidWeight', 'backends[0].localityWeight: must be an integer in [1, 4294967295], got null'],
    ['status', 'InvalidConfig', 'backends[0].status: must be one of "ready", "degraded", "draining", "unavailable", got null'],
    ['maxInflight', 'InvalidConfig', 'backends[0].maxInflight: must be an integer in [0, 2147483647] (0 = unlimited), got null'],
    ['panicEligible', 'InvalidConfig', 'backends[0].panicEligible: must be a boolean, got null'],
  ])('%s: null is refused, never the default', (field, code, message) => {
    const err = thrown(() => resolveBackendSpec(ok({ [field]: null }), 'backends[0]'));
    expect([err.code, err.message]).toEqual([code, message]);
  });

  it('a hole in a sparse array is refused like any non-object, naming its index', () => {
    // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
    const sparse = [ok(), , ok({ id: 'c' })];
    const err = thrown(() => resolveBackendSpecs(sparse));
    expect([err.code, err.field, err.message]).toEqual(['InvalidConfig', 'backends[1]', 'backends[1]: must be an object, got undefined']);
  });
});
