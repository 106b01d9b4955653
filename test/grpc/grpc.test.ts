/**
 * poise-lb/grpc over real grpc-js servers on loopback, in one thread:
 * the `poise` policy's distribution, leases held and given back, the
 * resolver following membership, ORCA trailers, bad configuration.
 */
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { registerPoiseCluster, poiseServiceConfig } from '../../src/grpc.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { closedLoop, grpcRig, type GrpcRigOptions, leases } from '../helpers/grpc-rig.js';
import { TestClient, echo, encodeOrca, startServer } from '../helpers/grpc-servers.js';
import { slotOf } from '../helpers/http-rig.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });
const cleanup: (() => unknown)[] = [];

afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

let clusterSeq = 0;

const rig = (delays: number[], config?: GrpcRigOptions['config']) => grpcRig(delays, cleanup, { config });

describe('poise-lb/grpc: the poise policy', () => {
  it('four servers, one 10x slower: p2c:latency brings its share of unary calls below 1 % within 2,000 calls', async () => {
    // Client and servers share this thread's event loop, whose own delay is in every latency: the servers'
    // delays (20 ms, 200 ms) are chosen well above it, so that the slow one stays 10x slower as measured.
    const { servers, client, balancer } = await rig([20, 20, 20, 200]);
    const slow = servers[3]!;
    // The first 1,000 calls: the slow server is found out (its first calls take 200 ms before any sample says so).
    await closedLoop(client, 1000, 8);
    const early = slow.calls;
    // The next 1,000: its share has fallen below 1 %.
    const by = await closedLoop(client, 1000, 8);
    expect([...by.values()].reduce((a, b) => a + b, 0)).toBe(1000);
    expect((slow.calls - early) / 1000).toBeLessThan(0.01);
    // Each fast server took a real share (the policy did not collapse onto one).
    for (const s of servers.slice(0, 3)) expect(by.get(s.name)).toBeGreaterThan(1000 * 0.15);
    expect(leases(balancer)).toBe(0);
  }, 180_000);

  it('a streaming call holds one lease for its life, and gives it back when it ends', async () => {
    const { servers, client, balancer } = await rig([0, 0], { policy: 'p2c:requests' });
    await echo(client); // connected
    const streams = Array.from({ length: 4 }, () => client.watch(Buffer.alloc(0)));
    const first = streams.map((st) => new Promise<void>((resolve) => st.once('data', () => resolve())));
    await Promise.all(first);
    expect(leases(balancer)).toBe(4);
    // p2c over two backends is the least-loaded one: 2 and 2.
    for (const s of servers) expect(balancer.table.requests(slotOf(balancer, s.name))).toBe(2);
    for (const st of streams) {
      st.on('error', () => {});
      st.cancel();
    }
    await until(() => leases(balancer) === 0, 'the streams leases back');
    await until(() => servers.every((s) => s.streams === 0), 'the servers saw the cancels');
  });

  it('a server killed mid-stream: the caller gets the stream error, lease counts go back to 0, calls go to the others', async () => {
    const { servers, client, balancer } = await rig([0, 0, 0], { policy: 'p2c:requests' });
    await echo(client);
    const streams = Array.from({ length: 6 }, () => client.watch(Buffer.alloc(0)));
    const who = await Promise.all(
      streams.map((st) => new Promise<string>((resolve) => st.once('data', (b: Buffer) => resolve(b.toString())))),
    );
    expect(leases(balancer)).toBe(6);
    const victim = servers[0]!;
    const onVictim = streams.filter((_, i) => who[i] === victim.name);
    expect(onVictim.length).toBeGreaterThan(0);
    const errors = onVictim.map((st) => new Promise<grpc.ServiceError>((resolve) => st.once('error', resolve)));
    victim.kill();
    const errs = await Promise.all(errors);
    // grpc-js reports a connection lost under a stream as UNAVAILABLE ("Connection dropped") or, for a
    // stream whose RST_STREAM came first, INTERNAL: never OK, never CANCELLED (the caller cancelled nothing).
    for (const e of errs) expect([grpc.status.UNAVAILABLE, grpc.status.INTERNAL]).toContain(e.code);
    await until(() => leases(balancer) === 6 - onVictim.length, 'the dead streams leases back');
    // The dead server's subchannel is not READY: no call goes there.
    const by = await closedLoop(client, 60, 4);
    expect(by.get(victim.name)).toBeUndefined();
    for (const st of streams) {
      st.on('error', () => {});
      st.cancel();
    }
    await until(() => leases(balancer) === 0, 'every lease back');
  });

  it('a membership change reaches the channel at once: a server added gets calls, one removed gets none', async () => {
    const { servers, client, balancer } = await rig([0, 0], { policy: 'round-robin' });
    await closedLoop(client, 20, 2);
    const extra = await startServer('s-new', 0);
    cleanup.push(() => extra.stop());
    balancer.update([...servers.map((s) => ({ id: s.name, address: s.address })), { id: extra.name, address: extra.address }]);
    await until(async () => {
      await echo(client);
      return extra.calls > 0;
    }, 'the new server answers a call');
    // Round robin over three READY members: a round of 30 gives it its third.
    const before = extra.calls;
    await closedLoop(client, 30, 1);
    expect(extra.calls - before).toBe(10);
    balancer.update([{ id: extra.name, address: extra.address }]);
    await until(async () => {
      const b0 = servers[0]!.calls + servers[1]!.calls;
      await closedLoop(client, 4, 1);
      return servers[0]!.calls + servers[1]!.calls === b0;
    }, 'the removed servers get no more calls');
    expect(leases(balancer)).toBe(0);
  });

  it('status outcomes: UNAVAILABLE answers are failures (passive health ejects), application errors are not', async () => {
    const balancerRig = await rig([0, 0], { policy: 'round-robin' });
    const { servers, client, balancer } = balancerRig;
    await closedLoop(client, 4, 1);
    servers[0]!.failWith = grpc.status.NOT_FOUND;
    for (let i = 0; i < 10; i++) await echo(client).catch(() => {});
    // NOT_FOUND is the application's answer: the backend stays in, still taking its half.
    const s0 = slotOf(balancer, 's0');
    expect(balancer.table.ejectedForMs(s0)).toBe(0);
    servers[0]!.failWith = grpc.status.UNAVAILABLE;
    await until(async () => {
      await echo(client).catch(() => {});
      return balancer.table.ejectedForMs(s0) > 0;
    }, 's0 ejected by passive health after UNAVAILABLE answers');
    const before = servers[0]!.calls;
    const by = await closedLoop(client, 10, 1);
    expect(by.get('s1')).toBe(10);
    expect(servers[0]!.calls).toBe(before);
  });

  it('an ORCA trailer (endpoint-load-metrics-bin) reaches the slot report words', async () => {
    const { servers, client, balancer } = await rig([0]);
    servers[0]!.orca = encodeOrca({ 1: 0.25, 6: 120, 7: 2, 9: 0.5 });
    await echo(client);
    const slot = slotOf(balancer, 's0');
    const out = { utilization: 0, qps: 0, eps: 0, at: 0, since: 0 };
    // Any age passes (expiry 2^30 ms): this reads what the call recorded, whatever the clock.
    expect(balancer.ownerTable.reported.readReport(slot, 0, 2 ** 30, out)).toBe(true);
    expect(out.utilization).toBe(0.5);
    expect(out.qps).toBe(120);
    expect(out.eps).toBe(2);
  });
});

