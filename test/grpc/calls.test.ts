/**
 * poise-lb/grpc, one call at a time, over real grpc-js servers on loopback:
 * the latency sample is the time to the first response message (a long
 * stream's is not its life), admission bands from metadata (a low band
 * waits and is refused while a high band passes), and grpc-js's own retry
 * policy going through the poise picker and the retry budget.
 */
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { GrpcCounters } from '../../src/grpc.js';
import { findCluster } from '../../src/grpc/registry.js';
import { closedLoop, grpcRig, type GrpcRigOptions, leases } from '../helpers/grpc-rig.js';
import { echo } from '../helpers/grpc-servers.js';
import { slotOf } from '../helpers/http-rig.js';
import { until } from '../helpers/until.js';

const cleanup: (() => unknown)[] = [];

afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** The one channel balancing over cluster `name` in this thread. */
function channelOf(name: string) {
  const channels = [...(findCluster(name)?.channels ?? [])];
  expect(channels).toHaveLength(1);
  return channels[0]!;
}

/** A unary call with `band` in metadata key `x-band`; resolves to the server's name or the ServiceError. */
function banded(client: Parameters<typeof echo>[0], band: number): Promise<string | grpc.ServiceError> {
  const md = new grpc.Metadata();
  md.set('x-band', String(band));
  return echo(client, md).catch((e: grpc.ServiceError) => e);
}

describe('poise-lb/grpc: the latency sample', () => {
  it('a stream that answers at once and then streams for 2 s samples its first message, not its 2 s', async () => {
    const { servers, client, balancer } = await grpcRig([0], cleanup, { config: { policy: 'p2c:latency' } });
    await echo(client);
    const slot = slotOf(balancer, 's0');
    servers[0]!.streamForMs = 2000;
    const st = client.watch(Buffer.alloc(0));
    let messages = 0;
    st.on('data', () => messages++);
    await new Promise<void>((resolve, reject) => {
      st.on('end', resolve);
      st.on('error', reject);
    });
    // It did stream for its 2 s (a message every 100 ms), under one lease.
    expect(messages).toBeGreaterThan(5);
    await until(() => leases(balancer) === 0, 'the stream lease back');
    // PeakEWMA takes a larger sample at once (the peak): a 2 s sample would read 2,000,000 µs. The time to
    // the first message is a few ms even on a loaded machine; 0.5 s is the order-of-magnitude bound.
    expect(balancer.table.stats(slot).latencyEstimateUs).toBeLessThan(500_000);
  }, 30_000);
});

