/**
 * What poise reads of a `discovery.k8s.io/v1` EndpointSlice, and how a set of
 * slices becomes a backend list. Pure: the Kubernetes source
 * (kubernetes.ts) feeds it the objects its list and watch return.
 *
 * Conditions → status (the exact rule, in this order; the API's own words
 * for a missing condition: `ready` nil means ready, `serving` nil defers to
 * `ready`, `terminating` nil means false):
 *
 *   1. `terminating: true`            → `draining` (whatever `serving` says)
 *   2. `ready: true` or `ready` unset → `ready`
 *   3. `serving: true` (not ready)    → `draining`
 *   4. otherwise                      → `unavailable`
 *
 * kube-proxy sends new connections to ready endpoints and, only when a
 * service has none, to serving terminating ones; Istio hands Envoy a
 * terminating endpoint as DRAINING and a not-ready one as UNHEALTHY. Poise
 * follows Envoy: a terminating endpoint is `draining` (its leases finish, no
 * new pick goes to it, not even in panic), a not-ready one `unavailable`
 * (use-all panic may revive it, as Envoy's panic routing does with unhealthy
 * hosts). kube-proxy's fallback to terminating endpoints is not copied: a
 * pod that is shutting down gets no new work from poise.
 *
 * Endpoint → backend: the first of `addresses` (the API says they are
 * fungible; kube-proxy also uses the first) with the slice's port of the
 * chosen name; id = address (`10.0.0.7:8080`, `[fd00::7]:8080`), so the same
 * pod in two slices during a re-shuffle is one backend (the best condition
 * wins: ready over draining over unavailable); `zone` → locality. Slices of
 * `addressType: FQDN` (deprecated) and endpoints without an address or
 * without the port are skipped and counted.
 */
import { PoiseError } from '../core/errors.js';
import { isIPv4, isIPv6 } from '../core/ip.js';
import type { BackendSpec } from '../core/spec.js';

/** One endpoint of a slice, as poise reads it. */
export interface SliceEndpoint {
  readonly address: string | undefined;
  readonly ready: boolean | undefined;
  readonly serving: boolean | undefined;
  readonly terminating: boolean | undefined;
  readonly zone: string;
}

/** One EndpointSlice, validated. */
export interface Slice {
  readonly name: string;
  readonly addressType: string;
  /** Port name → number (`''` for an unnamed port); a port without a number means "all ports" in the API and is left out. */
  readonly ports: ReadonlyMap<string, number>;
  readonly endpoints: readonly SliceEndpoint[];
}

/** The backend status of one endpoint's conditions (the rule in the file comment). */
export function endpointStatus(e: Pick<SliceEndpoint, 'ready' | 'serving' | 'terminating'>): 'ready' | 'draining' | 'unavailable' {
  if (e.terminating === true) return 'draining';
  if (e.ready !== false) return 'ready';
  if (e.serving === true) return 'draining';
  return 'unavailable';
}

function bad(field: string, reason: string): never {
  throw new PoiseError('Corrupt', `${field}: ${reason}`, { field });
}

function obj(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) bad(field, 'must be an object');
  return value as Record<string, unknown>;
}

function optBool(value: unknown, field: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') bad(field, `must be a boolean, got ${JSON.stringify(value)}`);
  return value;
}

function list(value: unknown, field: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) bad(field, 'must be an array');
  return value;
}

/**
 * Validates an EndpointSlice object as the API serves it; throws `Corrupt`
 * naming the field (`slice.endpoints[2].conditions.ready: must be a boolean`).
 * Fields poise does not read are not checked.
 */