describe('poise-lb/grpc: bad configuration fails the channel, naming the field', () => {
  it.each([
    [{ poise: { policy: 'fastest' } }, 'loadBalancingConfig.poise.policy'],
    [{ poise: { statusOutcomes: { NOPE: 'failure' } } }, 'loadBalancingConfig.poise.statusOutcomes.NOPE'],
    [{ poise: { maxLatencySampleMs: -1 } }, 'loadBalancingConfig.poise.maxLatencySampleMs'],
    [{ poise: { polcy: 'p2c' } }, 'loadBalancingConfig.poise.polcy'],
    // The cluster is registered without { admission }: the admission fields would be ignored.
    [{ poise: { bandMetadata: 'x-band' } }, 'loadBalancingConfig.poise.bandMetadata'],
    [{ poise: { admissionTimeoutMs: 100 } }, 'loadBalancingConfig.poise.admissionTimeoutMs'],
  ])('%j → UNAVAILABLE naming %s', async (block, field) => {
    const s = await startServer('s0');
    cleanup.push(() => s.stop());
    const balancer = new Balancer({ logger });
    cleanup.push(() => balancer.close());
    balancer.update([{ id: 's0', address: s.address }]);
    const name = `bad${++clusterSeq}`;
    cleanup.push(registerPoiseCluster(name, balancer));
    const client = new TestClient(`poise:///${name}`, grpc.credentials.createInsecure(), {
      'grpc.service_config': JSON.stringify({ loadBalancingConfig: [block] }),
    });
    cleanup.push(() => client.close());
    const err = await echo(client).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(err?.details).toContain(field);
    expect(s.calls).toBe(0);
  });

  it('poiseServiceConfig validates at once: InvalidConfig naming the field', () => {
    expect(() => poiseServiceConfig({ policy: 'fastest' as never })).toThrow(/loadBalancingConfig\.poise\.policy/);
  });

  it('a cluster not registered in this thread: UNAVAILABLE naming it', async () => {
    const client = new TestClient('poise:///nowhere', grpc.credentials.createInsecure());
    cleanup.push(() => client.close());
    const err = await echo(client).then(
      () => undefined,
      (e: grpc.ServiceError) => e,
    );
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
    expect(err?.details).toContain('no cluster "nowhere"');
  });
});
