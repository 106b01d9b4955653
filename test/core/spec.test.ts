import { describe, expect, it } from 'vitest';
import { parseAddress, resolveBackendSpec, resolveBackendSpecs } from '../../src/core/spec.js';
import { thrown } from '../helpers/thrown.js';


const ok = (over: Record<string, unknown> = {}): Record<string, unknown> => ({ id: 'db-1', address: '127.0.0.1:5432', ...over });

describe('resolveBackendSpec', () => {
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
    });
  });

  it.each([
    [5, 'backends[0]', 'InvalidConfig', 'backends[0]: must be an object, got 5'],
    [ok({ weight: -2 }), 'backends[3]', 'InvalidWeight', 'backends[3].weight: must be an integer in [1, 4294967295], got -2'],
    [ok({ weight: 4294967296 }), 'backends[0]', 'InvalidWeight', 'backends[0].weight: must be an integer in [1, 4294967295], got 4294967296'],
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
    [ok({ status: 'up' }), 'b', 'InvalidConfig', 'b.status: must be one of "ready", "draining", "unavailable", got "up"'],
    [ok({ maxInflight: -1 }), 'b', 'InvalidConfig', 'b.maxInflight: must be an integer in [0, 2147483647] (0 = unlimited), got -1'],
    [ok({ panicEligible: 'yes' }), 'b', 'InvalidConfig', 'b.panicEligible: must be a boolean, got "yes"'],
    [
      ok({ wieght: 2 }),
      'backends[0]',
      'InvalidConfig',
      'backends[0].wieght: unknown field (accepted: id, address, weight, priority, locality, localityWeight, status, maxInflight, panicEligible)',
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
    expect(resolveBackendSpecs([ok({ locality: 'eu', localityWeight: 2 }), ok({ id: 'b', priority: 1, locality: 'eu', localityWeight: 3 })])).toHaveLength(2);
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
    for (const a of ['127.0.0.1', '127.0.0.1:0', '127.0.0.1:65536', '::1:80', ':80', 'host:port', '']) expect(parseAddress(a)).toBeUndefined();
  });
});
