/**
 * Local resource errors (EMFILE, ENFILE, ENOBUFS, ...) on the connect path
 * are this host's, never the backend's: no failure count, no ejection, no
 * PeakEWMA sample; the client is refused. In-process with an injected socket
 * factory here; for real (a child `poise proxy` under `ulimit -n 64` with 200
 * clients) in test/integration/cli/proxy-local-errors.test.ts.
 */
import net from 'node:net';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { connect } from '../../src/outbound/connect.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { echoServer } from '../helpers/echo-server.js';
import { rejection } from '../helpers/thrown.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A socket factory whose sockets fail with `code` as net.connect's would. */
function failing(code: string) {
  return (): net.Socket => {
    const s = new net.Socket();
    process.nextTick(() => s.destroy(Object.assign(new Error(`connect ${code}`), { code, errno: -24, syscall: 'connect' })));
    return s;
  };
}

describe('local errors on connect', () => {
  it.each(['EMFILE', 'ENFILE', 'ENOBUFS', 'ENOMEM', 'EADDRNOTAVAIL'])(
    '%s: refused as CapacityExhausted after one attempt; the backend keeps no failure, ejection or sample',
    async (code) => {
      const backend = await echoServer('a');
      onTestFinished(() => backend.close());
      const { port } = backend;
      const balancer = new Balancer({ capacity: 4 });
      cleanups.push(() => balancer.close());
      balancer.update([{ id: 'a', address: `127.0.0.1:${port}` }]);
      const router = balancer.router({ policy: 'p2c:connectionTime', ejection: { consecutiveFailures: 1 } });
      const before = balancer.table.stats(0);
      for (let i = 0; i < 20; i++) {
        const err = await rejection(connect(router, { createSocket: failing(code), attempts: 3 }));
        expect(err).toMatchObject({ code: 'CapacityExhausted', cause: { code } });
      }
      const after = balancer.table.stats(0);
      expect(after.failures).toBe(0);
      expect(after.ejections).toBe(0);
      expect(after.ejectedUntilMs).toBe(before.ejectedUntilMs);
      expect(after.connectEstimateUs).toBe(before.connectEstimateUs);
      expect(after.connections).toBe(0);
      expect(router.openLeases).toBe(0);
      // The same backend is still eligible: a real connect goes through.
      const { socket } = await connect(router);
      socket.destroy();
    },
  );

  it('contrast: a backend error (ECONNREFUSED) through the same factory does count and ejects', async () => {
    const backend = await echoServer('a');
    onTestFinished(() => backend.close());
    const { port } = backend;
    const balancer = new Balancer({ capacity: 4 });
    cleanups.push(() => balancer.close());
    balancer.update([{ id: 'a', address: `127.0.0.1:${port}` }]);
    const router = balancer.router({ policy: 'p2c:connectionTime', ejection: { consecutiveFailures: 1 } });
    await expect(connect(router, { createSocket: failing('ECONNREFUSED'), attempts: 1 })).rejects.toMatchObject({
      code: 'NoEligibleCandidates',
    });
    expect(balancer.table.stats(0).ejections).toBe(1);
  });
});