export function parseSlice(value: unknown, field = 'slice'): Slice {
  const o = obj(value, field);
  const meta = obj(o['metadata'], `${field}.metadata`);
  const name = meta['name'];
  if (typeof name !== 'string' || name.length === 0) bad(`${field}.metadata.name`, 'must be a non-empty string');
  const addressType = o['addressType'];
  if (typeof addressType !== 'string') bad(`${field}.addressType`, 'must be a string (IPv4, IPv6 or FQDN)');
  const ports = new Map<string, number>();
  list(o['ports'], `${field}.ports`).forEach((p, i) => {
    const po = obj(p, `${field}.ports[${i}]`);
    const n = po['name'] ?? '';
    if (typeof n !== 'string') bad(`${field}.ports[${i}].name`, 'must be a string');
    const port = po['port'];
    if (port === undefined || port === null) return;
    if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535)
      bad(`${field}.ports[${i}].port`, `must be an integer in [1, 65535], got ${JSON.stringify(port)}`);
    ports.set(n, port);
  });
  const endpoints = list(o['endpoints'], `${field}.endpoints`).map((e, i): SliceEndpoint => {
    const at = `${field}.endpoints[${i}]`;
    const eo = obj(e, at);
    const addresses = list(eo['addresses'], `${at}.addresses`);
    const first = addresses[0];
    if (first !== undefined && typeof first !== 'string') bad(`${at}.addresses[0]`, 'must be a string');
    const c = eo['conditions'] === undefined || eo['conditions'] === null ? {} : obj(eo['conditions'], `${at}.conditions`);
    const zone = eo['zone'] ?? '';
    if (typeof zone !== 'string' || zone.length > 256) bad(`${at}.zone`, 'must be a string of at most 256 characters');
    return {
      address: first,
      ready: optBool(c['ready'], `${at}.conditions.ready`),
      serving: optBool(c['serving'], `${at}.conditions.serving`),
      terminating: optBool(c['terminating'], `${at}.conditions.terminating`),
      zone,
    };
  });
  return { name, addressType, ports, endpoints };
}

/** The address of `host` (an IPv4 or IPv6 literal) on `port`, or undefined when `host` is neither. */
function addressOf(host: string, port: number, type: string): string | undefined {
  if (type === 'IPv4' && isIPv4(host)) return `${host}:${port}`;
  if (type === 'IPv6' && isIPv6(host)) return `[${host}]:${port}`;
  return undefined;
}

const RANK = { ready: 2, draining: 1, unavailable: 0 } as const;

/** What {@link membershipOf} made of a set of slices. */
export interface SliceMembership {
  /** One backend per endpoint address, sorted by id. */
  readonly backends: BackendSpec[];
  /** Endpoints left out: no address, a non-IP address, an FQDN slice, or a slice without the port. */
  readonly skipped: number;
  /** Slices that have no port of the wanted name (or several ports and no name given). */
  readonly portless: readonly string[];
  /** How many backends are `ready`. */
  readonly ready: number;
}

/**
 * The backends of `slices`: each endpoint's first address on the slice's
 * port named `portName` (without a name: the slice's only port), its status
 * by {@link endpointStatus}, its zone as locality; one backend per address.
 */
export function membershipOf(slices: Iterable<Slice>, portName: string | undefined): SliceMembership {
  const byId = new Map<string, BackendSpec & { status: 'ready' | 'draining' | 'unavailable' }>();
  let skipped = 0;
  const portless: string[] = [];
  for (const slice of slices) {
    let port: number | undefined;
    if (portName !== undefined) port = slice.ports.get(portName);
    else if (slice.ports.size === 1) port = slice.ports.values().next().value;
    if (port === undefined) {
      if (slice.endpoints.length > 0) portless.push(slice.name);
      skipped += slice.endpoints.length;
      continue;
    }
    for (const e of slice.endpoints) {
      const address = e.address === undefined ? undefined : addressOf(e.address, port, slice.addressType);
      if (address === undefined) {
        skipped++;
        continue;
      }
      const status = endpointStatus(e);
      const held = byId.get(address);
      if (held !== undefined && RANK[held.status] >= RANK[status]) continue;
      byId.set(address, { id: address, address, locality: e.zone, status });
    }
  }
  const backends = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  let ready = 0;
  for (const b of backends) if (b.status === 'ready') ready++;
  return { backends, skipped, portless, ready };
}
