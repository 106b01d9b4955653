/**
 * A Fastify gateway that balances its upstreams per request through poise
 * (docs/fastify.md explains it line by line; test/http/fastify-gateway.test.ts
 * runs it against three real upstreams).
 *
 * `@fastify/http-proxy` and `@fastify/reply-from` accept any undici
 * Dispatcher as their `undici` option; a `PoiseDispatcher` is one. They send
 * every request to the dispatcher's origin (`http://upstream`, a name, never
 * resolved); the dispatcher picks an upstream for each request with the
 * Balancer's policy (PeakEWMA p2c by default), sends it on that upstream's
 * keep-alive pool, retries it on another upstream when it may, and records
 * the outcome and latency for the next pick.
 *
 * @example
 * const gw = await createGateway({ upstreams: [{ id: 'a', address: '10.0.0.1:8080' }, { id: 'b', address: '10.0.0.2:8080' }] });
 * await gw.app.listen({ port: 3000 });
 */
import httpProxy from '@fastify/http-proxy';
import replyFrom from '@fastify/reply-from';
import Fastify, { type FastifyInstance } from 'fastify';
import { PoiseDispatcher } from 'poise-lb/http';
import { Balancer, type BackendSpec, type RouterOptions } from 'poise-lb/runtime';

export interface GatewayOptions {
  /** The upstreams, `{ id, address: 'host:port' }`; `gateway.balancer.update(...)` changes them later. */
  upstreams: readonly BackendSpec[];
  /** The router's options; `{ policy: 'p2c:latency' }` unless given. */
  router?: RouterOptions;
}

export interface Gateway {
  readonly app: FastifyInstance;
  readonly balancer: Balancer;
  readonly dispatcher: PoiseDispatcher;
}

/** The name every proxied request is addressed to; the dispatcher turns it into a chosen upstream. */
const ORIGIN = 'http://upstream';

export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const balancer = new Balancer();
  balancer.update(options.upstreams);
  const dispatcher = new PoiseDispatcher({
    router: balancer.router(options.router ?? { policy: 'p2c:latency' }),
    origin: ORIGIN,
    pool: { connections: 16, keepAliveTimeout: 10_000 }, // each upstream's keep-alive undici Pool
  });
  const app = Fastify();

  // 1. A whole prefix proxied: GET /api/users/7 → GET /users/7 on the upstream poise picks for it.
  //    `destroyAgent: false` (the default) leaves the dispatcher to us: two plugins share it.
  await app.register(httpProxy, { upstream: ORIGIN, prefix: '/api', undici: dispatcher });

  // 2. Hand-written routes with reply.from(): here Fastify parses the JSON body first, so reply-from
  //    sends it as a string, which the dispatcher may replay on another upstream after a refused connect.
  await app.register(async (scope) => {
    await scope.register(replyFrom, { base: ORIGIN, undici: dispatcher });
    scope.get<{ Params: { id: string } }>('/orders/:id', (request, reply) => reply.from(`/orders/${request.params.id}`));
    scope.post('/orders', (_request, reply) => reply.from('/orders'));
  });

  // The gateway owns the dispatcher and the balancer: close them with it.
  app.addHook('onClose', async () => {
    await dispatcher.close();
    balancer.close();
  });
  return { app, balancer, dispatcher };
}
