/**
 * Registration with grpc-js: the `poise` load-balancing policy and the
 * `poise:` resolver scheme, once per loaded grpc-js (idempotent), on the
 * first {@link registerPoiseCluster}.
 */
import * as grpc from '@grpc/grpc-js';
import { PoiseLoadBalancer } from './balancer.js';
import { type ResolvedLbConfig, resolveLbConfig, type PoiseLbConfig } from './config.js';
import { PoiseLoadBalancingConfig } from './lb-config.js';
import { type ClusterOptions, type ClusterTarget, dropCluster, putCluster } from './registry.js';
import { POISE, PoiseResolver } from './resolver.js';

let registered = false;

function ensureRegistered(): void {
  if (registered) return;
  registered = true;
  grpc.experimental.registerLoadBalancerType(POISE, PoiseLoadBalancer, PoiseLoadBalancingConfig);
  grpc.experimental.registerResolver(POISE, PoiseResolver);
}

/**
 * Registers cluster `name` in this thread, over a Balancer's shared table
 * (the Balancer in the owner thread, `balancer.attachment()` in a worker),
 * and the `poise` policy and `poise:` scheme with grpc-js. A channel to
 * `poise:///name` then takes its addresses from the cluster's membership
 * and balances its calls with poise. Returns a function that forgets the
 * name (channels already open keep routing). Throws `InvalidConfig` for a
 * bad name, target or option.
 *
 * `options.admission` gives the cluster admission bands: each channel then
 * admits its calls through an `AdmissionGate` with these options over its
 * router, a call's band read from the metadata key the `poise` block names
 * (`bandMetadata`; docs/grpc.md).
 *
 * @example
 * registerPoiseCluster('orders', balancer);
 * const client = new OrdersClient('poise:///orders', credentials.createInsecure());
 */
export function registerPoiseCluster(name: string, target: ClusterTarget, options?: ClusterOptions): () => void {
  ensureRegistered();
  const cluster = putCluster(name, target, options);
  return () => {
    dropCluster(cluster.name);
  };
}

/**
 * The `grpc.service_config` channel option that selects the `poise` policy
 * with `config` (validated now: throws `InvalidConfig` naming the field).
 *
 * @example
 * new Client('poise:///orders', creds, { 'grpc.service_config': poiseServiceConfig({ policy: 'p2c:requests' }) });
 */
export function poiseServiceConfig(config: PoiseLbConfig = {}, methodConfig: object[] = []): string {
  const resolved: ResolvedLbConfig = resolveLbConfig(config);
  return JSON.stringify({ loadBalancingConfig: [{ [POISE]: resolved.raw }], methodConfig });
}