describe('poise-lb/grpc: admission bands from metadata', () => {
  it('a low band waits, then is refused when its queue is full, while a high band passes; counters back to 0', async () => {
    // Capacity 2; band 10 fills it (ceiling 1), band 1 enters only while the load is below 1 (ceiling 0).
    const { servers, client, balancer, name } = await grpcRig([0, 0], cleanup, {
      config: { policy: 'p2c:requests', bandMetadata: 'x-band' },
      cluster: { admission: { bands: [10, 1], ceilings: [1, 0], capacity: 2, maxQueue: 1 } },
    });
    expect(await banded(client, 1)).toMatch(/^s[01]$/); // an idle pool admits every band
    // A band-10 stream holds one unit of the two.
    const md = new grpc.Metadata();
    md.set('x-band', '10');
    const stream = client.watch(Buffer.alloc(0), md);
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    expect(leases(balancer)).toBe(1);
    const received = (): number => servers[0]!.received + servers[1]!.received;
    const before = received();
    // Band 1 must wait (load 1 > its limit); its queue (maxQueue 1) is then full: the next band-1 call is refused.
    const waiting = banded(client, 1);
    await until(() => channelOf(name).admissionStats()!.waiting === 1, 'the band-1 call waits');
    const refused = await banded(client, 1);
    expect(refused).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    expect((refused as grpc.ServiceError).details).toContain('already holds 1 waiters');
    // Band 10 passes meanwhile.
    for (let i = 0; i < 5; i++) expect(await banded(client, 10)).toMatch(/^s[01]$/);
    expect(received()).toBe(before + 5);
    // The stream ends: the waiting band-1 call is admitted and answered.
    stream.on('error', () => {});
    stream.cancel();
    expect(await waiting).toMatch(/^s[01]$/);
    await until(() => leases(balancer) === 0, 'every lease back');
    const stats = channelOf(name).admissionStats()!;
    expect(stats.waiting).toBe(0);
    const low = stats.bands.find((b) => b.band === 1)!;
    expect(low.queued).toBe(0);
    expect(low.admittedAfterWait).toBe(1);
    expect(low.rejected.QueueFull).toBe(1);
  }, 30_000);

  it('a band the gate has not: INTERNAL naming the bands and the metadata key, nothing sent', async () => {
    const { servers, client } = await grpcRig([0], cleanup, {
      config: { bandMetadata: 'x-band' },
      cluster: { admission: { bands: [10, 1], minCeiling: 0.5 } },
    });
    const err = await banded(client, 7);
    expect(err).toMatchObject({ code: grpc.status.INTERNAL });
    expect((err as grpc.ServiceError).details).toContain("must be one of the gate's bands (10, 1)");
    expect((err as grpc.ServiceError).details).toContain('metadata x-band');
    expect(servers[0]!.received).toBe(0);
  });

  it('a call that waited past admissionTimeoutMs: RESOURCE_EXHAUSTED (QueueTimeout), its lease never taken', async () => {
    const { client, balancer, name } = await grpcRig([0], cleanup, {
      config: { policy: 'p2c:requests', bandMetadata: 'x-band', admissionTimeoutMs: 50 },
      cluster: { admission: { bands: [10, 1], ceilings: [1, 0], capacity: 1 } },
    });
    await echo(client);
    const md = new grpc.Metadata();
    md.set('x-band', '10');
    const stream = client.watch(Buffer.alloc(0), md);
    await new Promise<void>((resolve) => stream.once('data', () => resolve()));
    const err = await banded(client, 1);
    expect(err).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    expect((err as grpc.ServiceError).details).toContain('waited 50 ms');
    stream.on('error', () => {});
    stream.cancel();
    await until(() => leases(balancer) === 0, 'every lease back');
    expect(
      channelOf(name)
        .admissionStats()!
        .bands.find((b) => b.band === 1)!.rejected.QueueTimeout,
    ).toBe(1);
  });
});

/** grpc-js's retry policy for the test service: UNAVAILABLE and INTERNAL (a stream reset by a dying server) retried. */
const RETRY = [
  {
    name: [{ service: 'poise.test.Test' }],
    retryPolicy: {
      maxAttempts: 3,
      initialBackoff: '0.01s',
      maxBackoff: '0.05s',
      backoffMultiplier: 2,
      retryableStatusCodes: ['UNAVAILABLE', 'INTERNAL'],
    },
  },
];

