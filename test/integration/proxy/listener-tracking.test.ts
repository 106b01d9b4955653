// The listener's list of open sockets (an intrusive list on the sockets, not a Set):
// it counts exactly the clients and upstreams still open whatever order they close in,
// and a close without drain cuts exactly the clients still open. Real loopback sockets,
// the proxy in this thread (no worker), from the build (dist/).
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Balancer } from '../../../dist/src/runtime.js';
import { TcpProxy } from '../../../dist/src/net.js';
import { until } from '../../helpers/until.js';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A backend that keeps every connection open and counts them. */
async function holdingBackend(): Promise<{ port: number; open: () => number }> {
  let open = 0;
  const server = net.createServer((s) => {
    open++;
    s.on('error', () => {});
    s.on('close', () => open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
  return { port: (server.address() as net.AddressInfo).port, open: () => open };
}

/** xorshift32: the close order, replayable from its seed. */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  let x = seed | 0 || 1;
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const j = (x >>> 0) % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe("the proxy listener's open-socket list", () => {
  it.each([1, 7, 42, 1234, 99_991])(
    'counts exactly the open sockets as 60 clients close in a seeded order (seed %i), and a cut takes the rest',
    async (seed) => {
      const backend = await holdingBackend();
      const balancer = new Balancer();
      cleanup.push(() => balancer.close());
      balancer.update([{ id: 'b', address: `127.0.0.1:${backend.port}` }]);
      const proxy = new TcpProxy({ router: balancer.router({ policy: 'round-robin' }), port: 0, host: '127.0.0.1' });
      const { port } = await proxy.listen();
      const listener = (proxy as unknown as { listener: { openSockets: number } }).listener;
      const clients = await Promise.all(
        Array.from(
          { length: 60 },
          () =>
            new Promise<net.Socket>((resolve) => {
              const s = net.connect(port, '127.0.0.1', () => resolve(s));
              s.on('error', () => {});
            }),
        ),
      );
      cleanup.push(() => {
        for (const c of clients) c.destroy();
      });
      await until(() => backend.open() === 60, '60 connections at the backend');
      expect(listener.openSockets).toBe(120);

      // 40 leave, alternately by FIN and by reset, in the seed's order; each check waits for both
      // sockets of the pair to leave the list (upstream included), never for more.
      const leaving = shuffled(clients, seed).slice(0, 40);
      for (let i = 0; i < leaving.length; i++) {
        const c = leaving[i]!;
        if (i % 2 === 0) c.end();
        else c.resetAndDestroy();
        if (i % 8 === 7) await until(() => listener.openSockets === 120 - 2 * (i + 1), `${i + 1} pairs to leave the list`);
      }
      await until(() => listener.openSockets === 40 && backend.open() === 20, 'the 20 remaining pairs');

      const { cut } = await proxy.close();
      expect(cut).toBe(20);
      expect(listener.openSockets).toBe(0);
      await until(() => backend.open() === 0, 'the backend to see every upstream closed');
    },
  );
});
