import { afterEach, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { createWorkerPool } from '../../src/runtime/pool.js';

const balancers: Balancer[] = [];
afterEach(() => {
  for (const b of balancers.splice(0)) b.close();
});

describe('createWorkerPool options', () => {
  it('createWorkerPool refuses an unknown policy in the owner thread, before any worker starts', () => {
    const balancer = new Balancer({ capacity: 4 });
    balancers.push(balancer);
    expect(() => createWorkerPool({ balancer, filename: new URL('file:///nowhere.js'), threads: 1, policy: 'fastest' as never })).toThrow(
      /^options\.policy: must be one of round-robin, .*, got "fastest"$/,
    );
  });

  it('refuses a log level pino does not know, naming options.logLevel, before any worker starts', () => {
    const balancer = new Balancer({ capacity: 4 });
    balancers.push(balancer);
    expect(() => createWorkerPool({ balancer, filename: new URL('file:///nowhere.js'), threads: 1, logLevel: 'loud' as never })).toThrow(
      /^options\.logLevel: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"$/,
    );
  });
});
