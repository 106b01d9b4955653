/**
 * TCP_NODELAY on both sockets of a spliced connection, read back from the
 * kernel by a child process (test/helpers/sockopt.ts): the in-process proxy
 * sets it on the accepted client socket and on the upstream socket.
 */
import net from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createLogger } from '../../src/log.js';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { echoServer } from '../helpers/echo-server.js';
import { noDelayOf } from '../helpers/sockopt.js';

describe('TCP_NODELAY', () => {
  it('is set on the accepted client socket and on the upstream socket (read back from the kernel)', async () => {
    const backend = await echoServer('a');
    onTestFinished(() => backend.close());
    const balancer = new Balancer({ capacity: 4 });
    onTestFinished(() => balancer.close());
    balancer.update([{ id: 'a', address: `127.0.0.1:${backend.port}` }]);
    const proxy = new TcpProxy({ router: balancer.router({ policy: 'round-robin' }), port: 0, logger: createLogger({ level: 'silent' }) });
    const { port } = await proxy.listen();
    onTestFinished(async () => {
      await proxy.close();
    });
    const client = net.connect({ host: '127.0.0.1', port });
    onTestFinished(() => void client.destroy());
    client.write('x');
    expect(String(await new Promise<Buffer>((r) => client.once('data', r)))).toBe('a:x');
    const upstreamPort = [...backend.sockets][0]!.remotePort!;
    const [accepted, upstream, ownClient] = noDelayOf(process.pid, [
      [port, client.localPort!],
      [upstreamPort, backend.port],
      [client.localPort!, port],
    ]);
    expect(accepted).toBe(true);
    expect(upstream).toBe(true);
    // The test's own socket never asked for it: the reader tells the two apart.
    expect(ownClient).toBe(false);
  });
});
