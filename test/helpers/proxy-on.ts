/** A Balancer over loopback backends and an embedded TcpProxy on a free port, each closed by `cleanups`. */
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { TcpProxy, type TcpProxyOptions } from '../../src/proxy/tcp-proxy.js';
import { captureLog } from './log-capture.js';

/** A Balancer (capacity 16, on `clock` when given) whose members are `backends` on 127.0.0.1, or on `host` (an IPv6 literal) when given. */
export function loopbackBalancer(
  cleanups: Array<() => unknown>,
  backends: Array<{ id: string; port: number; host?: string }>,
  clock?: () => number,
): Balancer {
  const b = new Balancer({ capacity: 16, ...(clock === undefined ? {} : { clock }) });
  b.update(backends.map((x) => ({ id: x.id, address: x.host === undefined ? `127.0.0.1:${x.port}` : `[${x.host}]:${x.port}` })));
  cleanups.push(() => b.close());
  return b;
}

/** A TcpProxy (silent logger unless `opts` gives one) listening on a free port of 127.0.0.1. */
export async function proxyOn(
  cleanups: Array<() => unknown>,
  router: Router,
  opts: Partial<TcpProxyOptions> = {},
): Promise<{ proxy: TcpProxy; port: number }> {
  const proxy = new TcpProxy({ router, port: 0, logger: captureLog('silent').logger, ...opts });
  const { port } = await proxy.listen();
  cleanups.push(() => proxy.close());
  return { proxy, port };
}
