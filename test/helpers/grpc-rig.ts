/**
 * The poise-lb/grpc tests' rig: N real grpc-js servers on loopback, a
 * Balancer over them registered as a cluster, and a client on
 * `poise:///<cluster>`; lease counts; a closed loop of unary calls.
 */
import * as grpc from '@grpc/grpc-js';
import { registerPoiseCluster, poiseServiceConfig, type ClusterOptions } from '../../src/grpc.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { BackendSpec } from '../../src/core/spec.js';
import { TestClient, type TestClientInstance, type TestServer, echo, startServer } from './grpc-servers.js';

const logger = createLogger({ level: 'silent' });
let clusterSeq = 0;

/** What {@link grpcRig} built; `cleanup` holds its teardown, in order of creation. */
export interface GrpcRig {
  servers: TestServer[];
  balancer: Balancer;
  client: TestClientInstance;
  name: string;
}

/** Extra knobs of {@link grpcRig}. */
export interface GrpcRigOptions {
  /** The `poise` block (poiseServiceConfig), or undefined for none. */
  config?: Parameters<typeof poiseServiceConfig>[0];
  /** The service config's methodConfig entries (retry policies). */
  methodConfig?: object[];
  /** registerPoiseCluster's options (admission bands). */
  cluster?: ClusterOptions;
  /** Extra fields of every backend spec (maxInflight). */
  spec?: Partial<BackendSpec>;
}

/** Starts servers with `delays` (ms) and the rest; pushes every teardown onto `cleanup`. */
export async function grpcRig(delays: number[], cleanup: (() => unknown)[], opts: GrpcRigOptions = {}): Promise<GrpcRig> {
  const servers: TestServer[] = [];
  for (const [i, d] of delays.entries()) servers.push(await startServer(`s${i}`, d));
  cleanup.push(() => Promise.all(servers.map((s) => s.stop())));
  const balancer = new Balancer({ logger });
  cleanup.push(() => balancer.close());
  balancer.update(servers.map((s) => ({ id: s.name, address: s.address, ...opts.spec })));
  const name = `c${++clusterSeq}`;
  cleanup.push(registerPoiseCluster(name, balancer, opts.cluster));
  const options: grpc.ChannelOptions =
    opts.config === undefined && opts.methodConfig === undefined
      ? {}
      : { 'grpc.service_config': poiseServiceConfig(opts.config ?? {}, opts.methodConfig ?? []) };
  const client = new TestClient(`poise:///${name}`, grpc.credentials.createInsecure(), options);
  cleanup.push(() => client.close());
  return { servers, balancer, client, name };
}

/** Request leases open on every slot of the balancer's table. */
export function leases(balancer: Balancer): number {
  return balancer.slotEntries().reduce((n, e) => n + balancer.table.requests(e.slot), 0);
}

/** Runs `total` unary calls, `concurrency` at a time (closed loop); returns the answers by server. */
export async function closedLoop(client: TestClientInstance, total: number, concurrency: number): Promise<Map<string, number>> {
  const by = new Map<string, number>();
  let sent = 0;
  const worker = async (): Promise<void> => {
    while (sent < total) {
      sent++;
      const who = await echo(client);
      by.set(who, (by.get(who) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return by;
}
