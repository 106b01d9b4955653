/**
 * poise-lb/discovery — membership sources that find backends where services
 * publish them: DNS A/AAAA (`dns:`), DNS SRV (`srv:`), Kubernetes EndpointSlices (`k8s:`), and the scheme
 * registry the CLI's `--discover` goes through. Loads no package beyond
 * Node's own (`node:dns`). Explicit named exports only.
 */
export { DnsMembership, type DnsMembershipOptions, type DnsResolver, type ResolverOptions } from './discovery/dns.js';
export { SrvMembership, type SrvMembershipOptions } from './discovery/srv.js';
export {
  KubernetesMembership,
  kubernetesSource,
  type KubernetesSourceOptions,
} from './discovery/kubernetes.js';
export { discoverySource, DISCOVERY_SCHEMES, type DiscoveryOptions } from './discovery/schemes.js';
export type { PollingOptions } from './discovery/polling.js';
export {
  DISCOVERY_ERROR_KINDS,
  discoveryStatusOf,
  type DiscoveryErrorKind,
  type DiscoveryState,
  type DiscoveryStatus,
} from './discovery/status.js';
