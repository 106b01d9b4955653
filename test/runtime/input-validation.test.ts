import { afterEach, describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { FlowController } from '../../src/admission/flow-controller.js';
import { holdbackCeilings } from '../../src/admission/holdback.js';
import { PeakEwma } from '../../src/load/peak-ewma.js';
import { Maglev } from '../../src/policy/maglev.js';
import { PowerOfTwo } from '../../src/policy/power-of-two.js';
import { PriorityWeightedRandom } from '../../src/policy/priority/policy.js';
import { Rendezvous } from '../../src/policy/rendezvous.js';
import { RoundRobin } from '../../src/policy/round-robin.js';
import { PoiseError } from '../../src/core/errors.js';
import { StaticMembership } from '../../src/membership/static.js';
import { TcpProxy } from '../../src/net/proxy.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { createWorkerPool } from '../../src/runtime/pool.js';
import type { Router } from '../../src/runtime/router.js';

// Bad input from a caller gets a PoiseError naming the field, never a TypeError
// from deep inside, and never a silently ignored option.

const balancers: Balancer[] = [];
afterEach(() => {
  for (const b of balancers.splice(0)) b.close();
});

function tracked(): Balancer {
  const balancer = new Balancer({ capacity: 8 });
  balancers.push(balancer);
  return balancer;
}

function routerOver(ids: string[]): Router {
  const balancer = new Balancer({ capacity: 8 });
  balancers.push(balancer);
  balancer.update(ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })));
  return balancer.router({ policy: 'round-robin' });
}

describe('acquire({ exclude })', () => {
  it('takes a Set or an array of ids, and excluded backends are never chosen', () => {
    const router = routerOver(['a', 'b', 'c']);
    for (let i = 0; i < 30; i++) {
      const fromArray = router.acquire({ exclude: ['a', 'b'] });
      expect(fromArray.id).toBe('c');
      fromArray.release('success');
      const fromSet = router.acquire({ exclude: new Set(['c']) });
      expect(fromSet.id).not.toBe('c');
      fromSet.release('success');
    }
  });

  it('refuses anything else, naming the option', () => {
    const router = routerOver(['a', 'b']);
    expect(() => router.acquire({ exclude: 'a' as never })).toThrow('acquire(options).exclude: must be a Set or an array of backend ids, got "a"');
    expect(router.openLeases).toBe(0);
  });
});