describe("poise-lb/grpc: grpc-js's own retry policy", () => {
  /** Two servers, then s0 holds its answers; round robin sends two of four calls to it; then it dies (`onKill` just before). */
  async function killedUnderCalls(
    retryBudget: { ratio: number; minRetriesPerSecond: number },
    extra: Pick<GrpcRigOptions, 'cluster'> = {},
    onKill = (): void => {},
  ) {
    const rig = await grpcRig([0, 0], cleanup, { config: { policy: 'round-robin', retryBudget }, methodConfig: RETRY, ...extra });
    await until(async () => {
      await closedLoop(rig.client, 4, 1);
      return rig.servers.every((s) => s.calls > 0);
    }, 'both subchannels READY');
    const victim = rig.servers[0]!;
    victim.delayMs = 10_000;
    victim.received = 0;
    const calls = Array.from({ length: 4 }, () => echo(rig.client).catch((e: grpc.ServiceError) => e));
    await until(() => victim.received === 2, 'two calls wait on s0');
    onKill();
    victim.kill();
    return { ...rig, results: await Promise.all(calls) };
  }

  it('a unary call on a killed server is retried through the poise picker on another server; leases back to 0', async () => {
    const { results, balancer, name } = await killedUnderCalls({ ratio: 1, minRetriesPerSecond: 10 });
    expect(results).toEqual(['s1', 's1', 's1', 's1']);
    const counts = channelOf(name).counts;
    expect(counts.retries).toBeGreaterThanOrEqual(2);
    expect(counts.retriesRefused).toBe(0);
    await until(() => leases(balancer) === 0, 'every lease back');
  }, 30_000);

  it('a retry is not admitted again: with the admission gate full (and no queue), the retries still go out', async () => {
    let saturation = 0;
    const { results, balancer, client } = await killedUnderCalls(
      { ratio: 1, minRetriesPerSecond: 10 },
      { cluster: { admission: { bands: [10], ceilings: [1], saturation: () => saturation, maxQueue: 0 } } },
      () => {
        saturation = 1; // full: a first attempt now would be refused (QueueFull)
      },
    );
    expect(results).toEqual(['s1', 's1', 's1', 's1']);
    // A new call (a first attempt) is refused by the full gate.
    expect(await echo(client).catch((e: grpc.ServiceError) => e.code)).toBe(grpc.status.RESOURCE_EXHAUSTED);
    await until(() => leases(balancer) === 0, 'every lease back');
  }, 30_000);

  it('a retry the spent budget refuses ends the call with UNAVAILABLE, not retried again', async () => {
    const { results, balancer, name } = await killedUnderCalls({ ratio: 0, minRetriesPerSecond: 0 });
    const failed = results.filter((r): r is grpc.ServiceError => typeof r !== 'string');
    expect(failed).toHaveLength(2);
    for (const e of failed) {
      expect(e.code).toBe(grpc.status.UNAVAILABLE);
      expect(e.details).toContain('retry budget is spent');
    }
    expect(channelOf(name).counts.retriesRefused).toBe(2);
    expect(channelOf(name).counts.retries).toBe(0);
    await until(() => leases(balancer) === 0, 'every lease back');
  }, 30_000);
});

describe('poise-lb/grpc: per-backend counters (GrpcCounters, /metrics)', () => {
  it('counts calls started and ended by status class per backend, and ORCA trailers', async () => {
    const counters = GrpcCounters.create({ capacity: 1024 }); // the Balancer's default table capacity
    const { servers, client, balancer } = await grpcRig([0, 0], cleanup, { config: { policy: 'round-robin' }, cluster: { counters } });
    await closedLoop(client, 10, 1);
    servers[0]!.failWith = grpc.status.UNAVAILABLE;
    servers[1]!.failWith = grpc.status.NOT_FOUND;
    servers[1]!.orca = Buffer.from([0xff]); // malformed
    for (let i = 0; i < 4; i++) await echo(client).catch(() => undefined);
    await until(() => leases(balancer) === 0, 'every lease back');
    const f = (id: string) => counters.figures(slotOf(balancer, id), balancer.table.stats(slotOf(balancer, id)).generation);
    const [a, b] = [f('s0'), f('s1')];
    expect(a.started + b.started).toBe(14);
    // ok, cancelled, deadline_exceeded, resource_exhausted, unavailable, error
    expect(a.ended[0]! + b.ended[0]!).toBe(10);
    expect(a.ended[4]).toBe(a.started - a.ended[0]!);
    expect(b.ended[5]).toBe(b.started - b.ended[0]!);
    expect(a.ended[4]! + b.ended[5]!).toBe(4);
    expect(b.loadReportsMalformed).toBe(b.ended[5]);
    expect(a.loadReports + a.loadReportsMalformed).toBe(0);
  });
});
