/**
 * Two threads, one table: a worker thread's grpc-js channel (the built
 * poise-lb/grpc, registered from the Balancer's attachment) and the owner's
 * channel pick with p2c:requests over two servers, each seeing the other's
 * streams in flight. With two backends p2c compares both, so every pick goes
 * to the one with fewer streams open across both threads (a tie either way).
 */
import { Worker } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { poiseServiceConfig, registerPoiseCluster } from '../../src/grpc.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { TestClient, type TestServer, echo, startServer } from '../helpers/grpc-servers.js';
import { slotOf } from '../helpers/http-rig.js';
import { until } from '../helpers/until.js';

const WORKER = new URL('../fixtures/grpc-worker.mjs', import.meta.url);
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function next(worker: Worker): Promise<string> {
  return new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
}

describe('poise-lb/grpc in two threads over one table', () => {
  it("each thread's picks see the other thread's streams in flight", async () => {
    const servers: TestServer[] = [await startServer('s0'), await startServer('s1')];
    cleanup.push(() => Promise.all(servers.map((s) => s.stop())));
    const balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
    cleanup.push(() => balancer.close());
    balancer.update(servers.map((s) => ({ id: s.name, address: s.address })));
    cleanup.push(registerPoiseCluster('two-threads', balancer));
    const load = (name: string): number => balancer.table.requests(slotOf(balancer, name));
    const lighter = (): string | undefined => (load('s0') < load('s1') ? 's0' : load('s1') < load('s0') ? 's1' : undefined);

    const worker = new Worker(WORKER, { workerData: { cluster: 'two-threads', attachment: balancer.attachment() } });
    balancer.watchWorker(worker);
    cleanup.push(() => worker.terminate());
    expect(await next(worker)).toBe('ready');

    const client = new TestClient('poise:///two-threads', grpc.credentials.createInsecure(), {
      'grpc.service_config': poiseServiceConfig({ policy: 'p2c:requests' }),
    });
    cleanup.push(() => client.close());
    const ownerStreams: grpc.ClientReadableStream<Buffer>[] = [];
    const ownerOpen = async (): Promise<string> => {
      const st = client.watch(Buffer.alloc(0));
      st.on('error', () => {});
      ownerStreams.push(st);
      return new Promise((resolve) => st.once('data', (b: Buffer) => resolve(b.toString())));
    };
    const workerOpen = (): Promise<string> => {
      const reply = next(worker);
      worker.postMessage('open');
      return reply;
    };

    // The owner's channel picks only over subchannels that are READY: unary calls (each lease back at its end)
    // until both servers answered, so both are, before any assertion rests on the choice between them.
    const seen = new Set<string>();
    for (let i = 0; i < 200 && seen.size < 2; i++) seen.add(await echo(client));
    expect([...seen].sort()).toEqual(['s0', 's1']);
    await until(() => load('s0') + load('s1') === 0, 'the warm-up calls back');
    // Worker: three streams (2 and 1). Owner: its stream must go to the worker's lighter server.
    for (let i = 0; i < 3; i++) await workerOpen();
    expect(load('s0') + load('s1')).toBe(3);
    const forOwner = lighter();
    expect(forOwner).toBeDefined();
    expect(await ownerOpen()).toBe(forOwner);
    expect([load('s0'), load('s1')]).toEqual([2, 2]);
    // Owner: one more (a tie: either). Worker: its next must go to the owner-made lighter server.
    await ownerOpen();
    const forWorker = lighter();
    expect(forWorker).toBeDefined();
    expect(await workerOpen()).toBe(forWorker);
    expect([load('s0'), load('s1')]).toEqual([3, 3]);

    const closed = next(worker);
    worker.postMessage('close');
    expect(await closed).toBe('closed');
    for (const st of ownerStreams) st.cancel();
    await until(() => load('s0') + load('s1') === 0, 'every stream lease of both threads back');
  });
});