describe('constructor options', () => {
  it('Backend refuses a load that is not a function', () => {
    expect(() => new Backend('a', { load: 5 as never })).toThrow('load: must be a function returning a number, got 5');
  });

  it('TcpProxy checks its options at construction, not at the first client', () => {
    const router = routerOver(['a']);
    const cases: [unknown, string][] = [
      [undefined, 'options: must be an object, got undefined'],
      [{}, 'options.router: must be a Router (or give options.balancer), got undefined'],
      [{ router: {} }, 'options.router: must be a Router, got a object'],
      [{ router, workers: 1 }, 'options.workers: must be an integer in [0, 0], got 1'],
      [{ router, maxConnections: -1 }, 'options.maxConnections: must be an integer in [0, 2147483647], got -1'],
      [{ router, attempts: 0 }, 'options.attempts: must be an integer in [1, 100], got 0'],
      [{ router, connectTimeoutMs: -5 }, 'options.connectTimeoutMs: must be a finite number > 0, got -5'],
      [{ router, host: 7 }, 'options.host: must be a non-empty string, got 7'],
      [{ router, key: 'ip' }, 'options.key: must be "client-ip", "client-ip:port" or a function of the client socket, got "ip"'],
      [{ router, clientTimeoutMs: -1 }, 'options.clientTimeoutMs: must be an integer in [0, 2147483647] (milliseconds), got -1'],
      [{ router, serverTimeoutMs: 1.5 }, 'options.serverTimeoutMs: must be an integer in [0, 2147483647] (milliseconds), got 1.5'],
      [{ router, sendProxy: 'v3' }, 'options.sendProxy: must be "v1" or "v2", got "v3"'],
      [{ router, acceptProxy: 'yes' }, 'options.acceptProxy: must be a boolean, got "yes"'],
      [{ router, acceptProxy: true, acceptProxyTimeoutMs: 0 }, 'options.acceptProxyTimeoutMs: must be an integer in [1, 2147483647] (milliseconds), got 0'],
      [{ router, acceptProxyMaxBytes: 27 }, 'options.acceptProxyMaxBytes: must be an integer in [28, 65551], got 27'],
      [{ router, accessLog: 'stderr' }, 'options.accessLog: must be a pino logger or "stdout", got "stderr"'],
      [{ router, idleTimeoutMs: 5 }, 'options.idleTimeoutMs: unknown option (accepted: router, balancer, policy, workers, maxConnections, youngGenerationMb, admission, host, port, logger, counters, worker, attempts, connectTimeoutMs, clientTimeoutMs, serverTimeoutMs, key, sendProxy, acceptProxy, acceptProxyTimeoutMs, acceptProxyMaxBytes, accessLog)'],
    ];
    for (const [opts, message] of cases) {
      let err: unknown;
      try {
        new TcpProxy(opts as never);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(PoiseError);
      expect((err as PoiseError).message).toBe(message);
    }
  });

  it('createWorkerPool refuses an unknown policy in the owner thread, before any worker starts', () => {
    const balancer = new Balancer({ capacity: 4 });
    balancers.push(balancer);
    expect(() => createWorkerPool({ balancer, filename: new URL('file:///nowhere.js'), threads: 1, policy: 'fastest' as never })).toThrow(
      /^options\.policy: must be one of round-robin, .*, got "fastest"$/,
    );
  });

  it('StaticMembership rejects a missing file with a NotFound PoiseError naming input.file', async () => {
    const source = new StaticMembership({ file: '/nonexistent/poise-members.json' });
    const err = await source.start(() => {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PoiseError);
    expect((err as PoiseError).code).toBe('NotFound');
    expect((err as PoiseError).field).toBe('input.file');
    expect((err as PoiseError).message).toMatch(/^input\.file: cannot read "\/nonexistent\/poise-members\.json": ENOENT/);
    await source.close();
  });
});

describe('misspelled options are refused, never silently defaulted', () => {
  it('every policy still accepts { seed } (DESIGN: exact replay), the keyed ones included', () => {
    for (const make of [() => new Rendezvous({ seed: 1 }), () => new Maglev({ seed: 1, tableSize: 7 }), () => new RoundRobin({ seed: 1 }), () => new PowerOfTwo({ seed: 1 })]) {
      expect(make).not.toThrow();
    }
  });

  it.each([
    ['Balancer', () => new Balancer({ capcity: 8 } as never), 'options.capcity: unknown option (accepted: capacity, maxThreads,'],
    ['Router', () => tracked().router({ polcy: 'random' } as never), 'options.polcy: unknown option (accepted: policy,'],
    ['ejection', () => tracked().router({ ejection: { consecutiveFailure: 1 } } as never), 'options.ejection.consecutiveFailure: unknown option'],
    ['PowerOfTwo', () => new PowerOfTwo({ sed: 1 } as never), 'options.sed: unknown option (accepted: seed)'],
    ['RoundRobin', () => new RoundRobin({ seeds: 1 } as never), 'options.seeds: unknown option (accepted: seed)'],
    ['Rendezvous', () => new Rendezvous({ hashseed: 1n } as never), 'options.hashseed: unknown option (accepted: hashSeed, seed)'],
    ['Maglev', () => new Maglev({ size: 7 } as never), 'options.size: unknown option (accepted: hashSeed, tableSize, seed, balanceFactor, totalLoad)'],
    ['PeakEwma', () => new PeakEwma({ tau: 10 } as never), 'options.tau: unknown option (accepted: tauMs, initialMs, clock)'],
    ['PriorityWeightedRandom', () => new PriorityWeightedRandom({ overprovisioning: 150 } as never), 'options.overprovisioning: unknown option'],
    ['holdbackCeilings', () => holdbackCeilings([1, 0], { minCeiling: 0.5, max: 1 } as never), 'options.max: unknown option'],
    ['FlowController', () => new FlowController({ capacity: 2, priorities: [0], minCeiling: 0, queue: 3 } as never), 'options.queue: unknown option'],
  ])('%s', (_name, make, message) => {
    let err: unknown;
    try {
      make();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PoiseError);
    expect((err as PoiseError).code).toBe('InvalidConfig');
    expect((err as PoiseError).message).toContain(message);
  });
});
