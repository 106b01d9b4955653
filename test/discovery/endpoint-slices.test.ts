import { describe, expect, it } from 'vitest';
import { endpointStatus, membershipOf, parseSlice } from '../../src/discovery/endpoint-slices.js';
import { parseKubernetesTarget } from '../../src/discovery/kubernetes.js';
import { thrown } from '../helpers/thrown.js';

function slice(endpoints: unknown[], ports: unknown[] = [{ name: 'http', port: 8080 }], addressType = 'IPv4', name = 's1'): unknown {
  return { metadata: { name, resourceVersion: '5' }, addressType, ports, endpoints };
}

describe('endpointStatus: EndpointSlice conditions → backend status', () => {
  // [ready, serving, terminating] → status; undefined is a condition the API left unset.
  const table: [boolean | undefined, boolean | undefined, boolean | undefined, string][] = [
    [true, true, false, 'ready'],
    [undefined, undefined, undefined, 'ready'], // nil ready means ready, nil terminating means false
    [true, undefined, undefined, 'ready'],
    [false, true, true, 'draining'], // serving and terminating: in-flight work finishes, no new picks
    [false, false, true, 'draining'], // terminating and no longer serving: still never picked
    [true, true, true, 'draining'], // publishNotReadyAddresses keeps ready=true while terminating: terminating wins
    [undefined, undefined, true, 'draining'],
    [false, true, false, 'draining'], // serving but not ready (not a state the API produces): drain
    [false, false, false, 'unavailable'],
    [false, undefined, undefined, 'unavailable'], // serving nil defers to ready (false)
  ];
  it.each(table)('ready=%s serving=%s terminating=%s → %s', (ready, serving, terminating, status) => {
    expect(endpointStatus({ ready, serving, terminating })).toBe(status);
  });
});

describe('membershipOf', () => {
  it('takes the named port, the first address, the zone as locality, sorted by id', () => {
    const s = parseSlice(
      slice(
        [
          { addresses: ['10.0.0.2', '10.9.9.9'], conditions: { ready: true }, zone: 'b' },
          { addresses: ['10.0.0.1'], conditions: { ready: false, serving: true, terminating: true }, zone: 'a' },
        ],
        [
          { name: 'metrics', port: 9090 },
          { name: 'http', port: 8080 },
        ],
      ),
    );
    expect(membershipOf([s], 'http')).toEqual({
      backends: [
        { id: '10.0.0.1:8080', address: '10.0.0.1:8080', locality: 'a', status: 'draining' },
        { id: '10.0.0.2:8080', address: '10.0.0.2:8080', locality: 'b', status: 'ready' },
      ],
      skipped: 0,
      portless: [],
      ready: 1,
    });
    expect(membershipOf([s], 'metrics').backends.map((b) => b.address)).toEqual(['10.0.0.1:9090', '10.0.0.2:9090']);
  });

  it('without a port name takes the only port; with several ports and no name the slice is named as portless', () => {
    const one = parseSlice(slice([{ addresses: ['10.0.0.1'] }], [{ port: 80 }]));
    expect(membershipOf([one], undefined).backends.map((b) => b.id)).toEqual(['10.0.0.1:80']);
    const two = parseSlice(
      slice(
        [{ addresses: ['10.0.0.1'] }],
        [
          { name: 'a', port: 1 },
          { name: 'b', port: 2 },
        ],
      ),
    );
    expect(membershipOf([two], undefined)).toMatchObject({ backends: [], skipped: 1, portless: ['s1'] });
    expect(membershipOf([two], 'c')).toMatchObject({ backends: [], portless: ['s1'] });
  });

  it('IPv6 slices bracket the address; FQDN slices and non-IP addresses are skipped and counted', () => {
    const v6 = parseSlice(slice([{ addresses: ['fd00::7'] }], undefined, 'IPv6', 'v6'));
    const fqdn = parseSlice(slice([{ addresses: ['pod.example'] }], undefined, 'FQDN', 'f'));
    const wrong = parseSlice(slice([{ addresses: ['fd00::8'] }, { addresses: [] }], undefined, 'IPv4', 'w'));
    const m = membershipOf([v6, fqdn, wrong], 'http');
    expect(m.backends.map((b) => b.id)).toEqual(['[fd00::7]:8080']);
    expect(m.skipped).toBe(3);
  });

  it('one address in two slices (a re-shuffle) is one backend with the best condition, whatever the slice order', () => {
    const a = parseSlice(slice([{ addresses: ['10.0.0.1'], conditions: { ready: false } }], undefined, 'IPv4', 'a'));
    const b = parseSlice(slice([{ addresses: ['10.0.0.1'], conditions: { ready: true } }], undefined, 'IPv4', 'b'));
    expect(membershipOf([a, b], 'http').backends).toEqual([
      { id: '10.0.0.1:8080', address: '10.0.0.1:8080', locality: '', status: 'ready' },
    ]);
    expect(membershipOf([b, a], 'http').backends[0]!.status).toBe('ready');
  });
});

describe('parseSlice refuses malformed objects, naming the field', () => {
  const cases: [unknown, string][] = [
    [null, 'slice: must be an object'],
    [{ addressType: 'IPv4' }, 'slice.metadata: must be an object'],
    [{ metadata: { name: '' }, addressType: 'IPv4' }, 'slice.metadata.name: must be a non-empty string'],
    [slice('x' as unknown as unknown[]), 'slice.endpoints: must be an array'],
    [
      slice([{ addresses: ['10.0.0.1'], conditions: { ready: 'yes' } }]),
      'slice.endpoints[0].conditions.ready: must be a boolean, got "yes"',
    ],
    [slice([], [{ name: 'http', port: 70000 }]), 'slice.ports[0].port: must be an integer in [1, 65535], got 70000'],
    [slice([{ addresses: [7] }]), 'slice.endpoints[0].addresses[0]: must be a string'],
  ];
  it.each(cases)('%j', (value, message) => {
    const err = thrown(() => parseSlice(value));
    expect(err.code).toBe('Corrupt');
    expect(err.message).toBe(message);
  });
});

describe('parseKubernetesTarget', () => {
  it('reads namespace/service[:port-name], the namespace optional', () => {
    expect(parseKubernetesTarget('shop/api:http')).toEqual({ namespace: 'shop', service: 'api', port: 'http' });
    expect(parseKubernetesTarget('shop/api')).toEqual({ namespace: 'shop', service: 'api', port: undefined });
    expect(parseKubernetesTarget('api')).toEqual({ namespace: undefined, service: 'api', port: undefined });
  });
  it('refuses a part that is not a DNS-1123 label, naming it', () => {
    expect(thrown(() => parseKubernetesTarget('Shop/api')).message).toContain('the namespace "Shop" is not a DNS-1123 label');
    expect(thrown(() => parseKubernetesTarget('shop/')).message).toContain('the service "" is not a DNS-1123 label');
    expect(thrown(() => parseKubernetesTarget('a/b/c')).message).toBe('target: must be "namespace/service[:port-name]", got "a/b/c"');
  });
});
