import { describe, expect, it } from 'vitest';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { routerOver } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';

// Bad input from a caller gets a PoiseError naming the field, never a TypeError
// from deep inside, and never a silently ignored option.

describe('TcpProxy options', () => {
  it('TcpProxy checks its options at construction, not at the first client', () => {
    const router = routerOver(['a']);
    const cases: [unknown, string][] = [
      [undefined, 'options: must be an object, got undefined'],
      [{}, 'options.router: must be a Router (or give options.balancer), got undefined'],
      [{ router: {} }, 'options.router: must be a Router, got a object'],
      [{ router, workers: 1 }, 'options.workers: must be an integer in [0, 0], got 1'],
      [{ router, maxConnections: -1 }, 'options.maxConnections: must be an integer in [0, 1048575], got -1'],
      [{ router, attempts: 0 }, 'options.attempts: must be an integer in [1, 100], got 0'],
      [{ router, connectTimeoutMs: -5 }, 'options.connectTimeoutMs: must be a finite number > 0, got -5'],
      [{ router, host: 7 }, 'options.host: must be a non-empty string, got 7'],
      [{ router, key: 'ip' }, 'options.key: must be "client-ip", "client-ip:port" or a function of the client socket, got "ip"'],
      [{ router, clientTimeoutMs: -1 }, 'options.clientTimeoutMs: must be an integer in [0, 2147483647] (milliseconds), got -1'],
      [{ router, serverTimeoutMs: 1.5 }, 'options.serverTimeoutMs: must be an integer in [0, 2147483647] (milliseconds), got 1.5'],
      [{ router, sendProxy: 'v3' }, 'options.sendProxy: must be "v1" or "v2", got "v3"'],
      [{ router, acceptProxy: 'yes' }, 'options.acceptProxy: must be a boolean, got "yes"'],
      [
        { router, acceptProxy: true, acceptProxyTimeoutMs: 0 },
        'options.acceptProxyTimeoutMs: must be an integer in [1, 2147483647] (milliseconds), got 0',
      ],
      [{ router, acceptProxyMaxBytes: 27 }, 'options.acceptProxyMaxBytes: must be an integer in [28, 65551], got 27'],
      [{ router, accessLog: 'stderr' }, 'options.accessLog: must be a pino logger or "stdout", got "stderr"'],
      [
        { router, idleTimeoutMs: 5 },
        'options.idleTimeoutMs: unknown option (accepted: router, balancer, policy, workers, maxConnections, youngGenerationMb, admission, host, port, logger, counters, worker, workerRestart, admissionGate, thisThreadAccepts, attempts, connectTimeoutMs, clientTimeoutMs, serverTimeoutMs, key, sendProxy, acceptProxy, acceptProxyTimeoutMs, acceptProxyMaxBytes, accessLog, timers)',
      ],
    ];
    for (const [opts, message] of cases) expect(thrown(() => new TcpProxy(opts as never)).message).toBe(message);
  });
});
