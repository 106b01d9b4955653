/**
 * The discovery scheme registry: a source as the user writes it (the CLI's
 * `--discover`, a config string) to the {@link MembershipSource} that
 * follows it (grpc-js's resolver registry is the model: one scheme, one
 * factory).
 *
 * - `dns:NAME:PORT` — {@link DnsMembership} (A and AAAA records);
 * - `srv:SERVICE` — {@link SrvMembership} (SRV records, targets resolved);
 * - `k8s:NAMESPACE/SERVICE[:PORT-NAME]` — Kubernetes EndpointSlices.
 *
 * A query string sets the DNS servers of `dns:` and `srv:`:
 * `dns:api.internal:8080?server=10.0.0.2&server=10.0.0.3:5353` (the
 * `servers` option, e.g. the CLI's `--dns-server`, applies when the string
 * names none).
 */
import { PoiseError, invalidConfig } from '../core/errors.js';
import type { MembershipSource } from '../membership/source.js';
import { DnsMembership, type DnsMembershipOptions } from './dns.js';
import { SrvMembership, type SrvMembershipOptions } from './srv.js';
import { kubernetesSource, type KubernetesSourceOptions } from './kubernetes.js';

/**
 * Options of {@link discoverySource}: a DNS source's options for `dns:` and
 * `srv:`; `kubernetes` holds the Kubernetes source's for `k8s:` (which also
 * takes `logger`, `timers` and `initial` from here unless `kubernetes` sets them).
 */
export type DiscoveryOptions = DnsMembershipOptions & SrvMembershipOptions & { kubernetes?: KubernetesSourceOptions };

/** The schemes {@link discoverySource} knows. */
export const DISCOVERY_SCHEMES = ['dns', 'srv', 'k8s'] as const;

/** Splits `target?server=a&server=b` into the target and its servers (none: undefined). */
function splitServers(rest: string, field: string): { target: string; servers: string[] | undefined } {
  const q = rest.indexOf('?');
  if (q < 0) return { target: rest, servers: undefined };
  const params = new URLSearchParams(rest.slice(q + 1));
  for (const key of params.keys()) if (key !== 'server') invalidConfig(`${field} ?${key}`, 'unknown parameter (accepted: server)', rest);
  const servers = params.getAll('server');
  if (servers.length === 0) invalidConfig(field, 'has "?" but no server=IP[:PORT]', rest);
  return { target: rest.slice(0, q), servers };
}

/** Builds a source; its own errors (target, options.x) say which `field` (--discover) they belong to. */
function withField(field: string, build: () => MembershipSource): MembershipSource {
  try {
    return build();
  } catch (err) {
    if (err instanceof PoiseError)
      throw new PoiseError(err.code, `${field}: ${err.message}`, { field: `${field}.${err.field ?? ''}`, cause: err });
    throw err;
  }
}

/**
 * The membership source `spec` names (see the file comment). Throws
 * `InvalidConfig` naming `field` for an unknown scheme or a bad target.
 *
 * @example
 * const source = discoverySource('srv:_pg._tcp.db.internal?server=10.0.0.2');
 * await bindMembership(source, balancer);
 */
export function discoverySource(spec: string, options: DiscoveryOptions = {}, field = 'discover'): MembershipSource {
  if (typeof spec !== 'string') return invalidConfig(field, 'must be a string such as "dns:api.internal:8080"', spec);
  const colon = spec.indexOf(':');
  const scheme = colon < 0 ? '' : spec.slice(0, colon);
  const rest = spec.slice(colon + 1);
  switch (scheme) {
    case 'dns':
    case 'srv': {
      const { target, servers } = splitServers(rest, field);
      const { kubernetes: _k8s, ...dnsOptions } = options;
      const opts = servers === undefined ? dnsOptions : { ...dnsOptions, servers };
      return withField(field, () =>
        scheme === 'dns' ? new DnsMembership(target, opts as DnsMembershipOptions) : new SrvMembership(target, opts),
      );
    }
    case 'k8s': {
      const k8s: KubernetesSourceOptions = { ...options.kubernetes };
      if (k8s.logger === undefined && options.logger !== undefined) k8s.logger = options.logger;
      if (k8s.timers === undefined && options.timers !== undefined) k8s.timers = options.timers;
      if (k8s.initial === undefined && options.initial !== undefined) k8s.initial = options.initial;
      return withField(field, () => kubernetesSource(rest, k8s));
    }
    default:
      return invalidConfig(
        field,
        `must be ${DISCOVERY_SCHEMES.map((s) => `${s}:...`).join(', ')} (dns:api.internal:8080, srv:_pg._tcp.db.internal, k8s:namespace/service[:port-name])`,
        spec,
      );
  }
}
